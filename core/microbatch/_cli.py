"""The ``microbatch`` command.

::

    microbatch connectors [NAME]              installed connectors, or one connector's options
    microbatch checkpoint inspect DIR [--json]   what a checkpoint holds (DIR may be an fsspec URL)
    microbatch checkpoint forget-identity DIR [--source] [--sink]   let a query move on purpose
    microbatch demo [--seconds N] [--files-per-second N]   JSON files -> parquet table, live
                                                         (needs microbatch-demo)
    microbatch docs options [--output FILE]   the option reference, in Markdown

Start-up stays quick: only the registry and options load up front; the engine and pyarrow-heavy
modules load inside the subcommands that need them. Exit codes: 0 success, 1 a failure (a bad
checkpoint, a failed query), 2 a usage error (unknown subcommand, unknown connector).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from ._cli_checkpoint import cmd_checkpoint_forget_identity, cmd_checkpoint_inspect
from ._registry import ConnectorInfo, ConnectorRegistry
from .errors import UnknownFormatError
from .options import Option

__all__ = ["build_parser", "main", "render_option_reference"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:  # the demo's own parser reads its options
        argv = ["demo", "--", *argv[1:]]
    args = build_parser().parse_args(argv)
    out, err = _console(stderr=False), _console(stderr=True)
    try:
        code: int = args.handler(args, out, err)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        return 130
    return code


def _console(*, stderr: bool) -> Console:
    """A console that, when not writing to a terminal, is wide enough for the tables."""
    console = Console(stderr=stderr, soft_wrap=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, soft_wrap=stderr, width=_PIPE_WIDTH)
    return console


_PIPE_WIDTH = 160


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``microbatch`` command."""
    parser = argparse.ArgumentParser(
        prog="microbatch",
        description="Structured-Streaming-style micro-batch pipelines in one Python process.",
    )
    parser.add_argument("--version", action="version", version=f"microbatch {__version__}")
    commands = _command_group(parser)

    connectors = commands.add_parser(
        "connectors",
        help="list installed connectors, or show one connector's options",
        description="Without NAME: every installed connector with its distribution. With NAME: "
        "that connector's description, roles and options.",
    )
    connectors.add_argument("name", nargs="?", metavar="NAME", help="a format name, e.g. rate")
    connectors.set_defaults(handler=_cmd_connectors)

    checkpoint_commands = _command_group(
        commands.add_parser("checkpoint", help="look at a query's checkpoint")
    )
    inspect = checkpoint_commands.add_parser(
        "inspect",
        help="summarise a checkpoint: query id, format, lock, batches",
        description="Summarise a checkpoint: its query, its format and fixed settings, who "
        "holds it, the state files, and every logged batch with its offsets (per source) and "
        "whether it was committed.",
    )
    inspect.add_argument("location", metavar="DIR", help="checkpoint folder or fsspec URL")
    inspect.add_argument("--json", action="store_true", help="print a machine-readable dump")
    inspect.set_defaults(handler=cmd_checkpoint_inspect)
    forget = checkpoint_commands.add_parser(
        "forget-identity",
        help="let a query move to another source or sink location on purpose",
        description="Remove the source and/or sink identity (format, path, identity options) "
        "recorded in a stopped query's checkpoint. The next start records the query's new "
        "source or sink instead of refusing it. The offsets stay: a moved source is read on "
        "from the recorded position, so the new location must hold the same data.",
    )
    forget.add_argument("location", metavar="DIR", help="checkpoint folder or fsspec URL")
    forget.add_argument("--source", action="store_true", help="forget the source's identity")
    forget.add_argument("--sink", action="store_true", help="forget the sink's identity")
    forget.set_defaults(handler=cmd_checkpoint_forget_identity)

    demo = commands.add_parser(
        "demo",
        help="stream generated JSON event files into a parquet table, live (microbatch-demo)",
        description="Runs the demo job of the microbatch-demo distribution; its options are "
        "those of microbatch-demo --help.",
        add_help=False,
    )
    demo.add_argument("arguments", nargs=argparse.REMAINDER)
    demo.set_defaults(handler=_cmd_demo)

    docs_commands = _command_group(
        commands.add_parser("docs", help="render reference documentation")
    )
    options = docs_commands.add_parser(
        "options",
        help="the option reference of every installed connector, in Markdown",
        description="Render the option reference of every installed connector (and the "
        "session settings) from the options they declare.",
    )
    options.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    options.add_argument(
        "--distribution",
        action="append",
        metavar="NAME",
        help="only connectors of this distribution (repeatable)",
    )
    options.set_defaults(handler=_cmd_docs_options)
    return parser


def _command_group(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Give ``parser`` sub-commands (added to what this returns); without one it prints its
    help and exits with status 2."""
    parser.set_defaults(handler=lambda args, out, err: _usage(parser, err))
    return parser.add_subparsers(title="commands", metavar="COMMAND")


def _usage(parser: argparse.ArgumentParser, err: Console) -> int:
    parser.print_help(sys.stderr)
    return 2


# -- connectors --------------------------------------------------------------------------


def _load_registry() -> ConnectorRegistry:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    return registry


def _cmd_connectors(args: argparse.Namespace, out: Console, err: Console) -> int:
    registry = _load_registry()
    if args.name is None:
        _print_connector_list(registry, out, err)
        return 0
    try:
        infos = sorted(registry.find_any(args.name), key=lambda info: info.role != "source")
    except UnknownFormatError as error:
        err.print(escape(str(error)), highlight=False)
        return 2
    _print_connector(infos, out)
    return 0


def _guarantee(info: ConnectorInfo) -> str:
    cls: Any = info.cls
    if info.role == "sink":
        return str(cls.capabilities.guarantee)
    return "replayable" if cls.capabilities.replayable else "not replayable"


def _output_modes(info: ConnectorInfo) -> str:
    if info.role != "sink":
        return ""
    modes: Any = info.cls.capabilities.output_modes  # type: ignore[union-attr]
    order = ["append", "update", "complete"]
    return ", ".join(sorted((str(mode) for mode in modes), key=order.index))


def _print_connector_list(registry: ConnectorRegistry, out: Console, err: Console) -> None:
    table = Table(title="Installed connectors", title_justify="left")
    table.add_column("Format", style="bold", no_wrap=True)
    table.add_column("Role", no_wrap=True)
    table.add_column("Output modes")
    table.add_column("Guarantee")
    table.add_column("Distribution", no_wrap=True)
    table.add_column("Description")
    for info in registry.connectors():
        table.add_row(
            escape(info.format_name),
            info.role,
            _output_modes(info),
            _guarantee(info),
            escape(f"{info.distribution} {info.version}".strip()),
            escape(info.cls.description),
        )
    if registry.connectors():
        out.print(table)
        out.print("Details and options: microbatch connectors NAME", highlight=False)
    else:
        out.print(
            "No connector is installed. Install one, e.g. pip install microbatch-rate",
            highlight=False,
        )
    if registry.failures:
        failed = Table(title="Plugins that failed to load", title_justify="left", style="yellow")
        for column in ("Plugin", "Distribution", "Version", "Error"):
            failed.add_column(column)
        for failure in registry.failures:
            failed.add_row(
                escape(failure.plugin),
                escape(failure.distribution),
                escape(failure.version),
                escape(failure.error),
            )
        err.print("[yellow]Warning:[/] some connector plugins could not be loaded.")
        err.print(failed)


def _print_connector(infos: list[ConnectorInfo], out: Console) -> None:
    first = infos[0]
    roles = " and ".join(info.role for info in infos)
    out.print(f"[bold]{escape(first.format_name)}[/] ({roles})", highlight=False)
    out.print(
        escape(f"Distribution: {first.distribution} {first.version}".strip())
        + escape(f" (plugin '{first.plugin}')"),
        highlight=False,
    )
    for info in infos:
        cls: Any = info.cls
        out.print()
        out.print(f"[bold]{info.role.capitalize()}[/] {escape(cls.__qualname__)}", highlight=False)
        if cls.description:
            out.print(escape(cls.description), highlight=False)
        for label, value in _capabilities(info):
            out.print(f"  {label}: {escape(value)}", highlight=False)
        out.print(_options_table(list(cls.options), title=f"{info.role.capitalize()} options"))
        if cls.options.prefixes:
            out.print(escape(_prefix_note(cls.options.prefixes)), highlight=False)


def _capabilities(info: ConnectorInfo) -> list[tuple[str, str]]:
    capabilities: Any = info.cls.capabilities
    if info.role == "source":
        return [
            ("replayable", _yes_no(capabilities.replayable)),
            ("available-now", "supported" if capabilities.available_now else "one batch"),
            ("user schema", capabilities.user_schema),
        ]
    return [
        ("output modes", _output_modes(info)),
        ("guarantee", str(capabilities.guarantee)),
        ("needs a checkpoint", _yes_no(capabilities.needs_checkpoint)),
        ("partition_by", "supported" if capabilities.partition_by else "not supported"),
    ]


def _prefix_note(prefixes: tuple[str, ...]) -> str:
    shown = ", ".join(f"'{prefix}*'" for prefix in prefixes)
    return f"Also accepts any option named {shown}, passed through to the client library."


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _options_table(options: list[Option], *, title: str) -> Table | str:
    if not options:
        return "  (no options)"
    table = Table(title=title, title_justify="left")
    table.add_column("Option", style="bold", no_wrap=True)
    table.add_column("Type", no_wrap=True)
    table.add_column("Default", no_wrap=True)
    table.add_column("Required", no_wrap=True)
    table.add_column("Choices")
    table.add_column("Description")
    for option in options:
        cells = _option_cells(option)
        table.add_row(*(escape(cell) for cell in cells))
    return table


# -- option rendering (shared by the table and the Markdown reference) -------------------


def _option_cells(option: Option) -> tuple[str, str, str, str, str, str]:
    doc = " ".join(option.doc.split())
    if option.secret:
        doc = f"(secret) {doc}".strip()
    return (
        option.name,
        _type_text(option),
        _default_text(option),
        "yes" if option.required else "",
        ", ".join(option.choices or ()),
        doc,
    )


def _type_text(option: Option) -> str:
    low, high = option.minimum, option.maximum
    bounds = ""
    if low is not None and high is not None:
        bounds = f" {_number(low)}..{_number(high)}"
    elif low is not None:
        bounds = f" >= {_number(low)}"
    elif high is not None:
        bounds = f" <= {_number(high)}"
    if bounds and option.type == "duration":
        bounds += " s"
    return option.type + bounds


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _default_text(option: Option) -> str:
    value = option.default
    if value is None or option.secret:
        return ""
    if option.type == "object":
        return f"<{type(value).__name__}>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return _duration_text(value)
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _duration_text(value: timedelta) -> str:
    seconds = value.total_seconds()
    if seconds and seconds < 1:
        return f"{_number(round(seconds * 1000, 3))}ms"
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{_number(seconds / size)} {unit}"
    return f"{_number(seconds)} seconds"


def render_option_reference(
    registry: ConnectorRegistry | None = None, *, distributions: Iterable[str] | None = None
) -> str:
    """The Markdown option reference: session settings, then one section per connector.

    ``distributions`` limits the connectors to those distributions (all installed by default).
    """
    if registry is None:
        registry = _load_registry()
    wanted = {name.lower() for name in distributions} if distributions is not None else None
    lines = [
        "# Option reference",
        "",
        "<!-- Generated by `microbatch docs options` (`make docs`) from the options each "
        "connector declares. Do not edit by hand. -->",
        "",
        "Option names are case-insensitive and may be written in camelCase or snake_case "
        "(`rowsPerSecond`, `rows_per_second`). Unknown options and invalid values fail when the "
        'query starts (`start()` / `load()`), with a "did you mean" for misspelt names.',
        "",
    ]
    session_options = _session_options()
    if session_options:
        lines += [
            "## Session settings",
            "",
            "Set with `mb.Session(conf={...})` or `session.conf.set(name, value)`.",
            "",
        ]
        lines += _markdown_table(session_options)
    for info in sorted(registry.connectors(), key=lambda i: (i.format_name, i.role != "source")):
        if wanted is not None and info.distribution.lower() not in wanted:
            continue
        cls: Any = info.cls
        title = f"## `{info.format_name}` {info.role}"
        lines += [title, ""]
        lines.append(
            f"Distribution `{info.distribution}` {info.version}. {cls.description}".rstrip()
        )
        lines.append("")
        facts = [f"{label}: {value}" for label, value in _capabilities(info)]
        lines += ["- " + fact for fact in facts]
        lines.append("")
        lines += _markdown_table(list(cls.options))
        if cls.options.prefixes:
            lines += [_prefix_note(cls.options.prefixes).replace("'", "`"), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _session_options() -> list[Option]:
    """``microbatch._session.SESSION_OPTIONS`` when the session module declares them."""
    try:
        module = importlib.import_module("._session", __package__)
    except ModuleNotFoundError:
        return []
    declared = getattr(module, "SESSION_OPTIONS", None)
    return list(declared) if declared is not None else []


def _markdown_table(options: list[Option]) -> list[str]:
    if not options:
        return ["No options.", ""]
    rows = ["| Option | Type | Default | Required | Choices | Description |", "| --- " * 6 + "|"]
    for option in options:
        name, kind, default, required, choices, doc = _option_cells(option)
        cells = [
            f"`{name}`",
            kind,
            f"`{default}`" if default else "",
            required,
            ", ".join(f"`{choice}`" for choice in option.choices or ()) if choices else "",
            doc,
        ]
        rows.append("| " + " | ".join(_markdown_cell(cell) for cell in cells) + " |")
    return [*rows, ""]


def _markdown_cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (no column breaks, no HTML tags)."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def _cmd_docs_options(args: argparse.Namespace, out: Console, err: Console) -> int:
    registry = _load_registry()
    for failure in registry.failures:
        err.print(
            escape(
                f"Warning: plugin '{failure.plugin}' ({failure.distribution}) failed to load: "
                f"{failure.error}"
            ),
            highlight=False,
        )
    text = render_option_reference(registry, distributions=args.distribution)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
        err.print(f"Wrote {escape(args.output)}", highlight=False)
    else:
        sys.stdout.write(text)
    return 0


# -- demo --------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        from microbatch_demo.cli import main as demo_main
    except ImportError:
        err.print(
            "The demo is in the microbatch-demo distribution, which is not installed: "
            "pip install microbatch-demo (make demo installs it).",
            highlight=False,
        )
        return 2
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    code: int = demo_main(arguments)
    return code


if __name__ == "__main__":
    sys.exit(main())

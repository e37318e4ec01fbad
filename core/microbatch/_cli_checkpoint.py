"""The ``microbatch checkpoint`` commands: ``inspect`` and ``forget-identity``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ._batch_entry import FORMAT_VERSION
from .errors import CheckpointError, MicrobatchError

if TYPE_CHECKING:
    from ._checkpoint import Checkpoint
    from .state import StateStore

__all__ = ["cmd_checkpoint_forget_identity", "cmd_checkpoint_inspect", "inspect_checkpoint"]


def inspect_checkpoint(location: str) -> dict[str, Any]:
    """A JSON-able summary of the checkpoint at ``location``.

    Raises :class:`~microbatch.errors.CheckpointError` when there is no checkpoint there and
    :class:`~microbatch.errors.CorruptCheckpointError` naming a file that cannot be read.
    """
    from ._checkpoint import Checkpoint
    from .progress import iso_timestamp

    checkpoint = Checkpoint(location)
    root = checkpoint.root
    if not root.fs.exists(root.path):
        raise CheckpointError(f"No checkpoint at {location}: the folder does not exist.")
    if root.fs.isfile(root.path):
        raise CheckpointError(f"{location} is a file, not a checkpoint folder.")
    metadata = checkpoint.metadata()
    version = checkpoint.format_version()  # a newer format than this code reads fails here
    offset_ids = checkpoint.batch_ids(checkpoint.offsets)
    commit_ids = checkpoint.batch_ids(checkpoint.commits)
    if metadata is None and not offset_ids and not commit_ids:
        raise CheckpointError(
            f"{location} is not a checkpoint: it has no metadata file and no offset or commit log."
        )
    checkpoint.check_logs()  # a damaged or inconsistent log fails here, naming the file
    batches: list[dict[str, Any]] = []
    for batch_id in offset_ids:
        entry = checkpoint.read_offsets(batch_id)
        committed = checkpoint.is_committed(batch_id)
        commit = checkpoint.commits.read(str(batch_id)) if committed else None
        batches.append(
            {
                "batchId": batch_id,
                "formatVersion": entry.format_version,
                "batchTimestampMs": entry.timestamp_ms,
                "timestamp": iso_timestamp(entry.timestamp_ms / 1000),
                "batchWatermarkMs": entry.watermark_ms,
                "start": entry.start,
                "end": entry.end,
                "sources": [source.to_json() for source in entry.sources],
                "conf": dict(entry.conf),
                "committed": committed,
                "numInputRows": commit.get("numInputRows") if isinstance(commit, dict) else None,
            }
        )
    pending = [batch["batchId"] for batch in batches if not batch["committed"]]
    sources = max((len(batch["sources"]) for batch in batches), default=1)
    state = {
        f"sources/{index}": sorted(checkpoint.source_state(index).names())
        for index in range(sources)
    }
    state["sink"] = sorted(checkpoint.sink_state().names())
    for operator in checkpoint.operator_ids():
        state[f"state/{operator}"] = _files_below(checkpoint.operator_state(operator))
    return {
        "checkpoint": checkpoint.url,
        "formatVersion": version,
        "upgradeOnNextStart": version is not None and version < FORMAT_VERSION,
        "metadata": metadata,
        "lock": root.read("lock"),
        "lockHolder": _lock_holder(checkpoint),
        "fixedConf": _fixed_conf(checkpoint, batches),
        "batches": batches,
        "commitsWithoutOffsets": sorted(set(commit_ids) - set(offset_ids)),
        "rerunOnRestart": pending[-1] if pending and pending[-1] == offset_ids[-1] else None,
        "state": state,
    }


def _fixed_conf(checkpoint: Checkpoint, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings fixed for the checkpoint, as its next start would use them (``values``;
    those of a session with default settings when no batch was logged), and where from."""
    if not batches:
        return {"values": None, "recordedIn": None}
    latest = batches[-1]
    recorded = f"offsets/{latest['batchId']}" if latest["formatVersion"] >= 2 else None
    return {"values": checkpoint.fixed_conf, "recordedIn": recorded}


def _files_below(store: StateStore) -> list[str]:
    """Paths of every file below ``store``'s folder, relative to it, sorted."""
    base = store.path.rstrip("/")
    try:
        found = store.fs.find(base)
    except FileNotFoundError:
        return []
    return sorted(str(path)[len(base) :].lstrip("/") for path in found)


def _lock_holder(checkpoint: Checkpoint) -> str | None:
    """Who holds the checkpoint's lock, or ``None`` when it is free or the lock is stale."""
    if not checkpoint.root.exists("lock"):
        return None
    return checkpoint.lock_holder()


def cmd_checkpoint_inspect(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        summary = inspect_checkpoint(args.location)
    except MicrobatchError as error:
        err.print(f"[red]Error:[/] {escape(str(error))}", highlight=False)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_checkpoint(summary, out)
    return 0


def cmd_checkpoint_forget_identity(args: argparse.Namespace, out: Console, err: Console) -> int:
    from ._checkpoint import Checkpoint

    sides = tuple(side for side in ("source", "sink") if getattr(args, side)) or (
        "source",
        "sink",
    )
    try:
        checkpoint = Checkpoint(args.location)
        if not checkpoint.root.fs.isdir(checkpoint.root.path):
            raise CheckpointError(f"No checkpoint at {args.location}: the folder does not exist.")
        forgotten = checkpoint.forget_identity(sides)
    except MicrobatchError as error:
        err.print(f"[red]Error:[/] {escape(str(error))}", highlight=False)
        return 1
    if forgotten:
        names = " and ".join(forgotten)
        out.print(
            f"Forgot the {names} identity of {escape(args.location)}: the next start records "
            "the query's current one.",
            highlight=False,
        )
    else:
        out.print(
            f"{escape(args.location)} records no {' or '.join(sides)} identity: nothing to do.",
            highlight=False,
        )
    return 0


def _print_checkpoint(summary: dict[str, Any], out: Console) -> None:
    metadata = summary["metadata"] or {}
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("Checkpoint", summary["checkpoint"])
    facts.add_row("Query id", str(metadata.get("id", "(metadata missing)")))
    facts.add_row("Source", str(metadata.get("source", "?")))
    facts.add_row("Sink", str(metadata.get("sink", "?")))
    identity = metadata.get("identity")
    for side, label in (("source", "Reads"), ("sink", "Writes")):
        if isinstance(identity, dict) and isinstance(identity.get(side), dict):
            shown = ", ".join(
                f"{key}={value}" for key, value in identity[side].items() if key != "format"
            )
            if shown:
                facts.add_row(label, escape(shown))
    facts.add_row("Created", str(metadata.get("createdAt", "?")))
    facts.add_row("Format", _format_text(summary))
    facts.add_row("Fixed conf", escape(_fixed_conf_text(summary)))
    facts.add_row("Lock", _lock_text(summary))
    state = summary["state"]
    facts.add_row("State files", ", ".join(f"{name}: {len(state[name])}" for name in state))
    out.print(facts, highlight=False)
    batches = summary["batches"]
    if not batches:
        out.print("\nNo batch has been logged yet.", highlight=False)
        return
    # columns that would say nothing are left out: the entry format while every entry is in
    # the current one, the watermark while no batch has one
    formats = any(batch["formatVersion"] != FORMAT_VERSION for batch in batches)
    watermarks = any(batch["batchWatermarkMs"] for batch in batches)
    table = Table(title=f"Batches ({len(batches)} in the log)", title_justify="left")
    table.add_column("Batch", justify="right")
    if formats:
        table.add_column("Format", justify="right")
    table.add_column("Timestamp", no_wrap=True)
    table.add_column("Start offset", overflow="fold")
    table.add_column("End offset", overflow="fold")
    if watermarks:
        table.add_column("Watermark", no_wrap=True)
    table.add_column("Rows", justify="right")
    table.add_column("Committed")
    for batch in batches:
        rows = batch["numInputRows"]
        cells = [str(batch["batchId"])]
        if formats:
            cells.append(str(batch["formatVersion"]))
        cells += [
            batch["timestamp"],
            escape(_ranges(batch["sources"], "start")),
            escape(_ranges(batch["sources"], "end")),
        ]
        if watermarks:
            cells.append(_watermark_text(batch["batchWatermarkMs"]))
        cells.append("" if rows is None else str(rows))
        cells.append("yes" if batch["committed"] else "[yellow]no[/]")
        table.add_row(*cells)
    out.print()
    out.print(table)
    rerun = summary["rerunOnRestart"]
    if rerun is not None:
        out.print(
            f"Batch {rerun} was logged but not committed: the next run re-runs it with the same "
            "offsets and batch id.",
            highlight=False,
        )
    gaps = [batch["batchId"] for batch in batches if not batch["committed"]]
    if [gap for gap in gaps if gap != rerun]:
        out.print(
            f"Batches {', '.join(str(gap) for gap in gaps if gap != rerun)} have no commit entry "
            "but later batches do; they will not be re-run.",
            highlight=False,
        )


def _lock_text(summary: dict[str, Any]) -> str:
    lock = summary["lock"]
    if not isinstance(lock, dict):
        return "free"
    holder = summary["lockHolder"]
    if holder:
        return f"held by {holder}"
    return (
        f"stale (left by pid {lock.get('pid')} on {lock.get('host')}, which no longer runs it); "
        "the next run takes it over"
    )


def _format_text(summary: dict[str, Any]) -> str:
    version = summary["formatVersion"]
    if version is None:
        return "? (metadata missing)"
    if summary["upgradeOnNextStart"]:
        return f"{version} (upgraded to format {FORMAT_VERSION} in place by the next start)"
    upgraded = (summary["metadata"] or {}).get("upgradedFrom")
    return f"{version} (upgraded from format {upgraded})" if upgraded else str(version)


def _fixed_conf_text(summary: dict[str, Any]) -> str:
    fixed = summary["fixedConf"]
    if fixed["values"] is None:
        return "none yet (the first batch records the session's values)"
    shown = ", ".join(f"{name}={value}" for name, value in fixed["values"].items())
    if fixed["recordedIn"] is None:
        return f"{shown} (none recorded: the newest entry is in format 1)"
    return f"{shown} (as recorded in {fixed['recordedIn']})"


def _ranges(sources: list[dict[str, Any]], side: str) -> str:
    """One side of every source's range: the offset itself for one source, else one
    ``<index>: <offset>`` line per source."""
    if len(sources) == 1:
        return _compact(sources[0][side])
    return "\n".join(f"{index}: {_compact(source[side])}" for index, source in enumerate(sources))


def _watermark_text(watermark_ms: int) -> str:
    from .progress import iso_timestamp

    return iso_timestamp(watermark_ms / 1000) if watermark_ms else "-"


def _compact(value: Any) -> str:
    return "-" if value is None else json.dumps(value, separators=(",", ":"))

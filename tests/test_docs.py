"""The documentation is tested: its examples run, and its references match the code."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from microbatch import hookspecs
from microbatch._cli import build_parser, render_option_reference
from microbatch._registry import ConnectorRegistry

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def code_blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == language]


def first_party_distributions() -> list[str]:
    names = []
    for pyproject in sorted(ROOT.glob("connectors/*/pyproject.toml")):
        names.append(tomllib.loads(pyproject.read_text())["project"]["name"])
    return names


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "doc_example.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=180
    )


# -- README ------------------------------------------------------------------------------


def test_readme_starts_with_make_demo_and_make_test() -> None:
    text = README.read_text()
    title, pitch, rest = text.split("\n\n", 2)
    assert title.startswith("# ")
    assert "\n" not in pitch.strip() and pitch.strip().endswith(".")
    match = FENCE.match(rest)
    assert match is not None, "the first thing after the pitch must be a code block"
    commands = [line.split("#")[0].strip() for line in match.group(2).splitlines()]
    assert commands[:2] == ["make demo", "make test"]


def test_readme_quick_start_runs(tmp_path: Path) -> None:
    [quick_start] = code_blocks(README, "python")
    result = run_python(quick_start, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["90", "100"]


def test_readme_lists_exactly_the_first_party_connectors() -> None:
    text = README.read_text()
    listed = set(re.findall(r"^\| `(microbatch-[a-z0-9-]+)` \|", text, re.M))
    assert listed == set(first_party_distributions())


# -- guides ------------------------------------------------------------------------------


def test_getting_started_runs_as_one_script(tmp_path: Path) -> None:
    code = "\n".join(code_blocks(DOCS / "getting-started.md", "python"))
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "did you mean 'rowsPerSecond'?" in result.stdout
    assert "Batch: 0" in result.stdout
    assert lines[-5:-1] == ["90", "1", "200", "(100,)"]
    assert lines[-1].startswith("0 100 ")


def test_connector_guide_passes_the_test_kit(tmp_path: Path) -> None:
    module = tmp_path / "test_guide_connector.py"
    module.write_text("\n".join(code_blocks(DOCS / "writing-a-connector.md", "python")))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", str(module)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TestLinesSourceContract::" in result.stdout
    assert "TestParquetFolderSinkContract::" in result.stdout
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"=+ \d+ passed(, \d+ skipped)? in ", summary), summary
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    # only the checks of output modes the example sink does not declare are skipped, and the
    # registration check (the guide's module is not part of an installed distribution)
    assert all(
        "does not declare" in line or "is not part of an installed distribution" in line
        for line in skips
    ), "\n".join(skips)


def test_every_hook_is_documented_for_connector_authors() -> None:
    guide = (DOCS / "writing-a-connector.md").read_text()
    hooks = [name for name, value in vars(hookspecs).items() if hasattr(value, "microbatch_spec")]
    assert "microbatch_register_connectors" in hooks
    missing = [name for name in hooks if f"`{name}(" not in guide]
    assert not missing, f"hooks not documented in docs/writing-a-connector.md: {missing}"


def test_every_cli_command_is_documented() -> None:
    parser = build_parser()
    cli_doc = (DOCS / "cli.md").read_text()
    commands = []
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            subnames = [f"{name} {child}" for a in nested for child in a.choices] or [name]
            commands += subnames
    assert {"connectors", "checkpoint inspect", "demo", "docs options"} <= set(commands)
    missing = [command for command in commands if f"## `microbatch {command}" not in cli_doc]
    assert not missing, f"commands without a section in docs/cli.md: {missing}"


def test_relative_links_point_to_existing_files() -> None:
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


# -- option reference --------------------------------------------------------------------


def test_option_reference_is_up_to_date() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    installed = {info.distribution for info in registry.connectors()}
    missing = [name for name in first_party_distributions() if name not in installed]
    if missing:
        pytest.fail(f"first-party connectors not installed: {missing}; run `make install`")
    expected = render_option_reference(registry, distributions=first_party_distributions())
    current = (DOCS / "options.md").read_text()
    assert current == expected, (
        f"docs/options.md is out of date: run `make docs` (plugin failures: {registry.failures})"
    )


def test_every_option_has_a_doc_string() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    undocumented = [
        f"{info.format_name} ({info.role}): {option.name}"
        for info in registry.connectors()
        for option in info.cls.options
        if not option.doc.strip()
    ]
    assert not undocumented


def test_docs_options_command_matches_the_reference(tmp_path: Path) -> None:
    arguments = [f"--distribution={name}" for name in first_party_distributions()]
    target = tmp_path / "options.md"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "microbatch._cli",
            "docs",
            "options",
            "--output",
            str(target),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert target.read_text() == (DOCS / "options.md").read_text()

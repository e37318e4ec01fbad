"""Compare what a torture pipeline's sink holds with what was written into its input.

The sink is read as any user would, through its manifest (``session.read``). A row is *lost*
when its id is missing, *doubled* for each extra copy, and *bad* when it matches no input row
(a null or unknown id, or columns that differ from the row written).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
from torture_input import Row

import microbatch as mb
from microbatch_file.manifest import METADATA_DIR, Manifest

__all__ = ["SinkReport", "check_archive", "check_sink", "compare", "orphan_files", "read_rows"]


@dataclass
class SinkReport:
    """What a sink holds, compared with the rows expected."""

    expected: int
    found: int
    lost: int
    doubled: int
    bad: int
    problems: list[str] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    doubles_allowed: bool = False
    """True for an at-least-once sink: extra copies are counted, not a failure."""

    @property
    def ok(self) -> bool:
        doubled = self.doubled and not self.doubles_allowed
        return not (self.lost or doubled or self.bad or self.problems)


def read_rows(output: Path) -> list[tuple]:
    """Every row of the sink at ``output`` as ``(id, file, note, kind)``, read through its
    manifest as a user would (``session.read``)."""
    table = mb.Session().read.format("parquet").load(str(output))
    columns = [table.column(name).to_pylist() for name in ("id", "file", "note", "kind")]
    return list(zip(*columns, strict=True)) if table.num_rows else []


def compare(rows: list[tuple], expected: dict[int, Row]) -> SinkReport:
    """Compare the rows a sink holds with the rows written."""
    counts = Counter(row[0] for row in rows)
    bad = [row for row in rows if row[0] not in expected or tuple(row) != expected[row[0]]]
    report = SinkReport(
        expected=len(expected),
        found=len(rows),
        lost=sum(1 for ident in expected if ident not in counts),
        doubled=sum(count - 1 for ident, count in counts.items() if ident in expected),
        bad=len(bad),
        seen=set(counts),
    )
    if bad:
        report.problems.append(f"{len(bad)} rows match no input row, e.g. {bad[:3]}")
    return report


def check_sink(output: Path, expected: dict[int, Row]) -> SinkReport:
    """Read the sink at ``output`` through its manifest and compare it with ``expected``."""
    try:
        rows = read_rows(output)
    except Exception as error:  # reported, not raised: the summary still prints
        return SinkReport(len(expected), 0, len(expected), 0, 0, [f"reading {output}: {error}"])
    return compare(rows, expected)


def orphan_files(output: Path) -> list[str]:
    """Data files in ``output`` that the manifest does not list (left by killed attempts)."""
    listed = {str(Path(path)) for path in Manifest(fsspec.filesystem("file"), str(output)).files()}
    return sorted(
        str(path)
        for path in output.rglob("*")
        if path.is_file()
        and METADATA_DIR not in path.parts
        and not path.name.startswith((".", "_"))
        and str(path) not in listed
    )


def check_archive(source: Path, archive: Path, contents: dict[str, bytes]) -> list[str]:
    """Problems with ``cleanSource=archive``: each input file must be archived exactly once,
    whole, under ``archive`` + its full path, and none may be left in ``source``."""
    problems = []
    left = sorted(path.name for path in source.iterdir() if not path.name.startswith((".", "_")))
    if left:
        problems.append(f"{len(left)} files never archived (still in {source}): {left[:5]}")
    archived = [path for path in archive.rglob("*") if path.is_file()]
    names = Counter(path.name for path in archived)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        problems.append(f"{len(twice)} files archived more than once: {twice[:5]}")
    unknown = sorted(set(names) - set(contents))
    if unknown:
        problems.append(f"{len(unknown)} archived files were never written: {unknown[:5]}")
    missing = sorted(set(contents) - set(names) - set(left))
    if missing:
        problems.append(f"{len(missing)} input files are neither archived nor left: {missing[:5]}")
    home = archive / source.relative_to("/")
    for path in archived:
        if path.name in contents and path.read_bytes() != contents[path.name]:
            problems.append(f"archived {path} differs from the file written")
        if path.parent != home:
            problems.append(f"archived {path} is not under {home}")
    return problems


KEY_MASK = 31
"""Upserting pipelines key each row by ``id & KEY_MASK``: keys repeat within and across files."""


def latest_per_key(expected: dict[int, Row]) -> dict[int, Row]:
    """The row of the highest id of each key (files arrive one after the other, so the
    highest id is the one processed last)."""
    latest: dict[int, Row] = {}
    for ident in sorted(expected):
        latest[ident & KEY_MASK] = expected[ident]
    return {row[0]: row for row in latest.values()}


def check_table(
    read: Callable[[], list[tuple]],
    expected: dict[int, Row],
    *,
    keyed: bool,
    where: str,
    more_problems: Callable[[], list[str]],
) -> SinkReport:
    """Compare the rows ``read`` returns with the rows written (``keyed``: with the latest row
    of each key, no key twice); ``more_problems`` (the sink's own records) are added once the
    table was read. A failed read is reported, not raised: the summary still prints."""
    wanted = latest_per_key(expected) if keyed else expected
    try:
        rows = read()
    except Exception as error:
        return SinkReport(len(wanted), 0, len(wanted), 0, 0, [f"reading {where}: {error}"])
    report = compare(rows, wanted)
    if keyed:
        keys = Counter(row[0] & KEY_MASK for row in rows)
        twice = sorted(key for key, count in keys.items() if count > 1)
        if twice:
            report.problems.append(f"keys held by more than one row: {twice[:10]}")
    report.problems += more_problems()
    return report

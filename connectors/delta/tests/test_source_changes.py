"""Versions that remove or rewrite data: Delta's errors by default, skipped or read again with
ignoreDeletes / ignoreChanges / skipChangeCommits; OPTIMIZE (dataChange=false) is skipped."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import ids, run_available_now


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def _partitioned(delta_table: Any, make_numbers: Any) -> None:
    """Version 0: ids 0-9 in part a; 1: ids 10-19 in part b."""
    delta_table.append(make_numbers(0, 10, part="a"), partition_by=["part"])
    delta_table.append(make_numbers(10, 10, part="b"), partition_by=["part"])


def _metrics(query: mb.StreamingQuery) -> dict[str, Any]:
    return dict(query.recent_progress[-1]["sources"][0]["metrics"])


def test_a_version_that_deletes_files_stops_the_stream_with_deltas_text(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    _partitioned(delta_table, make_numbers)
    checkpoint = tmp_path / "cp"
    rows, _ = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == list(range(20))
    version = delta_table.delete("part = 'a'")
    assert version == 2
    delta_table.append(make_numbers(20, 5, part="b"), partition_by=["part"])
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, checkpoint)
    cause = failure.value.__cause__
    assert isinstance(cause, mb.SourceError)
    text = str(cause)
    assert text.startswith("Detected deleted data (for example part=a/")
    assert (
        "from streaming source at version 2 (operation DELETE). This is currently not "
        "supported. If you'd like to ignore deletes, set the option 'ignoreDeletes' to 'true'. "
        f"The source table can be found at path {delta_table.uri}."
    ) in text
    # nothing was committed past the delete: a restart with the option goes on from there
    rows, query = run_available_now(session, delta_table.uri, checkpoint, ignoreDeletes=True)
    assert ids(rows) == list(range(20, 25))
    assert _metrics(query)["numSkippedDeleteCommits"] == "1"


def test_the_data_before_a_refused_version_is_read_first(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    _partitioned(delta_table, make_numbers)
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    delta_table.append(make_numbers(20, 5, part="a"), partition_by=["part"])
    delta_table.delete("part = 'b'")
    with pytest.raises(mb.StreamingQueryException, match="at version 3 "):
        run_available_now(session, delta_table.uri, checkpoint)
    assert ids(session.table(_last_memory_table(session))) == list(range(20, 25))


def _last_memory_table(session: mb.Session) -> str:
    import _delta_source_testing

    return f"delta_source_run_{_delta_source_testing._runs}"


@pytest.mark.parametrize("option", ["ignoreDeletes", "ignoreChanges", "skipChangeCommits"])
def test_each_option_skips_a_version_that_only_deletes(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path, option: str
) -> None:
    _partitioned(delta_table, make_numbers)
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    delta_table.delete("part = 'a'")
    delta_table.append(make_numbers(20, 5, part="a"), partition_by=["part"])
    rows, _ = run_available_now(session, delta_table.uri, checkpoint, **{option: True})
    assert ids(rows) == list(range(20, 25))


def test_a_version_that_rewrites_files_fails_even_with_ignore_deletes(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 10))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    version = delta_table.update({"name": "'changed'"}, "id < 3")
    for options in ({}, {"ignoreDeletes": True}):
        with pytest.raises(mb.StreamingQueryException) as failure:
            run_available_now(session, delta_table.uri, checkpoint, **options)
        text = str(failure.value.__cause__)
        assert text.startswith("Detected a data update (for example part-")
        assert (
            f"in the source table at version {version} (operation UPDATE). This is currently "
            "not supported. If you'd like to ignore updates, set the option "
            "'skipChangeCommits' to 'true'. If you would like the data update to be reflected, "
            "please restart this query with a fresh checkpoint directory. The source table can "
            f"be found at path {delta_table.uri}."
        ) in text


def test_skip_change_commits_skips_rewrites_and_ignore_changes_reads_their_files_again(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path, caplog: Any
) -> None:
    delta_table.append(make_numbers(0, 10))
    run_available_now(session, delta_table.uri, tmp_path / "skip")
    run_available_now(session, delta_table.uri, tmp_path / "again")
    delta_table.update({"name": "'changed'"}, "id < 3")
    delta_table.append(make_numbers(10, 2))
    with caplog.at_level(logging.WARNING, logger="microbatch.delta"):
        skipped, query = run_available_now(
            session, delta_table.uri, tmp_path / "skip", skipChangeCommits=True
        )
    assert ids(skipped) == [10, 11]
    assert _metrics(query)["numSkippedChangeCommits"] == "1"
    assert any("version 1 (UPDATE)" in r.getMessage() for r in caplog.records)
    assert any(
        "removes 1 data file and adds 1 data file: skipped" in r.getMessage()
        for r in caplog.records
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="microbatch.delta"):
        again, query = run_available_now(
            session, delta_table.uri, tmp_path / "again", ignoreChanges=True
        )
    assert any("the file it adds is streamed again" in r.getMessage() for r in caplog.records)
    # the rewritten file comes again whole: the 3 updated rows and the 7 unchanged ones
    assert ids(again) == [*range(10), 10, 11]
    names = dict(zip(again.column("id").to_pylist(), again.column("name").to_pylist(), strict=True))
    assert names[0] == "changed" and names[5] == "n5"
    assert _metrics(query)["numReemittedChangeCommits"] == "1"


def test_an_overwrite_is_a_data_update(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 5))
    run_available_now(session, delta_table.uri, tmp_path / "cp")
    delta_table.overwrite(make_numbers(100, 5))
    with pytest.raises(mb.StreamingQueryException, match=r"data update .* \(operation WRITE\)"):
        run_available_now(session, delta_table.uri, tmp_path / "cp")
    rows, _ = run_available_now(session, delta_table.uri, tmp_path / "cp", ignoreChanges=True)
    assert ids(rows) == list(range(100, 105))


def test_optimize_is_skipped_and_counted(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(3):
        delta_table.append(make_numbers(10 * n, 10))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    version = delta_table.optimize()
    assert delta_table.history()[0]["operation"] == "OPTIMIZE"
    delta_table.append(make_numbers(30, 10))
    rows, query = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == list(range(30, 40))  # the compacted rows do not come again
    assert _metrics(query)["numSkippedRearrangeCommits"] == "1"
    assert query.last_progress["sources"][0]["endOffset"]["reservoirVersion"] == version + 2

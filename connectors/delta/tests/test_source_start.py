"""Where a stream starts (startingVersion / startingTimestamp) and batch reads as of a version
or a time (versionAsOf / timestampAsOf), with Delta's rules and texts."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import ids, run_available_now


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


@pytest.fixture
def versions(delta_table: Any, make_numbers: Any) -> list[int]:
    """Versions 0-3, ids 10*v .. 10*v+9 each, committed some milliseconds apart; their commit
    times in ms."""
    for version in range(4):
        delta_table.append(make_numbers(10 * version, 10))
        time.sleep(0.01)
    history = sorted(delta_table.history(), key=lambda h: h["version"])
    return [int(h["timestamp"]) for h in history]


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def test_starting_version_reads_that_version_on_without_the_snapshot(
    session: mb.Session, delta_table: Any, versions: list[int], tmp_path: Path
) -> None:
    rows, query = run_available_now(session, delta_table.uri, tmp_path / "a", startingVersion=2)
    assert ids(rows) == list(range(20, 40))
    assert query.recent_progress[0]["sources"][0]["startOffset"]["isStartingVersion"] is False
    rows, _ = run_available_now(session, delta_table.uri, tmp_path / "b", startingVersion="0")
    assert ids(rows) == list(range(40))


def test_starting_version_latest_reads_only_later_versions(
    session: mb.Session, delta_table: Any, versions: list[int], make_numbers: Any, tmp_path: Path
) -> None:
    rows, _ = run_available_now(session, delta_table.uri, tmp_path / "cp", startingVersion="latest")
    assert rows.num_rows == 0
    delta_table.append(make_numbers(100, 3))
    rows, _ = run_available_now(session, delta_table.uri, tmp_path / "cp", startingVersion="latest")
    assert ids(rows) == [100, 101, 102]


def test_a_starting_version_the_table_lacks_is_refused(
    session: mb.Session, delta_table: Any, versions: list[int], tmp_path: Path
) -> None:
    with pytest.raises(mb.SourceError) as failure:  # raised by start(): before any batch
        run_available_now(session, delta_table.uri, tmp_path / "cp", startingVersion=9)
    assert str(failure.value).startswith(
        "Cannot time travel Delta table to version 9. Available versions: [0, 3]."
    )


def test_starting_timestamp_starts_at_the_first_version_at_or_after_it(
    session: mb.Session, delta_table: Any, versions: list[int], tmp_path: Path
) -> None:
    cases = [
        (iso(versions[2]), 2),  # exactly a commit's time
        (iso(versions[1] + 1), 2),  # between two commits: the later one
        ("2000-01-01", 0),  # before the earliest: the earliest
    ]
    for n, (text, version) in enumerate(cases):
        rows, _ = run_available_now(
            session, delta_table.uri, tmp_path / f"cp{n}", startingTimestamp=text
        )
        assert ids(rows) == list(range(10 * version, 40)), text


def test_a_starting_timestamp_after_the_latest_commit_is_refused(
    session: mb.Session, delta_table: Any, versions: list[int], tmp_path: Path
) -> None:
    with pytest.raises(mb.SourceError) as failure:
        run_available_now(
            session, delta_table.uri, tmp_path / "cp", startingTimestamp=iso(versions[3] + 5000)
        )
    text = str(failure.value)
    assert "is after the latest version available to this table" in text
    assert "Please use a timestamp before or at" in text


def test_batch_reads_take_the_latest_snapshot_or_the_one_asked_for(
    session: mb.Session, delta_table: Any, versions: list[int]
) -> None:
    latest = session.read.format("delta").load(delta_table.uri)
    assert ids(latest) == list(range(40))
    assert ids(latest) == sorted(pl.read_delta(delta_table.uri)["id"].to_list())
    old = session.read.format("delta").option("versionAsOf", 1).load(delta_table.uri)
    assert ids(old) == list(range(20))
    between = iso(versions[2] + 1)
    at_time = session.read.format("delta").option("timestampAsOf", between).load(delta_table.uri)
    assert ids(at_time) == list(range(30))  # the latest version at or before the time


def test_batch_reads_refuse_versions_and_times_the_table_lacks(
    session: mb.Session, delta_table: Any, versions: list[int]
) -> None:
    read = session.read.format("delta")
    with pytest.raises(mb.SourceError, match=r"to version 7. Available versions: \[0, 3\]"):
        read.option("versionAsOf", 7).load(delta_table.uri)
    with pytest.raises(mb.SourceError, match="is before the earliest version available"):
        session.read.format("delta").option("timestampAsOf", "2001-01-01").load(delta_table.uri)
    with pytest.raises(mb.SourceError, match="is after the latest version available"):
        session.read.format("delta").option("timestampAsOf", "2999-01-01").load(delta_table.uri)
    with pytest.raises(mb.OptionError, match="Cannot specify both version and timestamp"):
        (
            session.read.format("delta")
            .option("versionAsOf", 1)
            .option("timestampAsOf", "2024-01-01")
            .load(delta_table.uri)
        )


def test_time_travel_options_are_refused_for_streams(
    session: mb.Session, delta_table: Any, versions: list[int]
) -> None:
    with pytest.raises(mb.ConfigurationError, match="'versionAsOf' is for batch reads"):
        session.read_stream.format("delta").option("versionAsOf", 1).load(delta_table.uri)


def test_a_path_without_a_delta_table_is_refused_at_load(
    session: mb.Session, tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "data.parquet").write_bytes(b"not a table")
    for path in (tmp_path / "plain", tmp_path / "missing"):
        with pytest.raises(mb.ConfigurationError, match="is not a Delta table"):
            session.read_stream.format("delta").load(str(path))


def test_a_user_schema_is_refused(
    session: mb.Session, delta_table: Any, versions: list[int]
) -> None:
    with pytest.raises(mb.SchemaError, match="fixed schema"):
        session.read_stream.format("delta").schema("id BIGINT").load(delta_table.uri)

"""Checkpoint format 2: a range per source, the watermark and the fixed session settings in
every offset entry, a state folder per operator, format versions, and the in-place upgrade of
a format-1 checkpoint written by microbatch 0.1 (``tests/fixtures/format1_checkpoint``)."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest.mock import ANY

import pytest

import microbatch as mb
from microbatch._checkpoint import FORMAT_VERSION, BatchEntry, Checkpoint, SourceRange
from microbatch._cli import main
from microbatch.errors import CheckpointError, CheckpointMismatchError, CorruptCheckpointError

pytest.importorskip("microbatch_file")

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, FIXTURES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fixture = _load("make_format1_checkpoint")
RESTART = FIXTURES / "restart_format1_checkpoint.py"


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def two_source_entry(batch_id: int) -> BatchEntry:
    return BatchEntry(
        batch_id,
        (SourceRange(None, {"offset": 3}), SourceRange({"logOffset": 1}, {"logOffset": 2})),
        1_700_000_000_000,
        watermark_ms=1_700_000_000_500,
        conf={"multipleWatermarkPolicy": "max"},
    )


# -- entries ---------------------------------------------------------------------------------


def test_an_entry_holds_a_range_per_source_the_watermark_and_the_fixed_settings(
    tmp_path: Path,
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(two_source_entry(0))

    stored = read_json(tmp_path / "cp" / "offsets" / "0")
    assert stored == {
        "version": 2,
        "batchId": 0,
        "batchTimestampMs": 1_700_000_000_000,
        "batchWatermarkMs": 1_700_000_000_500,
        "conf": {"multipleWatermarkPolicy": "max"},
        "sources": [
            {"start": None, "end": {"offset": 3}},
            {"start": {"logOffset": 1}, "end": {"logOffset": 2}},
        ],
    }
    read = Checkpoint(str(tmp_path / "cp")).read_offsets(0)
    assert read == two_source_entry(0)
    assert (read.start, read.end) == (None, {"offset": 3})  # source 0's range
    assert read.format_version == 2
    assert read_json(tmp_path / "cp" / "metadata")["version"] == FORMAT_VERSION == 2


def test_a_format_1_entry_reads_as_one_source_without_watermark_or_settings(
    tmp_path: Path,
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    (tmp_path / "cp" / "offsets").mkdir()
    (tmp_path / "cp" / "offsets" / "0").write_text(
        '{"batchId":0,"batchTimestampMs":5,"start":null,"end":{"offset":10}}'
    )
    entry = checkpoint.read_offsets(0)
    assert entry.sources == (SourceRange(None, {"offset": 10}),)
    assert (entry.watermark_ms, dict(entry.conf), entry.format_version) == (0, {}, 1)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"sources": []}, "'sources' must be a non-empty list"),
        ({"sources": [{"end": {}}]}, "source 0 is not a range"),
        ({"batchWatermarkMs": -1}, "'batchWatermarkMs' must be a non-negative integer"),
        ({"conf": ["x"]}, "'conf' must be an object"),
        ({"version": "2"}, "format version '2', which is not a positive integer"),
    ],
)
def test_a_damaged_format_2_entry_is_named(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(two_source_entry(0))
    path = tmp_path / "cp" / "offsets" / "0"
    path.write_text(json.dumps({**read_json(path), **change}))
    with pytest.raises(CorruptCheckpointError, match=rf"{path}.*{problem}"):
        Checkpoint(str(tmp_path / "cp")).latest_offsets()


def test_an_entry_of_a_newer_format_is_refused_naming_file_and_versions(tmp_path: Path) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(two_source_entry(0))
    path = tmp_path / "cp" / "offsets" / "0"
    path.write_text(json.dumps({**read_json(path), "version": 3}))
    with pytest.raises(CheckpointError) as raised:
        Checkpoint(str(tmp_path / "cp")).latest_offsets()
    assert not isinstance(raised.value, CorruptCheckpointError)
    assert str(raised.value).startswith(
        f"Checkpoint file {path} has format version 3; this microbatch reads format versions "
        "1 and 2 only."
    )


def test_a_checkpoint_of_a_newer_format_is_refused_by_start_and_inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    location = tmp_path / "cp"
    Checkpoint(str(location)).open(source="rate", sink="memory")
    (location / "metadata").write_text(
        json.dumps({**read_json(location / "metadata"), "version": 7})
    )
    expected = (
        f"Checkpoint file {location}/metadata has format version 7; this microbatch reads "
        "format versions 1 and 2 only"
    )
    with pytest.raises(CheckpointError, match=expected):
        Checkpoint(str(location)).open(source="rate", sink="memory")
    assert main(["checkpoint", "inspect", str(location)]) == 1
    assert expected in capsys.readouterr().err


def test_a_query_refuses_offsets_of_another_number_of_sources(tmp_path: Path) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(two_source_entry(0))
    with pytest.raises(CheckpointMismatchError, match=r"offsets/0 holds the offsets of 2 sources"):
        Checkpoint(str(tmp_path / "cp")).latest_offsets(sources=1)


# -- settings fixed per checkpoint -----------------------------------------------------------


def run_rate(location: Path, out: Path, policy: str | None = None) -> Checkpoint:
    """One available-now run of rate-micro-batch -> json; returns the checkpoint."""
    with mb.Session(conf={"multipleWatermarkPolicy": policy} if policy else None) as session:
        query = (
            session.read_stream.format("rate-micro-batch")
            .option("rowsPerBatch", 3)
            .load()
            .write_stream.format("json")
            .option("checkpointLocation", str(location))
            .trigger(available_now=True)
            .start(str(out))
        )
        assert query.await_termination(30)
        assert query.exception() is None
    return Checkpoint(str(location))


def test_the_recorded_setting_wins_over_the_session_and_the_difference_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    location, out = tmp_path / "cp", tmp_path / "out"
    run_rate(location, out, policy="max")
    assert read_json(location / "offsets" / "0")["conf"] == {"multipleWatermarkPolicy": "max"}

    with caplog.at_level(logging.WARNING, logger="microbatch.checkpoint"):
        run_rate(location, out)  # a session with the default, min
    assert read_json(location / "offsets" / "1")["conf"] == {"multipleWatermarkPolicy": "max"}
    [warning] = [r.getMessage() for r in caplog.records if "multipleWatermarkPolicy" in r.message]
    assert "the session sets multipleWatermarkPolicy='min'" in warning
    assert f"checkpoint's value is 'max' (recorded in {location}/offsets/0)" in warning
    assert Checkpoint(
        str(location), session_conf={"multipleWatermarkPolicy": "min"}
    ).fixed_conf == {"multipleWatermarkPolicy": "max"}


def test_a_recorded_setting_that_is_invalid_is_named(tmp_path: Path) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(
        BatchEntry(0, (SourceRange(None, {}),), 1, conf={"multipleWatermarkPolicy": "avg"})
    )
    with pytest.raises(
        CorruptCheckpointError, match=r"offsets/0 records the setting multipleWatermarkPolicy='avg'"
    ):
        Checkpoint(str(tmp_path / "cp")).latest_offsets()


def test_the_session_value_is_recorded_by_a_new_checkpoint() -> None:
    checkpoint = Checkpoint("memory://format2/new", session_conf={"multipleWatermarkPolicy": "max"})
    checkpoint.open(source="rate", sink="memory")
    assert checkpoint.latest_offsets() is None
    assert checkpoint.fixed_conf == {"multipleWatermarkPolicy": "max"}
    with pytest.raises(mb.OptionError, match="must be one of min, max"):
        mb.Session(conf={"multipleWatermarkPolicy": "avg"}, load_plugins=False)


# -- operator state --------------------------------------------------------------------------


def test_each_operator_has_a_state_folder_that_inspect_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.operator_state(0).child("0").write("1.delta", {"rows": 3})
    checkpoint.operator_state(0).child("1").write("1.delta", {"rows": 1})
    checkpoint.operator_state(2).write("schema", {"columns": ["k"]})
    assert (tmp_path / "cp" / "state" / "0" / "1" / "1.delta").is_file()
    assert checkpoint.operator_ids() == [0, 2]
    for bad in (-1, True, "0"):
        with pytest.raises(ValueError, match="an operator id is a non-negative integer"):
            checkpoint.operator_state(bad)  # type: ignore[arg-type]

    assert main(["checkpoint", "inspect", "--json", str(tmp_path / "cp")]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert state["state/0"] == ["0/1.delta", "1/1.delta"]
    assert state["state/2"] == ["schema"]
    monkeypatch.setenv("COLUMNS", "220")
    assert main(["checkpoint", "inspect", str(tmp_path / "cp")]) == 0
    assert "sources/0: 0, sink: 0, state/0: 2, state/2: 1" in capsys.readouterr().out


# -- inspect ---------------------------------------------------------------------------------


def test_inspect_shows_format_2_entries(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_offsets(two_source_entry(0))

    with caplog.at_level(logging.WARNING):
        assert main(["checkpoint", "inspect", "--json", str(tmp_path / "cp")]) == 0
    assert not caplog.records  # no session: the recorded max is shown, not warned about
    dump = json.loads(capsys.readouterr().out)
    assert (dump["formatVersion"], dump["upgradeOnNextStart"]) == (2, False)
    assert dump["fixedConf"] == {
        "values": {"multipleWatermarkPolicy": "max"},
        "recordedIn": "offsets/0",
    }
    [batch] = dump["batches"]
    assert batch["formatVersion"] == 2
    assert batch["batchWatermarkMs"] == 1_700_000_000_500
    assert batch["sources"] == [
        {"start": None, "end": {"offset": 3}},
        {"start": {"logOffset": 1}, "end": {"logOffset": 2}},
    ]
    assert (batch["start"], batch["end"]) == (None, {"offset": 3})
    assert batch["conf"] == {"multipleWatermarkPolicy": "max"}
    assert set(dump["state"]) == {"sources/0", "sources/1", "sink"}

    monkeypatch.setenv("COLUMNS", "220")
    assert main(["checkpoint", "inspect", str(tmp_path / "cp")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^Format +2 *$", out, re.MULTILINE)
    assert "Fixed conf   multipleWatermarkPolicy=max (as recorded in offsets/0)" in out
    assert "Watermark" in out and "2023-11-14T22:13:20.500Z" in out
    assert "0: -" in out and '1: {"logOffset":1}' in out and '1: {"logOffset":2}' in out


def test_inspect_shows_the_format_1_fixture_and_its_coming_upgrade(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    location = str(fixture.FIXTURE / "checkpoint")
    assert main(["checkpoint", "inspect", "--json", location]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert (dump["formatVersion"], dump["upgradeOnNextStart"]) == (1, True)
    assert [batch["formatVersion"] for batch in dump["batches"]] == [1, 1, 1, 1]
    assert dump["batches"][3]["sources"] == [
        {"start": {"offset": 15, "timestamp": 3000}, "end": {"offset": 20, "timestamp": 4000}}
    ]
    assert dump["rerunOnRestart"] == 3
    assert dump["fixedConf"] == {"values": {"multipleWatermarkPolicy": "min"}, "recordedIn": None}

    monkeypatch.setenv("COLUMNS", "220")
    assert main(["checkpoint", "inspect", location]) == 0
    out = capsys.readouterr().out
    assert "Format       1 (upgraded to format 2 in place by the next start)" in out
    assert "┃ Format ┃" in out  # the per-batch format column, shown while old entries exist


# -- the upgrade of a format-1 checkpoint written by microbatch 0.1 --------------------------


@pytest.fixture
def format1_checkpoint() -> Iterator[Path]:
    """The committed fixture, copied to the fixed location it was made at (its metadata
    records the sink's absolute path); one test at a time holds that location."""
    with open(f"{fixture.ROOT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(fixture.ROOT, ignore_errors=True)
        shutil.copytree(fixture.FIXTURE, fixture.ROOT)
        try:
            yield fixture.ROOT
        finally:
            shutil.rmtree(fixture.ROOT, ignore_errors=True)


def sink_values() -> list[int]:
    """Every value the json sink holds, as a reader sees them (through its manifest)."""
    with mb.Session() as session:
        table = session.read.format("json").schema("value bigint").load(str(fixture.OUTPUT))
    return sorted(table.column("value").to_pylist())


def assert_upgraded_with_every_row_once(last_batch: int = 4) -> None:
    """The sink holds the rows of batches 0..``last_batch`` once each (those of the fixture's
    batch 3 were in it before the restart, which re-ran that batch), every batch is committed,
    and the entries after the fixture's are in format 2."""
    rows = fixture.ROWS_PER_BATCH
    assert sink_values() == list(range((last_batch + 1) * rows))
    metadata = read_json(fixture.CHECKPOINT / "metadata")
    assert (metadata["version"], metadata["upgradedFrom"]) == (2, 1)
    checkpoint = Checkpoint(str(fixture.CHECKPOINT))
    checkpoint.check_logs()
    assert checkpoint.batch_ids(checkpoint.offsets) == list(range(last_batch + 1))
    assert checkpoint.last_committed_batch_id() == last_batch
    entries = [checkpoint.read_offsets(batch_id) for batch_id in range(last_batch + 1)]
    assert [entry.format_version for entry in entries] == [1] * 4 + [2] * (last_batch - 3)
    assert read_json(fixture.CHECKPOINT / "offsets" / "4") == {
        "version": 2,
        "batchId": 4,
        "batchTimestampMs": entries[4].timestamp_ms,
        "batchWatermarkMs": 0,
        "conf": {"multipleWatermarkPolicy": "min"},
        "sources": [
            {
                "start": {"offset": 4 * rows, "timestamp": 4000},
                "end": {"offset": 5 * rows, "timestamp": 5000},
            }
        ],
    }


def test_a_format_1_checkpoint_of_the_0_1_code_restarts_with_no_row_lost_or_doubled(
    format1_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sink_values() == list(range(4 * fixture.ROWS_PER_BATCH))  # batch 3 is in the sink
    fixture.run_pipeline(available_now=True)
    assert_upgraded_with_every_row_once()

    assert main(["checkpoint", "inspect", "--json", str(fixture.CHECKPOINT)]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert (dump["formatVersion"], dump["upgradeOnNextStart"]) == (2, False)
    assert [batch["formatVersion"] for batch in dump["batches"]] == [1, 1, 1, 1, 2]
    assert dump["fixedConf"] == {
        "values": {"multipleWatermarkPolicy": "min"},
        "recordedIn": "offsets/4",
    }


def test_a_format_1_checkpoint_runs_with_the_settings_it_was_written_with(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(fixture.FIXTURE / "checkpoint", tmp_path / "cp")
    checkpoint = Checkpoint(str(tmp_path / "cp"), session_conf={"multipleWatermarkPolicy": "max"})
    with caplog.at_level(logging.WARNING, logger="microbatch.checkpoint"):
        latest = checkpoint.latest_offsets(sources=1)
    assert latest is not None and latest.format_version == 1
    assert checkpoint.fixed_conf == {"multipleWatermarkPolicy": "min"}
    [warning] = [r.getMessage() for r in caplog.records]
    assert (
        "the session sets multipleWatermarkPolicy='max', but the checkpoint's value is 'min'"
        in (warning)
    )
    assert "offsets/3 records none" in warning


def test_writing_an_entry_into_a_format_1_checkpoint_upgrades_its_metadata_first(
    tmp_path: Path,
) -> None:
    shutil.copytree(fixture.FIXTURE / "checkpoint", tmp_path / "cp")
    metadata = read_json(tmp_path / "cp" / "metadata")
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    assert checkpoint.format_version() == 1
    checkpoint.write_commit(3, 5)
    checkpoint.write_offsets(
        BatchEntry(4, (SourceRange({"offset": 20}, {"offset": 25}),), 1, conf=checkpoint.fixed_conf)
    )
    upgraded = read_json(tmp_path / "cp" / "metadata")
    assert upgraded == {**metadata, "version": 2, "upgradedFrom": 1, "upgradedAt": ANY}
    assert Checkpoint(str(tmp_path / "cp")).format_version() == 2
    assert read_json(tmp_path / "cp" / "offsets" / "4")["version"] == 2
    assert read_json(tmp_path / "cp" / "offsets" / "3") == read_json(
        fixture.FIXTURE / "checkpoint" / "offsets" / "3"
    )  # older entries are not rewritten


def test_a_refused_start_leaves_the_format_1_checkpoint_as_it_was(
    format1_checkpoint: Path, tmp_path: Path
) -> None:
    before = (fixture.CHECKPOINT / "metadata").read_bytes()
    with mb.Session() as session, pytest.raises(CheckpointMismatchError):
        session.read_stream.format("rate-micro-batch").option(
            "rowsPerBatch", 5
        ).load().write_stream.format("json").option(
            "checkpointLocation", str(fixture.CHECKPOINT)
        ).start(str(tmp_path / "elsewhere"))
    assert (fixture.CHECKPOINT / "metadata").read_bytes() == before


def run_restart(kill_at: str | None = None, crash_at: str | None = None) -> int:
    env = {
        k: v for k, v in os.environ.items() if k not in ("FORMAT1_KILL_AT", "MICROBATCH_CRASH_AT")
    }
    if kill_at:
        env["FORMAT1_KILL_AT"] = kill_at
    if crash_at:
        env["MICROBATCH_CRASH_AT"] = crash_at
    done = subprocess.run(
        [sys.executable, str(RESTART)], env=env, capture_output=True, text=True, timeout=60
    )
    expected = -signal.SIGKILL if kill_at or crash_at else 0
    assert done.returncode == expected, done.stderr
    return done.returncode


@pytest.mark.parametrize(
    ("kill_at", "crash_at", "version_after_kill", "last_batch"),
    [
        ("metadata-temp", None, 1, 4),  # the new metadata written aside, not in place yet
        ("metadata-written", None, 2, 4),  # upgraded; no format-2 entry yet
        (None, "sink_committed:3", 2, 4),  # the re-run of the format-1 batch 3
        # the first format-2 entry, nothing in the sink: the restart re-runs batch 4, and its
        # available-now trigger runs one more batch
        (None, "offsets_written:4", 2, 5),
    ],
)
def test_a_process_killed_during_the_upgrade_leaves_a_checkpoint_that_restarts(
    format1_checkpoint: Path,
    kill_at: str | None,
    crash_at: str | None,
    version_after_kill: int,
    last_batch: int,
) -> None:
    run_restart(kill_at, crash_at)
    assert read_json(fixture.CHECKPOINT / "metadata")["version"] == version_after_kill
    if kill_at == "metadata-temp":
        assert [p.name for p in fixture.CHECKPOINT.glob(".metadata.*.tmp")]
    run_restart()
    assert not list(fixture.CHECKPOINT.glob(".metadata.*.tmp"))
    assert_upgraded_with_every_row_once(last_batch)

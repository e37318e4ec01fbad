"""The crash helper kills pipelines where it is told to, and recovery is exactly once."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

import microbatch as mb
from microbatch_testkit import crash

SCRIPT = Path(__file__).parent / "scripts" / "rate_to_sqlite.py"
LAST_BATCH = 3
ROWS_PER_BATCH = 10


def read_numbers(database: Path) -> list[int]:
    if not database.exists():
        return []
    with closing(sqlite3.connect(database)) as connection:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'numbers'"
        ).fetchall()
        if not tables:
            return []
        return sorted(value for (value,) in connection.execute("SELECT value FROM numbers"))


def assert_exactly_once(values: list[int]) -> None:
    """Values 0..n-1, each once, for whole batches, at least up to LAST_BATCH."""
    assert len(values) >= (LAST_BATCH + 1) * ROWS_PER_BATCH, values
    assert len(values) % ROWS_PER_BATCH == 0, values
    assert values == list(range(len(values))), values


@pytest.mark.parametrize(
    ("phase", "rows_after_crash"),
    [
        ("offsets_written", ROWS_PER_BATCH),  # batch 1 logged, nothing written
        ("mid_sink", ROWS_PER_BATCH),  # half of batch 1 inserted, transaction lost
        ("sink_committed", 2 * ROWS_PER_BATCH),  # batch 1 applied, commit log missing
    ],
)
def test_pipeline_recovers_exactly_once(tmp_path: Path, phase: str, rows_after_crash: int) -> None:
    database = tmp_path / "numbers.db"
    args = [str(tmp_path / "checkpoint"), str(database), str(LAST_BATCH)]
    killed = crash.run_until_crash(SCRIPT, phase, 1, args=args)
    assert f"at {phase}:1" in killed.stderr
    assert read_numbers(database) == list(range(rows_after_crash))
    crash.run_to_completion(SCRIPT, args=args)
    assert_exactly_once(read_numbers(database))


def test_crash_scenario_returns_the_sink_after_restart(tmp_path: Path) -> None:
    database = tmp_path / "numbers.db"
    scenario = crash.CrashScenario(
        SCRIPT,
        read_sink=lambda: read_numbers(database),
        args=[str(tmp_path / "checkpoint"), str(database), str(LAST_BATCH)],
    )
    values = scenario.run("sink_committed", 2)
    assert_exactly_once(values)
    assert [run.returncode for run in scenario.runs] == [-9, 0]


def write_script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return script


def test_hook_kills_only_at_the_named_phase_and_batch(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        from microbatch._registry import ConnectorRegistry
        from microbatch_testkit import crash

        class Session:
            registry = ConnectorRegistry()

        session = Session()
        crash.arm(session)
        hook = session.registry.plugin_manager.hook.microbatch_batch_phase
        for batch_id in range(3):
            for phase in ("offsets_written", "sink_write_done", "sink_committed"):
                print(batch_id, phase, flush=True)
                hook(query_id="q", batch_id=batch_id, phase=phase)
        """,
    )
    killed = crash.run_until_crash(script, "sink_committed", 1)
    assert killed.stdout.splitlines()[-1] == "1 sink_committed"
    killed = crash.run_until_crash(script, "mid_sink", 2)
    assert killed.stdout.splitlines()[-1] == "2 sink_write_done"
    finished = crash.run_to_completion(script)
    assert finished.stdout.splitlines()[-1] == "2 sink_committed"


def test_crash_point_kills_when_named(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        from microbatch_testkit import crash

        for batch_id in range(3):
            print("before", batch_id, flush=True)
            crash.crash_point("mid_sink", batch_id)
        print("done", flush=True)
        """,
    )
    killed = crash.run_until_crash(script, "mid_sink", 1)
    assert killed.stdout.split() == ["before", "0", "before", "1"]
    assert "done" in crash.run_to_completion(script).stdout


def test_failures_show_the_child_output(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        import sys
        print("some output")
        sys.exit("boom: it broke")
        """,
    )
    with pytest.raises(AssertionError, match="expected the pipeline to be killed") as caught:
        crash.run_until_crash(script, "offsets_written", 0)
    assert "boom: it broke" in str(caught.value) and "some output" in str(caught.value)
    with pytest.raises(AssertionError, match="expected the pipeline to finish") as caught:
        crash.run_to_completion(script)
    assert "exited with 1" in str(caught.value)
    assert sys.executable in str(caught.value)


def test_unknown_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown crash phase 'nowhere'"):
        crash.run_until_crash("unused.py", "nowhere", 0)


def test_timeout_reports_output(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        """
        import time
        print("waiting", flush=True)
        time.sleep(60)
        """,
    )
    with pytest.raises(AssertionError, match="timed out after 5 s") as caught:
        crash.run_to_completion(script, timeout=5)
    assert "waiting" in str(caught.value)


def test_stop_after_batch_stops_at_the_batch_and_exits_when_it_is_not_reached() -> None:
    with mb.Session() as session:

        def start(every: str) -> mb.StreamingQuery:
            return (
                session.read_stream.format("rate-micro-batch")
                .option("rowsPerBatch", 1)
                .load()
                .write_stream.format("noop")
                .trigger(processing_time=every)
                .start()
            )

        query = start("0 seconds")
        crash.stop_after_batch(query, 2)
        assert not query.is_active and query.last_progress["batchId"] >= 2
        idle = start("1 hour")
        with pytest.raises(SystemExit, match=r"batch 5 was not reached in 0\.3 s"):
            crash.stop_after_batch(idle, 5, timeout=0.3)
        assert not idle.is_active

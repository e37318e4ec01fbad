"""A foreach_batch query writing SQLite through ``BatchLedger.for_query``, killed (SIGKILL)
inside the transaction of its first batch, then restarted: nothing of the killed batch was
applied, and every batch is then applied exactly once, under the query id that the first run
wrote in the checkpoint."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from microbatch_testkit import crash

pytest.importorskip("microbatch_rate")

PIPELINE = textwrap.dedent(
    """
    import json
    import sqlite3
    import sys
    from contextlib import closing

    import microbatch as mb
    from microbatch_testkit.crash import crash_point

    database, checkpoint = sys.argv[1], sys.argv[2]


    class KilledAtCommit(sqlite3.Connection):
        '''Killed when MICROBATCH_CRASH_AT names this batch, with its rows and its ledger row
        written in the open transaction and neither committed.'''

        batch_id = -1

        def commit(self):
            if self.in_transaction:
                crash_point("mid_sink", self.batch_id)
            super().commit()


    def write_numbers(batch, batch_id):
        rows = [(value, batch_id) for value in batch.column("value").to_pylist()]
        with closing(sqlite3.connect(database, factory=KilledAtCommit)) as connection:
            connection.batch_id = batch_id
            ledger = mb.BatchLedger.for_query(connection, paramstyle="qmark")
            applied = ledger.apply_once(
                batch_id, lambda c: c.executemany("INSERT INTO numbers VALUES (?, ?)", rows)
            )
            report = {"batch": batch_id, "key": ledger.key, "applied": applied}
            print(json.dumps(report), flush=True)


    with mb.Session() as session:
        query = (
            session.read_stream.format("rate-micro-batch")
            .option("rowsPerBatch", 5)
            .load()
            .write_stream.foreach_batch(write_numbers)
            .option("checkpointLocation", checkpoint)
            .trigger(available_now=True)
            .start()
        )
        query.await_termination(60)
    """
)


def test_a_kill_inside_the_transaction_leaves_the_batch_to_the_replay(
    tmp_path: Path, new_database: Callable[[str], Path]
) -> None:
    database = new_database("numbers (value INTEGER, batch INTEGER)")
    script = tmp_path / "pipeline.py"
    script.write_text(PIPELINE)
    args = [str(database), str(tmp_path / "cp")]

    def reports(run: crash.CompletedRun) -> list[dict[str, object]]:
        return [json.loads(line) for line in run.stdout.splitlines()]

    killed = crash.run_until_crash(script, "mid_sink", 0, args=args)  # inside batch 0's commit
    assert reports(killed) == []
    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute("SELECT COUNT(*) FROM numbers").fetchone() == (0,)
        assert connection.execute("SELECT COUNT(*) FROM microbatch_ledger").fetchone() == (0,)
    restarted = reports(crash.run_to_completion(script, args=args))  # batch 0 again, then 1
    key = json.loads((tmp_path / "cp" / "metadata").read_text())["id"]  # the query id
    assert restarted == [
        {"batch": 0, "key": key, "applied": True},
        {"batch": 1, "key": key, "applied": True},
    ]
    with closing(sqlite3.connect(database)) as connection:
        values = [row[0] for row in connection.execute("SELECT value FROM numbers ORDER BY 1")]
        marks = connection.execute("SELECT query_key, batch_id FROM microbatch_ledger").fetchall()
    assert values == list(range(10))  # both batches, each once
    assert sorted(marks) == [(key, 0), (key, 1)]

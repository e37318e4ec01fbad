"""PostgreSQL stopped and started again while a query writes into it through the ``jdbc`` sink.

A ``rate-micro-batch`` query (``value`` counts 0, 1, 2... so it is the row's id) writes into a
PostgreSQL table every 50 ms. The server is stopped (fast shutdown, which ends the sink's
sessions; or ``SIGKILL``) and started again on the same URL:

- with retries to spare, the batches of the outage fail as retriable, the engine runs them
  again and the query rides through;
- with ``maxBatchRetries=1`` and an outage longer than the retries, the query fails with the
  connection error and a note that the retries are spent; restarted from its checkpoint once
  the server is back, it goes on.

Either way the table holds every value of the committed batches exactly once and the ledger
each batch id once. Needs a server the tests can stop: ``MICROBATCH_SERVICES=local``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
import jdbc_crash_pipeline as pipeline_script

ROWS = 20
TABLE = "numbers"


@pytest.fixture
def restartable(postgres_service: Any) -> Any:
    """The PostgreSQL service, for a test that stops its server; skipped unless the provider
    owns the server (``MICROBATCH_SERVICES=local``)."""
    if not postgres_service.can_restart:
        pytest.skip(
            f"the {postgres_service.provider} PostgreSQL provider cannot stop its server: run "
            "with MICROBATCH_SERVICES=local"
        )
    yield postgres_service
    postgres_service.ensure_running()


def start(url: str, checkpoint: Path, conf: dict[str, Any]) -> Any:
    session = mb.Session(conf=conf)
    return (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS)
        .load()
        .write_stream.format("jdbc")
        .option("url", url)
        .option("dbtable", TABLE)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processing_time="50 milliseconds")
        .start()
    )


def wait_for_batch(query: Any, batch_id: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (query.last_progress or {}).get("batchId", -1) < batch_id:
        assert query.is_active, query.exception()
        assert time.monotonic() < deadline, f"batch {batch_id} was not committed in time"
        time.sleep(0.02)


def retries(query: Any) -> int:
    return sum(progress.get("batchRetries", 0) for progress in query.recent_progress)


def check_exactly_once(url: str, checkpoint: Path) -> int:
    """Assert that the table holds the values of the committed batches once each and the
    ledger each committed batch once; return how many batches were committed."""
    import psycopg
    from psycopg import sql

    batches = pipeline_script.committed_batches(checkpoint)
    assert batches == list(range(len(batches)))
    with psycopg.connect(pipeline_script._dsn(url)) as connection:
        query = sql.SQL("SELECT value FROM {} ORDER BY value").format(sql.Identifier(TABLE))
        values = [row[0] for row in connection.execute(query).fetchall()]
    doubled = sorted({v for v in values if values.count(v) > 1})
    assert not doubled, f"values written more than once: {doubled[:10]}"
    assert values == list(range(len(batches) * ROWS)), "values lost or of no committed batch"
    key = pipeline_script.query_id(checkpoint)
    assert pipeline_script.ledger_batches(url, key) == batches
    return len(batches)


@pytest.mark.parametrize("graceful", [True, False], ids=["fast-shutdown", "sigkill"])
def test_a_query_rides_through_a_server_restart(
    restartable: Any, postgres_database: Any, tmp_path: Path, graceful: bool
) -> None:
    url, checkpoint = postgres_database.url, tmp_path / "cp"
    query = start(url, checkpoint, {"maxBatchRetries": 30, "batchRetryBackoff": "200 ms"})
    try:
        wait_for_batch(query, 3, 30)
        with restartable.stopped(graceful=graceful):
            time.sleep(1.5)  # several triggers fall into the outage
        last = query.last_progress["batchId"]
        wait_for_batch(query, last + 5, 60)  # written after the server came back
    finally:
        query.stop()
    assert query.exception() is None
    assert retries(query) >= 1, "a batch of the outage should have failed and been retried"
    assert check_exactly_once(url, checkpoint) >= 9


def test_a_query_fails_clearly_once_its_retries_are_spent_and_restarts(
    restartable: Any, postgres_database: Any, tmp_path: Path
) -> None:
    url, checkpoint = postgres_database.url, tmp_path / "cp"
    query = start(url, checkpoint, {"maxBatchRetries": 1, "batchRetryBackoff": "100 ms"})
    try:
        wait_for_batch(query, 2, 30)
        with restartable.stopped(), pytest.raises(mb.StreamingQueryException):
            query.await_termination(30)  # raises the query's error once it failed
    finally:
        query.stop()
    error = query.exception()
    assert isinstance(error, mb.StreamingQueryException)
    cause = error.__cause__
    assert isinstance(cause, mb.RetriableError)
    text = "\n".join([str(cause), *getattr(cause, "__notes__", [])])
    assert f"could not connect to {postgres_database.url}" in text, text
    assert "maxBatchRetries is 1" in text, text
    committed = check_exactly_once(url, checkpoint)

    restarted = start(url, checkpoint, {})
    try:
        wait_for_batch(restarted, committed + 3, 30)
    finally:
        restarted.stop()
    assert restarted.exception() is None
    assert check_exactly_once(url, checkpoint) >= committed + 4

"""A broker that is down while the sink writes: the batch fails as retriable, the engine runs
it again, and once the broker is back every record is there (exactly once with
``exactlyOnce=true``). Needs a broker the tests can stop: MICROBATCH_SERVICES=local."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch_kafka import _transactions
from microbatch_testkit._engine import ROWS_FORMAT, RowsSource, ensure_registered

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, run_into_kafka

FAST = {"kafka.message.timeout.ms": "2000", "kafka.reconnect.backoff.max.ms": "200"}
# A transactional call hung by the restart is abandoned after exactlyOnceTimeout + 5 s, and a
# batch's retries back off from 100 ms, doubling: a slow machine can meet several of each
# before the broker serves again, so the deadlines below are generous (they end a query that
# is stuck, not a slow one).
RETRIES = {"maxBatchRetries": 30, "batchRetryBackoff": "100 milliseconds"}
TIMEOUT = "15 seconds"
DEADLINE = 300.0


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_query_rides_through_a_broker_restart(
    tmp_path: Path, restartable: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    topic = make_kafka_topic(2)
    options = {"kafka.bootstrap.servers": restartable.bootstrap_servers, "topic": topic, **FAST}
    if exactly_once:
        options.update(exactlyOnce="true", exactlyOnceTimeout=TIMEOUT)
    batches = [pa.table({"value": [f"{b}-{i}" for i in range(20)]}) for b in range(3)]
    restartable.stop()
    back = threading.Timer(4.0, restartable.start)
    back.start()
    try:
        query = run_into_kafka(
            batches,
            options,
            str(tmp_path / "cp"),
            conf=RETRIES,
            timeout=DEADLINE,
        )
    finally:
        back.join()
    assert query.exception() is None
    retries = sum(progress.get("batchRetries", 0) for progress in query.recent_progress)
    if not exactly_once:  # (a transactional producer's init_transactions() waits for it)
        assert retries >= 1, "the batch whose deliveries timed out should have been retried"
    values = sorted(r["value"].decode() for r in read_records(restartable, topic))
    expected = sorted(v for table in batches for v in table.column("value").to_pylist())
    if exactly_once:
        assert values == expected
    else:  # at least once: a retried batch may be written twice
        assert sorted(set(values)) == expected


def _wait_for_batch(query: Any, batch_id: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (query.last_progress or {}).get("batchId", -1) < batch_id:
        assert query.is_active, query.exception()
        assert time.monotonic() < deadline, (
            f"batch {batch_id} was not committed within {timeout:g} s; the batches so far "
            f"(id, ms, retries): {_batches_so_far(query)}; now: {query.status['message']}"
        )
        time.sleep(0.05)


def _batches_so_far(query: Any) -> list[tuple[int, int, int]]:
    return [
        (p["batchId"], p["durationMs"].get("triggerExecution", 0), p.get("batchRetries", 0))
        for p in query.recent_progress
    ]


def test_a_restarted_exactly_once_query_rides_through_a_broker_restart(
    tmp_path: Path, restartable: Any, make_kafka_topic: Any
) -> None:
    """Run 2 of a checkpoint commits several batches, then the broker goes away: the retried
    batch reads the marker again, which holds run 2's own batches (not batches "this
    checkpoint never committed"), and every record is there once."""
    topic = make_kafka_topic(1)
    options = {
        "kafka.bootstrap.servers": restartable.bootstrap_servers,
        "topic": topic,
        "exactlyOnce": "true",
        "exactlyOnceTimeout": TIMEOUT,
        **FAST,
    }
    checkpoint = str(tmp_path / "cp")
    # enough batches that the query is still writing when the broker has stopped
    batches = [pa.table({"value": [f"{b}-{i}" for i in range(5)]}) for b in range(50)]
    assert run_into_kafka(batches[:2], options, checkpoint).exception() is None  # run 1
    session = mb.Session(conf=RETRIES)
    ensure_registered(session, "source", RowsSource)
    query = (
        session.read_stream.format(ROWS_FORMAT)
        .option("batches", [[table.to_batches()] for table in batches])
        .option("rowsSchema", batches[0].schema)
        .load()
        .write_stream.format("kafka")
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(processing_time="100 milliseconds")
        .start()
    )
    try:
        _wait_for_batch(query, 4, 60)  # run 2 committed batches 2, 3 and 4
        with restartable.stopped():
            time.sleep(2.5)  # the batches of the outage fail (message.timeout.ms=2000)
        _wait_for_batch(query, len(batches) - 1, DEADLINE)
    finally:
        query.stop()
    assert query.exception() is None
    progress = query.recent_progress
    retries = sum(batch.get("batchRetries", 0) for batch in progress)
    longest = max(batch["durationMs"].get("triggerExecution", 0) for batch in progress)
    # the outage met a batch: it failed and was retried, or one of its calls waited for the
    # broker to come back (a transaction's call, bounded by exactlyOnceTimeout)
    assert retries >= 1 or longest >= 1000, (retries, longest)
    # producers dropped with a transaction open were closed once their successor started
    # (one whose abandoned call has not returned yet stays until it has)
    retired = _transactions._RETIRED
    assert [pid for pid, _, stuck in retired if pid == os.getpid() and not stuck] == []
    values = sorted(r["value"].decode() for r in read_records(restartable, topic))
    assert values == sorted(v for table in batches for v in table.column("value").to_pylist())

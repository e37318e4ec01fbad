"""A broker that is down while the sink writes: the batch fails as retriable, the engine runs
it again, and once the broker is back every record is there (exactly once with
``exactlyOnce=true``). Needs a broker the tests can stop: MICROBATCH_SERVICES=local."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, run_into_kafka

FAST = {"kafka.message.timeout.ms": "2000", "kafka.reconnect.backoff.max.ms": "200"}


@pytest.fixture
def restartable(kafka_service: Any) -> Any:
    if not kafka_service.can_restart:
        pytest.skip(
            f"the {kafka_service.provider} Kafka provider cannot stop its broker: run with "
            "MICROBATCH_SERVICES=local"
        )
    return kafka_service


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_query_rides_through_a_broker_restart(
    tmp_path: Path, restartable: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    topic = make_kafka_topic(2)
    options = {"kafka.bootstrap.servers": restartable.bootstrap_servers, "topic": topic, **FAST}
    if exactly_once:
        options["exactlyOnce"] = "true"
    batches = [pa.table({"value": [f"{b}-{i}" for i in range(20)]}) for b in range(3)]
    restartable.stop()
    back = threading.Timer(4.0, restartable.start)
    back.start()
    try:
        query = run_into_kafka(
            batches,
            options,
            str(tmp_path / "cp"),
            conf={"maxBatchRetries": 30, "batchRetryBackoff": "300 milliseconds"},
            timeout=120,
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

"""Delivery: a record Kafka refuses or cannot deliver fails the batch clearly and nothing of
it is committed; retriable client errors are retried; the cached producers survive a fork."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from microbatch import PartContext, RetriableError, SinkError
from microbatch.errors import cause_chain
from microbatch_kafka._producing import Delivery, close_run, raise_client_error
from microbatch_kafka._sink_schema import Layout
from microbatch_kafka.sink import KafkaPartWriter

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, run_into_kafka


def _failure(query: Any) -> str:
    error = query.exception()
    assert error is not None, "the query was expected to fail"
    assert query.last_progress is None, "batch 0 must not be committed"
    return str(error)


def test_a_record_over_the_producers_limit_fails_the_batch(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1)
    table = pa.table({"value": [b"small", b"x" * 5000]})
    options = {
        "kafka.bootstrap.servers": kafka_service.bootstrap_servers,
        "topic": topic,
        "kafka.message.max.bytes": "1000",
    }
    text = _failure(run_into_kafka([table], options, str(tmp_path / "cp")))
    assert f"Kafka refused a record for topic '{topic}'" in text
    assert "[MSG_SIZE_TOO_LARGE]" in text


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_record_the_broker_rejects_fails_the_batch(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    topic = make_kafka_topic(1, config={"max.message.bytes": "2000"})
    table = pa.table({"value": [b"small", b"x" * 5000]})
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, "topic": topic}
    if exactly_once:
        options["exactlyOnce"] = "true"
    text = _failure(run_into_kafka([table], options, str(tmp_path / "cp")))
    where = "batch 0" if exactly_once else "batch 0 (part 0)"
    # the broker refuses a whole request: the small record may fail with the large one
    expected = (
        rf"Kafka could not deliver [12] record\(s\) of {re.escape(where)}; the first to "
        f"topic '{topic}'"
    )
    assert re.search(expected, text), text
    assert "MSG_SIZE_TOO_LARGE" in text
    if exactly_once:  # the transaction was aborted: read_committed readers see nothing
        assert read_records(kafka_service, topic) == []


def test_a_missing_topic_without_auto_creation_fails_the_batch(
    tmp_path: Path, kafka_service: Any
) -> None:
    missing = f"missing-{os.getpid()}-{tmp_path.name}"[:200]
    options = {
        "kafka.bootstrap.servers": kafka_service.bootstrap_servers,
        "topic": missing,
        "kafka.allow.auto.create.topics": "false",
        "kafka.topic.metadata.propagation.max.ms": "300",
    }
    query = run_into_kafka(
        [pa.table({"value": ["a"]})], options, str(tmp_path / "cp"), conf={"maxBatchRetries": 0}
    )
    text = _failure(query)
    assert f"topic '{missing}'" in text and "UNKNOWN_TOPIC" in text
    assert missing not in kafka_service.admin().list_topics(timeout=10).topics


def test_client_errors_map_to_retriable_or_not() -> None:
    transient = KafkaError(KafkaError._TRANSPORT, "broker down", retriable=True)
    with pytest.raises(
        SinkError, match=r"writing: broker down \[_TRANSPORT\]; the batch is retried"
    ):
        raise_client_error(transient, "writing")
    try:
        raise_client_error(transient, "writing")
    except SinkError as error:
        assert any(isinstance(link, RetriableError) for link in cause_chain(error))
    # a delivery report's error carries no retriable flag: judged by its code
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT, "Message timed out")
    assert not timed_out.retriable()
    try:
        raise_client_error(timed_out, "delivering")
    except SinkError as error:
        assert any(isinstance(link, RetriableError) for link in cause_chain(error))
    final = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")
    try:
        raise_client_error(final, "writing")
    except SinkError as error:
        assert not any(isinstance(link, RetriableError) for link in cause_chain(error))
    delivery = Delivery("batch 3 (part 1)")
    delivery.check()  # nothing failed


def test_cached_producers_are_safe_across_a_fork(kafka_service: Any, make_kafka_topic: Any) -> None:
    """The testkit forks after the parent made producers: the child must make its own."""
    topic = make_kafka_topic(1)
    writer = KafkaPartWriter(
        {"bootstrap.servers": kafka_service.bootstrap_servers}, Layout(default_topic=topic)
    )

    def write(value: str, batch_id: int) -> None:
        table = pa.table({"value": [value]})
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
        writer.write(reader, PartContext(batch_id=batch_id, part_index=0, num_parts=1))

    write("parent before", 0)
    pid = os.fork()
    if pid == 0:  # the child: the inherited producer is not used
        code = 1
        try:
            write("child", 1)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    write("parent after", 2)
    close_run(writer.run)
    values = [r["value"] for r in read_records(kafka_service, topic)]
    assert values == [b"parent before", b"child", b"parent after"]


def _purged_reports(delivery: Delivery) -> None:
    """Real purge reports: records queued to an unreachable broker, purged in the queue."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "delivery.report.only.error": True})
    for value in (b"a", b"b"):
        producer.produce("t", value, on_delivery=delivery)
    producer.purge(True, True, False)
    assert producer.flush(5) == 0
    producer.close()


def test_purged_records_of_a_transaction_abort_and_retry_the_batch() -> None:
    delivery = Delivery("batch 4", transactional=True)
    _purged_reports(delivery)
    assert delivery.failed == 2
    retried = r"\[_PURGE_QUEUE\]; the transaction is aborted and the batch is retried"
    with pytest.raises(SinkError, match=retried) as raised:
        delivery.check()
    assert any(isinstance(link, RetriableError) for link in cause_chain(raised.value))


def test_a_delivery_error_is_reported_before_the_purges_it_caused() -> None:
    delivery = Delivery("batch 4", transactional=True)
    _purged_reports(delivery)  # librdkafka purges the rest of a failed transaction first
    delivery(KafkaError(KafkaError._MSG_TIMED_OUT, "Message timed out"), None)
    with pytest.raises(SinkError, match=r"Message timed out \[_MSG_TIMED_OUT\]") as raised:
        delivery.check()
    assert "3 record(s)" in str(raised.value)
    assert any(isinstance(link, RetriableError) for link in cause_chain(raised.value))


@pytest.mark.parametrize("headers", [False, True])
def test_a_record_larger_than_the_producers_queue_fails_at_once(headers: bool) -> None:
    """It could never be queued: the write must fail, naming the size and the setting,
    not wait for room forever (no broker is needed to see it)."""
    import threading

    layout = Layout(default_topic="t", headers=headers)
    writer = KafkaPartWriter(
        {"bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.kbytes": "1"}, layout
    )
    columns: dict[str, Any] = {"value": [b"x" * 3000]}
    if headers:
        columns["headers"] = pa.array(
            [[{"key": "h", "value": b"1"}]],
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        )
    table = pa.table(columns)
    raised: list[BaseException] = []

    def write() -> None:
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
        try:
            writer.write(reader, PartContext(batch_id=0, part_index=0, num_parts=1))
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the write waited forever for room in the queue"
    close_run(writer.run)  # as the stream writer's stop() does
    assert raised and isinstance(raised[0], SinkError), raised
    text = str(raised[0])
    assert "record of 30" in text and "'kafka.queue.buffering.max.kbytes'" in text, text
    assert not any(isinstance(link, RetriableError) for link in cause_chain(raised[0]))


def rdkafka_threads() -> int:
    """Threads librdkafka runs in this process (each client has a few, named ``rdk:...``)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read())
        except OSError:  # ended meanwhile
            pass
    return sum(name.startswith("rdk:") for name in names)


@pytest.mark.parametrize("exactly_once", [False, True])
def test_a_query_run_closes_its_producers(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    """Producers left open keep reconnecting to the broker (and logging it) long after the
    query ended; pool threads of later runs would each add their own."""
    topic = make_kafka_topic(3)
    kafka_service.admin()  # the test's own client: its threads are there before and after
    before = rdkafka_threads()
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, "topic": topic}
    if exactly_once:
        options["exactlyOnce"] = "true"
    for run in range(2):
        batches = [pa.table({"value": [f"{run}-{b}-{i}" for i in range(50)]}) for b in range(2)]
        query = run_into_kafka(batches, options, str(tmp_path / f"cp{run}"))
        assert query.exception() is None
        assert rdkafka_threads() == before, f"run {run} left clients open"
    assert len(read_records(kafka_service, topic)) == 200

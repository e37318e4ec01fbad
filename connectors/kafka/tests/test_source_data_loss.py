"""failOnDataLoss: records deleted under a range the query has not read yet."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import microbatch as mb
from microbatch import SourceError
from microbatch.errors import StreamingQueryException
from microbatch_kafka._split_reader import KafkaSplit, losses_for
from microbatch_kafka.source import KafkaSource


def _delete_before(kafka_service: Any, topic: str, offset: int) -> None:
    from confluent_kafka import TopicPartition

    futures = kafka_service.admin().delete_records([TopicPartition(topic, 0, offset)])
    for future in futures.values():
        assert future.result(timeout=30).low_watermark == offset


def _text(error: BaseException) -> str:
    texts = [str(error)]
    while error.__cause__ is not None:
        error = error.__cause__
        texts.append(str(error))
    return "\n".join(texts)


@pytest.fixture
def read_20_then_lose_40(
    kafka_service: Any, make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any
) -> tuple[str, dict[str, Any]]:
    """A topic of 100 records; a query read the first 20 (its checkpoint is at 20), then
    records 20-59 were deleted."""
    topic = make_kafka_topic(1)
    produce(topic, [{"value": b"%d" % i} for i in range(20)])
    options = source_options(subscribe=topic, startingOffsets="earliest")
    assert drain(options).num_rows == 20
    produce(topic, [{"value": b"%d" % i} for i in range(20, 100)])
    _delete_before(kafka_service, topic, 60)
    return topic, options


def test_fail_on_data_loss_fails_naming_partition_and_offsets(
    read_20_then_lose_40: tuple[str, dict[str, Any]], drain: Any
) -> None:
    topic, options = read_20_then_lose_40
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(options)
    text = _text(caught.value)
    assert "Some data may have been lost because they are not available in Kafka any more" in text
    assert (
        f"Could not read records in offset [20, 60) for topic partition {topic}-0 with consumer "
        "group microbatch-kafka-source-"
    ) in text


def test_without_fail_on_data_loss_the_rest_is_read_with_a_warning_and_the_metric(
    read_20_then_lose_40: tuple[str, dict[str, Any]],
    drain: Any,
    offsets_of: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic, options = read_20_then_lose_40
    with caplog.at_level(logging.WARNING, logger="microbatch.kafka"):
        table = drain({**options, "failOnDataLoss": "false"})
    assert offsets_of(table) == {0: list(range(60, 100))}
    assert f"Could not read records in offset [20, 60) for topic partition {topic}-0" in caplog.text
    assert 'set the source option "failOnDataLoss" to "true"' in caplog.text
    metrics = drain.last_query.last_progress["sources"][0]["metrics"]
    assert metrics["offsetOutOfRange"] == "40"
    assert metrics["dataLoss"] == "1"


def test_records_deleted_while_a_split_is_read(
    kafka_service: Any,
    make_kafka_topic: Any,
    produce: Any,
    source_options: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The reader's own check (planning saw the records; they went before the read)."""
    topic = make_kafka_topic(1)
    produce(topic, [{"value": b"%d" % i} for i in range(100)])
    _delete_before(kafka_service, topic, 60)
    for fail in (True, False):
        raw = source_options(subscribe=topic, failOnDataLoss=fail)
        source = KafkaSource(KafkaSource.options.parse(raw, connector="kafka"))
        reader = source.stream_reader(mb.ReadContext(schema=source.schema(), query_id="q"))
        try:
            split_reader = reader.split_reader()
            split = KafkaSplit(topic, 0, 20, 100)
            if fail:
                with pytest.raises(
                    SourceError, match=r"Could not read records in offset \[20, 60\)"
                ):
                    list(split_reader.read(split))
                continue
            with caplog.at_level(logging.WARNING, logger="microbatch.kafka"):
                batches = list(split_reader.read(split))
            offsets = [o for b in batches for o in b.column("offset").to_pylist()]
            assert offsets == list(range(60, 100))
            assert "Records in [20, 60) are skipped" in caplog.text
            loss = losses_for(reader.loss_key, False, reader.group_id)
            assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "40"}
            assert reader.metrics()["offsetOutOfRange"] == "40"
        finally:
            reader.stop()


def test_a_deleted_topic(
    kafka_service: Any, make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any
) -> None:
    topic = make_kafka_topic(1)
    other = make_kafka_topic(1)
    produce(topic, [{"value": b"a"}])
    produce(other, [{"value": b"b"}])
    options = source_options(subscribe=f"{topic},{other}", startingOffsets="earliest")
    assert drain(options).num_rows == 2
    kafka_service.delete_topic(topic)
    produce(other, [{"value": b"c"}])
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(options)
    assert f"Partitions [{topic}-0] have been deleted." in _text(caught.value)
    table = drain({**options, "failOnDataLoss": "false"})
    assert table.column("value").to_pylist() == [b"c"]

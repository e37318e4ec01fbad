"""The source's options: Spark's names, refusals with what to use instead, secrets, schema."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import microbatch as mb
from microbatch import OptionError, SchemaError
from microbatch_kafka._source_options import SOURCE_OPTIONS, consumer_settings, group_id
from microbatch_kafka.source import KafkaSource

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def _parse(**raw: Any) -> mb.Options:
    return SOURCE_OPTIONS.parse(raw, connector="kafka")


def _problems(**raw: Any) -> str:
    with pytest.raises(OptionError) as caught:
        KafkaSource(_parse(**raw))
    return str(caught.value)


def test_bootstrap_servers_are_required() -> None:
    text = _problems(subscribe="t")
    assert (
        "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer" in text
    )
    _parse(**{"Kafka.Bootstrap.Servers": "h:1"}, subscribe="t")  # any case


def test_exactly_one_subscription() -> None:
    assert "exactly one of 'subscribe', 'subscribePattern', 'assign' must be set" in _problems(
        **BOOT
    )
    text = _problems(**BOOT, subscribe="a", subscribePattern="a.*")
    assert "got 'subscribe' and 'subscribePattern'" in text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"subscribe": ""}, "No topics to subscribe to"),
        ({"subscribePattern": " "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "a(["}, "is not a valid regular expression"),
        ({"assign": "[1, 2]"}, "No topicpartitions to assign as specified value for option"),
        ({"assign": '{"t": []}'}, "No topicpartitions to assign"),
        ({"assign": '{"t": ["x"]}'}, "No topicpartitions to assign"),
        ({"assign": "{"}, "is not valid JSON"),
    ],
)
def test_bad_subscriptions(raw: dict[str, Any], expected: str) -> None:
    assert expected in _problems(**BOOT, **raw)


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("auto.offset.reset", "set the source option 'startingOffsets' to 'earliest' or 'latest'"),
        ("enable.auto.commit", "commitOffsetsToGroup=true"),
        ("key.deserializer", "keys are always read as bytes"),
        ("value.deserializer", ".parse_json('value', schema)"),
        ("interceptor.classes", "interceptors"),
        ("enable.auto.offset.store", "the source sets it itself"),
        ("enable.partition.eof", "the source sets it itself"),
        ("group.instance.id", "never joins its consumer group"),
    ],
)
def test_settings_the_source_manages_are_refused(key: str, hint: str) -> None:
    text = _problems(**BOOT, subscribe="t", **{f"kafka.{key.upper()}": "x"})
    assert f"Kafka option 'kafka.{key}' is not supported: " in text
    assert hint in text


def test_bare_librdkafka_names_are_unknown_options() -> None:
    text = _problems(**BOOT, subscribe="t", **{"group.id": "g"})
    assert "unknown option 'group.id'" in text
    assert "any option starting with 'kafka.'" in text


def test_rate_limit_options() -> None:
    text = _problems(**BOOT, subscribe="t", minOffsetsPerTrigger=10, maxOffsetsPerTrigger=5)
    assert (
        "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)." in text
    )
    assert "must be at least 1" in _problems(**BOOT, subscribe="t", minPartitions=0)
    _parse(**BOOT, subscribe="t", minOffsetsPerTrigger=5, maxOffsetsPerTrigger=5)


def test_streams_refuse_ending_offsets() -> None:
    assert "ending offset not valid in streaming queries" in _problems(
        **BOOT, subscribe="t", endingOffsets="latest"
    )
    KafkaSource(_parse(**BOOT, subscribe="t", endingOffsets="latest"), streaming=False)


def test_secrets_never_show() -> None:
    secret = "hunter2-secret"
    opts = _parse(
        **BOOT,
        subscribe="t",
        **{
            "kafka.sasl.password": secret,
            "kafka.ssl.key.pem": secret + "pem",
            "kafka.sasl.oauthbearer.config": secret + "oauth",
        },
    )
    assert secret not in repr(opts)
    reader = KafkaSource(opts).stream_reader(
        mb.ReadContext(schema=KafkaSource(opts).schema(), query_id="q")
    )
    assert secret not in repr(reader.split_reader())
    assert secret not in repr(reader.metadata)
    # and in an error about another option of the same query
    text = _problems(**BOOT, subscribe="t", minPartitions=0, **{"kafka.sasl.password": secret})
    assert secret not in text


def test_consumer_settings() -> None:
    opts = _parse(**BOOT, subscribe="t", **{"kafka.Fetch.Min.Bytes": 10})
    settings = consumer_settings(opts, "g")
    assert settings["isolation.level"] == "read_uncommitted"  # Spark's default, set explicitly
    assert settings["fetch.min.bytes"] == "10"
    assert settings["auto.offset.reset"] == "error"
    assert settings["enable.auto.commit"] == "false"
    assert settings["enable.partition.eof"] == "true"
    assert settings["group.id"] == "g"
    committed = _parse(**BOOT, subscribe="t", **{"kafka.isolation.level": "read_committed"})
    assert consumer_settings(committed, "g")["isolation.level"] == "read_committed"


def test_group_ids(caplog: pytest.LogCaptureFixture) -> None:
    opts = _parse(**BOOT, subscribe="t")
    assert group_id(opts, "abc") == "microbatch-kafka-source-abc"
    assert group_id(_parse(**BOOT, subscribe="t", groupIdPrefix="lag"), "abc") == "lag-abc"
    assert group_id(opts, None).startswith("microbatch-kafka-source-batch-")
    with caplog.at_level(logging.WARNING, logger="microbatch.kafka"):
        custom = _parse(**BOOT, subscribe="t", **{"kafka.group.id": "mine"})
        KafkaSource(custom)
    assert group_id(custom, "abc") == "mine"
    assert "Kafka option 'kafka.group.id' has been set on this query" in caplog.text


def test_describe() -> None:
    assert KafkaSource(_parse(**BOOT, subscribe="a,b")).describe() == "KafkaV2[Subscribe[a, b]]"
    pattern = KafkaSource(_parse(**BOOT, subscribePattern="t-.*"))
    assert pattern.describe() == "KafkaV2[SubscribePattern[t-.*]]"
    assign = KafkaSource(_parse(**BOOT, assign='{"t": [1, 0]}'))
    assert assign.describe() == "KafkaV2[Assign[t-0, t-1]]"


def test_a_user_schema_is_refused_with_the_decoding_idiom() -> None:
    session = mb.Session()
    builder = session.read_stream.format("kafka").options(**BOOT, subscribe="t")
    with pytest.raises(SchemaError) as caught:
        builder.schema("id INT").load()
    text = str(caught.value)
    assert "fixed schema" in text
    assert 'from_json(col("value").cast("string"), schema)' in text
    assert '.parse_json("value", schema)' in text


def test_the_schema_depends_on_include_headers() -> None:
    plain = KafkaSource(_parse(**BOOT, subscribe="t")).schema()
    with_headers = KafkaSource(_parse(**BOOT, subscribe="t", includeHeaders=True)).schema()
    assert plain.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    assert with_headers.names == [*plain.names, "headers"]


def test_pattern_matches_whole_names_and_skips_internal_topics() -> None:
    from microbatch_kafka._metadata import Subscription

    pattern = Subscription.from_options(_parse(**BOOT, subscribePattern="t.*"))
    cluster = {"t1": [0, 1], "xt1": [0], "__consumer_offsets": [0], "t2": [0]}
    assert pattern.select(cluster) == {("t1", 0), ("t1", 1), ("t2", 0)}
    everything = Subscription.from_options(_parse(**BOOT, subscribePattern=".*"))
    assert ("__consumer_offsets", 0) not in everything.select(cluster)
    assign = Subscription.from_options(_parse(**BOOT, assign='{"t1": [1, 5]}'))
    assert assign.select(cluster) == {("t1", 1)}  # partition 5 does not exist (yet)

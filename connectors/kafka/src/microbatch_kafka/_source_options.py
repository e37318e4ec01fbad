"""The options of the ``kafka`` source, with Spark's names, and the consumer settings built
from them.

Every ``kafka.*`` option reaches librdkafka without the prefix (see :mod:`._client_config`).
The settings the source manages itself (where to start, committing, deserializing, end of
partition events) are refused with what to use instead.
"""

from __future__ import annotations

import re
from typing import Any

from microbatch import ExactlyOneOf, Option, Options, OptionSpec, Rule

from ._client_config import PREFIX, SECRET_KEYS, client_settings, refuses, requires_bootstrap

__all__ = [
    "DEFAULT_GROUP_ID_PREFIX",
    "REFUSED",
    "SOURCE_OPTIONS",
    "consumer_settings",
    "group_id",
    "isolation_level",
]

DEFAULT_GROUP_ID_PREFIX = "microbatch-kafka-source"

_FETCH_WAIT_MS = "100"
_QUEUE_BACKOFF_MS = "10"

_SET_BY_SOURCE = "the source sets it itself; remove it"

REFUSED: dict[str, str] = {
    "auto.offset.reset": (
        "instead set the source option 'startingOffsets' to 'earliest' or 'latest' to specify "
        "where to start. The query manages which offsets are consumed itself (they live in its "
        "checkpoint), rather than relying on the Kafka consumer to do it: this ensures that no "
        "data is missed when new topics or partitions are dynamically subscribed. Note that "
        "'startingOffsets' only applies when a new streaming query is started, and that "
        "resuming will always pick up from where the query left off"
    ),
    "enable.auto.commit": (
        "offsets live in the query's checkpoint, not in a consumer group; set the source "
        "option commitOffsetsToGroup=true to also publish each committed batch's offsets to "
        "the consumer group"
    ),
    "key.deserializer": (
        "keys are always read as bytes (the binary column 'key'); decode them with frame "
        "operations, for example .cast({'key': 'string'}) or .parse_json('key', schema)"
    ),
    "value.deserializer": (
        "values are always read as bytes (the binary column 'value'); decode them with frame "
        "operations, for example .cast({'value': 'string'}) or .parse_json('value', schema)"
    ),
    "interceptor.classes": "interceptors could change records behind the source's back",
    "enable.auto.offset.store": _SET_BY_SOURCE,
    "enable.partition.eof": _SET_BY_SOURCE,
    "group.instance.id": (
        "the source never joins its consumer group (it assigns partitions itself), so a "
        "static membership id has no use; remove it"
    ),
}
"""librdkafka settings (lower-case, without ``kafka.``) the source refuses, with the hint."""


def _check_subscribe(value: tuple[str, ...]) -> str | None:
    if not value:
        shown = ",".join(value)  # the value as split: no topic names left in it
        return f"No topics to subscribe to as specified value for option 'subscribe' is '{shown}'"
    return None


def _check_pattern(value: str) -> str | None:
    if not value.strip():
        return (
            "Pattern to subscribe is empty as specified value for option 'subscribePattern' "
            f"is '{value}'"
        )
    try:
        re.compile(value)
    except re.error as error:
        return f"is not a valid regular expression: {error}"
    return None


def _check_assign(value: Any) -> str | None:
    bad = (
        f"No topicpartitions to assign as specified value for option 'assign' is '{value}'; "
        'expected a JSON object of topics and partition lists, e.g. {"topicA":[0,1]}'
    )
    if not isinstance(value, dict) or not value:
        return bad
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not isinstance(partitions, list):
            return bad
        if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions):
            return bad
    if not any(value.values()):
        return bad
    return None


def _min_not_above_max(options: Options) -> bool:
    low, high = options.min_offsets_per_trigger, options.max_offsets_per_trigger
    if low is not None and high is not None and low > high:
        raise ValueError(
            f"The value of minOffsetPerTrigger({low}) is higher than the "
            f"maxOffsetsPerTrigger({high})."
        )
    return True


def _check_timestamp_json(value: Any) -> str | None:
    if not isinstance(value, dict):
        return 'expected a JSON object of topics and partition timestamps, e.g. {"t":{"0":1000}}'
    return None


SOURCE_OPTIONS = OptionSpec(
    Option(
        name="subscribe",
        type="list",
        identity=True,
        validate=_check_subscribe,
        doc="Comma-separated topics to read. Exactly one of subscribe, subscribePattern and "
        "assign is required.",
    ),
    Option(
        name="subscribePattern",
        identity=True,
        validate=_check_pattern,
        doc="A regular expression (Python re, matched against the whole topic name) of the "
        "topics to read; topics that appear later and match are read too, from their "
        "earliest offset. Internal topics (names starting with '__') never match.",
    ),
    Option(
        name="assign",
        type="json",
        identity=True,
        validate=_check_assign,
        doc='The topic partitions to read, as JSON: {"topicA":[0,1],"topicB":[2,4]}.',
    ),
    Option(
        name="startingOffsets",
        doc="Where a new query starts: 'earliest', 'latest' (the default for streams; "
        "batch reads default to 'earliest') or JSON per partition, "
        '{"topicA":{"0":23,"1":-2}} (-2 earliest, -1 latest), naming every partition. '
        "Only used when the checkpoint has no offsets yet.",
    ),
    Option(
        name="startingTimestamp",
        doc="Start every partition at the first record whose timestamp is at or after this "
        "epoch time in milliseconds; wins over startingOffsetsByTimestamp and "
        "startingOffsets.",
    ),
    Option(
        name="startingOffsetsByTimestamp",
        type="json",
        validate=_check_timestamp_json,
        doc='Per-partition start timestamps in epoch milliseconds, {"topicA":{"0":1000}}, '
        "naming every partition; wins over startingOffsets.",
    ),
    Option(
        name="startingOffsetsByTimestampStrategy",
        default="error",
        choices=("error", "latest"),
        doc="What to do when no record is at or after a starting timestamp: 'error' fails the "
        "query, 'latest' starts that partition at its latest offset.",
    ),
    Option(
        name="endingOffsets",
        doc="Batch reads only: where to stop, 'latest' (the default) or JSON per partition "
        '{"topicA":{"0":50,"1":-1}} (-1 latest).',
    ),
    Option(
        name="maxOffsetsPerTrigger",
        type="int",
        minimum=1,
        doc="At most this many offsets per batch, split across partitions in proportion to "
        "their backlog (a share below one is rounded up, so no partition starves).",
    ),
    Option(
        name="minOffsetsPerTrigger",
        type="int",
        minimum=1,
        doc="Wait until this many new offsets are available before running a batch, or until "
        "maxTriggerDelay has passed since the last batch.",
    ),
    Option(
        name="maxTriggerDelay",
        type="duration",
        default="15m",
        doc="With minOffsetsPerTrigger: the longest wait between two batches when fewer "
        "offsets are available.",
    ),
    Option(
        name="minPartitions",
        type="int",
        minimum=1,
        doc="Read each batch in at least this many splits: large partition ranges are cut into "
        "several (default: one split per topic partition).",
    ),
    Option(
        name="failOnDataLoss",
        type="bool",
        default=True,
        doc="Fail the query when offsets it has not read are gone (aged out, deleted, a topic "
        "or partition deleted, offsets that went backwards); false logs a warning, skips to "
        "what exists and counts the lost offsets in the progress metrics.",
    ),
    Option(
        name="includeHeaders",
        type="bool",
        default=False,
        doc="Add the column 'headers' (a list of key, value structs) to the schema.",
    ),
    Option(
        name="groupIdPrefix",
        default=DEFAULT_GROUP_ID_PREFIX,
        doc="Prefix of the consumer group id the source uses: '<prefix>-<query id>' (ignored "
        "when kafka.group.id is set).",
    ),
    Option(
        name="commitOffsetsToGroup",
        type="bool",
        default=False,
        doc="Also commit each committed batch's end offsets to the source's consumer group "
        "(best effort), so that lag monitoring sees the query. The checkpoint stays the "
        "source of truth.",
    ),
    Option(
        name="kafkaConsumer.pollTimeoutMs",
        type="int",
        default=120_000,
        minimum=1,
        doc="How long reading one split may wait for records from the broker before the batch "
        "fails with a retriable error (milliseconds).",
    ),
    Option(
        name="fetchOffset.numRetries",
        type="int",
        default=3,
        minimum=0,
        doc="How many times a failed offset look-up is tried again before the batch fails "
        "with a retriable error.",
    ),
    Option(
        name="fetchOffset.retryIntervalMs",
        type="int",
        default=1000,
        minimum=0,
        doc="Milliseconds to wait before trying a failed offset look-up again.",
    ),
    prefixes=(PREFIX,),
    secret_keys=SECRET_KEYS,
    rules=(
        ExactlyOneOf(
            "subscribe",
            "subscribePattern",
            "assign",
            hint="one of them says which topics the Kafka source reads (see the options of "
            "the source in the microbatch-kafka README)",
        ),
        requires_bootstrap("consumer"),
        refuses(REFUSED),
        Rule(
            _min_not_above_max,
            "minOffsetsPerTrigger must not be above maxOffsetsPerTrigger",
            names=("minOffsetsPerTrigger", "maxOffsetsPerTrigger"),
        ),
    ),
)
"""The options of ``format("kafka")`` as a source."""


def group_id(options: Options, query_id: str | None) -> str:
    """The consumer group id: ``kafka.group.id`` when given, else ``<groupIdPrefix>-<query
    id>`` (a batch read, without a query id, gets a random one)."""
    given = client_settings(options).get("group.id")
    if given is not None:
        return str(given)
    if query_id is None:
        import uuid

        return f"{options.group_id_prefix}-batch-{uuid.uuid4()}"
    return f"{options.group_id_prefix}-{query_id}"


def isolation_level(options: Options) -> str:
    """``read_uncommitted`` (Spark's default) unless ``kafka.isolation.level`` says otherwise."""
    given = client_settings(options).get("isolation.level")
    return "read_uncommitted" if given is None else str(given).strip().lower()


def _as_setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def consumer_settings(options: Options, group: str) -> dict[str, str]:
    """The librdkafka settings of every consumer the source opens: the user's ``kafka.*``
    settings plus the ones the source relies on (assign-only, no commits, end-of-partition
    events, ``auto.offset.reset=error`` so that missing offsets are reported)."""
    settings = {key: _as_setting(value) for key, value in client_settings(options).items()}
    # Pooled consumers stay assigned at the end of the range they read, waiting for the next
    # records at most this long per fetch (librdkafka's default is 500: moving such a
    # consumer to another partition waits for that fetch).
    settings.setdefault("fetch.wait.max.ms", _FETCH_WAIT_MS)
    # a full local queue pauses fetching this long (librdkafka's default is 1000)
    settings.setdefault("fetch.queue.backoff.ms", _QUEUE_BACKOFF_MS)
    settings.update(
        {
            "group.id": group,
            "isolation.level": isolation_level(options),
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "error",
        }
    )
    return settings

"""The options of the ``kafka`` sink: Spark's ``topic`` and ``kafka.*``, plus exactly once.

Every ``kafka.*`` option reaches the producer without the prefix (see ``_client_config``);
the settings that would break what the sink relies on are refused, saying what to use instead.
"""

from __future__ import annotations

from datetime import timedelta

from microbatch import Option, Options, OptionSpec, Rule

from ._client_config import PREFIX, SECRET_KEYS, client_settings, refuses, requires_bootstrap

__all__ = ["DEFAULT_PREFIX", "REFUSED", "SINK_OPTIONS", "UNKNOWN_BATCH_CHOICES"]

DEFAULT_PREFIX = "microbatch"
UNKNOWN_BATCH_CHOICES = ("fail", "rewrite", "skip")

REFUSED = {
    "key.serializer": (
        "keys are written as bytes: give a 'key' column of type string or binary (cast it "
        "first: .cast({'key': 'STRING'}))"
    ),
    "value.serializer": (
        "values are written as bytes: give a 'value' column of type string or binary (cast "
        "it first: .cast({'value': 'STRING'}))"
    ),
    "transactional.id": (
        "the transactional id is derived from the query id: set exactlyOnce=true (and "
        "transactionalIdPrefix to choose its prefix)"
    ),
    "partitioner.class": (
        "a Java client setting: use kafka.partitioner (librdkafka's name), e.g. "
        "murmur2_random, the Java clients' choice and the default here"
    ),
    "interceptor.classes": "Java interceptors are not supported by librdkafka",
}


def _not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _positive(value: timedelta) -> str | None:
    return None if value > timedelta(0) else "must be more than 0"


def _idempotence_kept(options: Options) -> bool:
    if not options.exactly_once:
        return True
    value = client_settings(options).get("enable.idempotence")
    return value is None or str(value).strip().lower() in ("true", "1")


def _marker_topic_known(options: Options) -> bool:
    return not options.exactly_once or bool(options.topic or options.exactly_once_marker_topic)


SINK_OPTIONS = OptionSpec(
    Option(
        name="topic",
        doc=(
            "The topic every row is written to; it wins over a 'topic' column (without it, "
            "each row needs a non-null 'topic')."
        ),
    ),
    Option(
        name="exactlyOnce",
        type="bool",
        default=False,
        doc=(
            "Write each batch in one Kafka transaction with the batch id recorded in it, so "
            "that read_committed consumers see every batch exactly once (beyond Spark)."
        ),
    ),
    Option(
        name="transactionalIdPrefix",
        default=DEFAULT_PREFIX,
        validate=_not_blank,
        doc=(
            "With exactlyOnce: the transactional.id is '<prefix>-<query id>' and the batch "
            "marker group '<prefix>-<query id>-batches'."
        ),
    ),
    Option(
        name="exactlyOnceMarkerTopic",
        doc=(
            "With exactlyOnce: an existing topic whose partition 0 holds the batch marker of "
            "the marker group (default: the 'topic' option; required without it)."
        ),
    ),
    Option(
        name="exactlyOnceUnknownBatch",
        default="fail",
        choices=UNKNOWN_BATCH_CHOICES,
        doc=(
            "With exactlyOnce, when the batch marker expired (or a commit to it never "
            "settles) and a batch was being committed when the query stopped: fail "
            "(default), rewrite it (may duplicate) or skip it (may lose it)."
        ),
    ),
    Option(
        name="exactlyOnceTimeout",
        type="duration",
        default=timedelta(seconds=60),
        validate=_positive,
        doc=(
            "With exactlyOnce: how long each transactional call (init, commit, abort, the "
            "marker's offsets) may take. One that has not returned a few seconds later (the "
            "client can wait far longer for a coordinator after a broker restart) is "
            "abandoned with its producer, and the batch is retried with a new producer, "
            "which fences the old one."
        ),
    ),
    prefixes=(PREFIX,),
    rules=(
        requires_bootstrap("producer"),
        refuses(REFUSED),
        Rule(
            _idempotence_kept,
            "Kafka option 'kafka.enable.idempotence' cannot be false with exactlyOnce=true: "
            "transactions need the idempotent producer",
            names=("exactlyOnce",),
        ),
        Rule(
            _marker_topic_known,
            "exactlyOnce=true without the 'topic' option needs 'exactlyOnceMarkerTopic': an "
            "existing topic whose partition 0 holds the batch marker",
            names=("exactlyOnce", "topic", "exactlyOnceMarkerTopic"),
        ),
    ),
    secret_keys=SECRET_KEYS,
)
"""The sink's declared options."""

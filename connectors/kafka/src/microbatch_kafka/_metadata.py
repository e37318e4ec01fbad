"""Which topic partitions the source reads, and their offsets, asked on the query's thread.

:class:`Subscription` is what the options name (``subscribe``, ``subscribePattern`` or
``assign``). :class:`KafkaMetadata` finds the matching partitions (a cluster-wide topic
listing, which never creates a topic, refreshed at most every ``refresh_seconds``) and looks up
earliest, latest and for-timestamp offsets of many partitions in one batched admin request,
with the readers' isolation level (under ``read_committed`` the latest offset is the last
stable offset). Broker failures become :class:`~microbatch.RetriableError` (the engine runs the
batch again); authorisation and configuration failures a :class:`~microbatch.SourceError`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from microbatch import RetriableError, SourceError

from ._offsets import PartitionOffsets, TopicPartition, describe_tp

__all__ = ["ADMIN_IGNORED", "KafkaMetadata", "Subscription", "is_fatal", "kafka_failure"]

log = logging.getLogger("microbatch.kafka")

# Consumer-only librdkafka settings: the admin client would log a warning for each.
ADMIN_IGNORED = frozenset(
    {
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.protocol.type",
        "group.remote.assignor",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "coordinator.query.interval.ms",
        "max.poll.interval.ms",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.wait.max.ms",
        "fetch.queue.backoff.ms",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.error.backoff.ms",
        "isolation.level",
        "enable.partition.eof",
        "check.crcs",
        "auto.offset.reset",
        "allow.auto.create.topics",
        "consume.callback.max.messages",
        "offset.store.method",
        "offset.store.path",
        "offset.store.sync.interval.ms",
    }
)

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def _fatal_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    names = (
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "SASL_AUTHENTICATION_FAILED",
        "_AUTHENTICATION",
        "_SSL",
        "_INVALID_ARG",
        "_NOT_IMPLEMENTED",
        "UNSUPPORTED_VERSION",
        "UNSUPPORTED_SASL_MECHANISM",
        "ILLEGAL_SASL_STATE",
        "INVALID_CONFIG",
        "INVALID_REQUEST",
    )
    return frozenset(getattr(KafkaError, name) for name in names if hasattr(KafkaError, name))


def is_fatal(error: Any) -> bool:
    """True when a ``KafkaError`` cannot be cured by trying again (authorisation, SSL or SASL
    failures, bad settings): everything else (a broker down, a leader moving, a timeout) is
    worth retrying."""
    try:
        if error.fatal():
            return True
        return int(error.code()) in _fatal_codes()
    except AttributeError:
        return False


def kafka_failure(what: str, error: BaseException) -> Exception:
    """The microbatch error for a failed Kafka call: ``what`` failed because of ``error``
    (a ``KafkaException``), as a :class:`RetriableError` unless the failure is fatal."""
    kafka_error: Any = error.args[0] if error.args else None
    reason = kafka_error.str() if hasattr(kafka_error, "str") else str(error)
    name = f" ({kafka_error.name()})" if hasattr(kafka_error, "name") else ""
    text = f"{what} failed: {reason}{name}"
    if kafka_error is not None and is_fatal(kafka_error):
        return SourceError(text)
    return RetriableError(text)


@dataclass(frozen=True)
class Subscription:
    """What the options say to read: ``kind`` is ``subscribe`` (``topics``), ``pattern``
    (``pattern``, matched against whole topic names) or ``assign`` (``assigned``)."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    _regex: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def from_options(cls, options: Any) -> Subscription:
        if options.subscribe is not None:
            return cls("subscribe", topics=tuple(options.subscribe))
        if options.subscribe_pattern is not None:
            pattern = str(options.subscribe_pattern)
            return cls("pattern", pattern=pattern, _regex=re.compile(pattern))
        assign = options.assign or {}
        pairs = {(str(topic), int(p)) for topic, parts in assign.items() for p in parts}
        return cls("assign", assigned=tuple(sorted(pairs)))

    def describe(self) -> str:
        """As Spark's strategies print: ``Subscribe[a, b]``, ``SubscribePattern[p]``,
        ``Assign[t-0, t-1]``."""
        if self.kind == "subscribe":
            return f"Subscribe[{', '.join(self.topics)}]"
        if self.kind == "pattern":
            return f"SubscribePattern[{self.pattern}]"
        return f"Assign[{', '.join(describe_tp(tp) for tp in self.assigned)}]"

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one of the topics this subscription reads."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "pattern":
            if topic in _INTERNAL_TOPICS or topic.startswith("__"):
                return False
            return self._regex.fullmatch(topic) is not None
        return any(topic == tp[0] for tp in self.assigned)

    def select(self, cluster: Mapping[str, Collection[int]]) -> frozenset[TopicPartition]:
        """The partitions read, given ``cluster``'s topics and their partition ids."""
        if self.kind == "assign":
            return frozenset(tp for tp in self.assigned if tp[1] in cluster.get(tp[0], ()))
        return frozenset(
            (topic, partition)
            for topic, partitions in cluster.items()
            if self.matches(topic)
            for partition in partitions
        )


class KafkaMetadata:
    """Partitions and offsets of one subscription, from one admin client (made on first use).

    ``settings`` are the user's librdkafka settings (consumer-only ones are left out of the
    admin client's configuration). ``isolation`` is ``read_committed`` or
    ``read_uncommitted``. Offset look-ups that fail are tried ``retries`` more times,
    ``retry_interval`` seconds apart, before a :class:`RetriableError`. A partition that
    the cluster stops listing counts as deleted only once it has been missing for
    ``deletion_grace`` seconds (a broker restarting may list fewer topics for a moment).
    Not thread-safe: used from the query's thread.
    """

    def __init__(
        self,
        settings: Mapping[str, str],
        subscription: Subscription,
        *,
        isolation: str,
        retries: int = 3,
        retry_interval: float = 0.01,
        timeout: float = 10.0,
        refresh_seconds: float = 1.0,
        deletion_grace: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = {k: v for k, v in settings.items() if k not in ADMIN_IGNORED}
        self.subscription = subscription
        self.isolation = isolation
        self.retries = retries
        self.retry_interval = retry_interval
        self.timeout = timeout
        self.refresh_seconds = refresh_seconds
        self.deletion_grace = deletion_grace
        self._vanished_since: dict[TopicPartition, float] = {}
        self._deleted: set[TopicPartition] = set()
        self._clock = clock
        self._admin: Any = None
        self._partitions: frozenset[TopicPartition] | None = None
        self._refreshed_at = float("-inf")
        self._missing_warned: set[str] = set()
        self._cluster_topics: dict[str, frozenset[int]] = {}
        self.topic_ids: dict[str, str] = {}
        """The id of each topic read, as of the last listing (a topic deleted and created
        again under its name gets a new one)."""
        self._suspect: set[str] = set()
        # topics seen missing (a listing or an offset look-up): listed again at every call
        # of partitions() until they are back with their id, or taken as deleted

    def __repr__(self) -> str:  # never the settings: they may hold secrets
        return f"KafkaMetadata({self.subscription.describe()})"

    # -- clients --------------------------------------------------------------------------
    def admin(self) -> Any:
        """The admin client (made on first use)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            with self._failures("Connecting to Kafka"):
                self._admin = AdminClient(dict(self.settings))
        return self._admin

    def close(self) -> None:
        """Forget the admin client (librdkafka closes it when it is collected)."""
        self._admin = None

    @contextmanager
    def _failures(self, what: str) -> Iterator[None]:
        from confluent_kafka import KafkaException

        try:
            yield
        except KafkaException as error:
            self._admin = None  # a fresh client next time: no stale leaders or epochs
            raise kafka_failure(what, error) from None

    # -- partitions -----------------------------------------------------------------------
    def partitions(self, *, force: bool = False) -> frozenset[TopicPartition]:
        """The partitions the subscription reads now; the cluster is asked again when
        ``force`` or when the last answer is older than ``refresh_seconds``."""
        now = self._clock()
        stale = now - self._refreshed_at >= self.refresh_seconds
        if force or stale or self._partitions is None or self._suspect:
            self._partitions = self._fetch_partitions()
            self._refreshed_at = self._clock()
        return self._partitions

    def _fetch_partitions(self) -> frozenset[TopicPartition]:
        from confluent_kafka import KafkaError

        with self._failures("Listing the topics of the Kafka cluster"):
            metadata = self.admin().list_topics(timeout=self.timeout)
        cluster: dict[str, frozenset[int]] = {}
        for name, topic in metadata.topics.items():
            if topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if topic.error is not None and not topic.partitions:
                known = self._cluster_topics.get(name)
                if known is None:
                    continue  # being created: taken once it has partitions
                cluster[name] = known  # keep what we knew: never mistaken for a deletion
                continue
            cluster[name] = frozenset(topic.partitions)
        self._cluster_topics = cluster
        self._warn_missing(cluster)
        selected = self.subscription.select(cluster)
        listed = {tp[0] for tp in selected}
        self._suspect -= self._describe_ids(listed)
        kept = self._confirm_vanished(selected)
        self._suspect |= {tp[0] for tp in kept - selected}
        self._suspect -= {tp[0] for tp in self._deleted}
        return kept

    def _describe_ids(self, topics: Collection[str]) -> set[str]:
        """Update :attr:`topic_ids` for ``topics`` (one admin round trip per listing); the
        topics described. A failure only leaves the ids as they were: they are checked again
        at the next listing."""
        described_now: set[str] = set()
        if not topics:
            return described_now
        from confluent_kafka import KafkaException, TopicCollection

        try:
            futures = self.admin().describe_topics(
                TopicCollection(sorted(topics)), request_timeout=self.timeout
            )
        except (KafkaException, ValueError) as error:
            log.debug("describing topics for their ids failed: %s", error)
            return described_now
        for name, future in futures.items():
            try:
                described = future.result()
            except KafkaException as error:  # deleted since the listing, or not allowed
                log.debug("describing topic %r for its id failed: %s", name, error)
                continue
            if described.topic_id is not None:
                self.topic_ids[name] = str(described.topic_id)
                described_now.add(name)
        return described_now

    @property
    def suspect(self) -> bool:
        """Whether a topic read was seen missing and is not back with its id yet."""
        return bool(self._suspect)

    def expect(self, tps: Collection[TopicPartition]) -> None:
        """Partitions the query has read before (its start offsets): one that the cluster
        does not list is taken as deleted only after ``deletion_grace``, as for partitions
        this object listed itself."""
        fresh = frozenset(tps) - self._deleted
        if self._partitions is None:
            self._partitions = fresh  # still to be listed: _refreshed_at stays in the past
        elif not fresh <= self._partitions:
            self._partitions = self._partitions | fresh

    def _confirm_vanished(self, selected: frozenset[TopicPartition]) -> frozenset[TopicPartition]:
        """``selected``, plus the partitions known before that this listing lacks, until
        they have been missing for ``deletion_grace`` seconds: a broker shutting down or
        starting up may list fewer topics, which must not read as a deletion (the query would
        then report the partitions' data as lost)."""
        self._deleted -= selected  # created again
        if self._partitions is None:
            return selected
        now = self._clock()
        vanished = self._partitions - selected
        for tp in list(self._vanished_since):
            if tp not in vanished:
                del self._vanished_since[tp]
        kept = set()
        for tp in vanished:
            since = self._vanished_since.setdefault(tp, now)
            if now - since < self.deletion_grace:
                kept.add(tp)
            else:
                self._deleted.add(tp)
                del self._vanished_since[tp]
        if kept:
            log.info(
                "Kafka source %s: the cluster no longer lists %s; taken as deleted once it "
                "stays so for %g s",
                self.subscription.describe(),
                ", ".join(describe_tp(tp) for tp in sorted(kept)),
                self.deletion_grace,
            )
        return selected | kept

    def _warn_missing(self, cluster: Mapping[str, Collection[int]]) -> None:
        wanted: list[str] = []
        if self.subscription.kind == "subscribe":
            wanted = list(self.subscription.topics)
        elif self.subscription.kind == "assign":
            wanted = sorted({tp[0] for tp in self.subscription.assigned})
        for topic in wanted:
            if topic in cluster:
                self._missing_warned.discard(topic)
            elif topic not in self._missing_warned:
                self._missing_warned.add(topic)
                log.warning(
                    "Kafka source %s: topic %r does not exist (yet); its records are read "
                    "once it is created",
                    self.subscription.describe(),
                    topic,
                )

    # -- offsets --------------------------------------------------------------------------
    def earliest(self, tps: Collection[TopicPartition]) -> PartitionOffsets:
        """The earliest offset of each of ``tps`` that exists (deleted ones are left out)."""
        return self._offsets({tp: "earliest" for tp in tps}, "earliest offsets")

    def latest(self, tps: Collection[TopicPartition]) -> PartitionOffsets:
        """The latest offset of each of ``tps`` that exists (the last stable offset under
        ``read_committed``)."""
        return self._offsets({tp: "latest" for tp in tps}, "latest offsets")

    def for_timestamps(
        self, stamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is at or after each partition's timestamp
        (epoch ms); ``None`` where no record is that late."""
        found = self._offsets(dict(stamps), "offsets for timestamps")
        return {tp: (found[tp] if found.get(tp, -1) >= 0 else None) for tp in stamps}

    def _offsets(self, wanted: Mapping[TopicPartition, Any], what: str) -> PartitionOffsets:
        if not wanted:
            return {}
        from confluent_kafka import IsolationLevel, KafkaError, KafkaException
        from confluent_kafka import TopicPartition as KafkaPartition
        from confluent_kafka.admin import OffsetSpec

        _GONE_CODES = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
        # "No leaders found": the request's topics are not in the client's metadata (every
        # topic of the request deleted, or not known yet)
        _NO_LEADERS = KafkaError._NOENT
        level = (
            IsolationLevel.READ_COMMITTED
            if self.isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        request: dict[Any, Any] = {}
        for (topic, partition), kind in wanted.items():
            if kind == "earliest":
                spec = OffsetSpec.earliest()
            elif kind == "latest":
                spec = OffsetSpec.latest()
            else:
                spec = OffsetSpec.for_timestamp(int(kind))
            request[KafkaPartition(topic, partition)] = spec
        shown = ", ".join(describe_tp(tp) for tp in sorted(wanted)[:5])
        shown += f" and {len(wanted) - 5} more" if len(wanted) > 5 else ""
        label = f"Looking up the {what} of Kafka partitions {shown}"
        attempt = 0
        while True:
            result: PartitionOffsets = {}
            failure: BaseException | None = None
            gone: list[TopicPartition] = []
            try:
                futures = self.admin().list_offsets(
                    request, isolation_level=level, request_timeout=self.timeout
                )
                for key, future in futures.items():
                    tp = (key.topic, key.partition)
                    try:
                        result[tp] = int(future.result().offset)
                    except KafkaException as error:
                        code = error.args[0].code() if error.args else None
                        if code in _GONE_CODES or code == _NO_LEADERS:
                            gone.append(tp)
                        elif failure is None:
                            failure = error
            except KafkaException as error:
                code = error.args[0].code() if error.args else None
                if code == _NO_LEADERS:
                    gone = list(wanted)
                    result = {}
                else:
                    failure = error
            if failure is None and gone:
                # maybe deleted, maybe not yet known to the leader: ask the cluster
                self._suspect |= {tp[0] for tp in gone}
                if self._really_gone(gone):
                    return result
                failure = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            if failure is None:
                return result
            error_value = failure.args[0] if failure.args else None
            timed_out = getattr(error_value, "code", lambda: None)() == KafkaError._TIMED_OUT
            self._admin = None  # a fresh client next time: no stale leaders or epochs
            if attempt >= self.retries or timed_out or is_fatal(error_value):
                raise kafka_failure(label, failure) from None
            attempt += 1
            time.sleep(self.retry_interval)

    def _really_gone(self, tps: Collection[TopicPartition]) -> bool:
        """True when the cluster's topic listing no longer has ``tps`` (for longer than
        ``deletion_grace``)."""
        current = self.partitions(force=True)
        return all(tp not in current for tp in tps)

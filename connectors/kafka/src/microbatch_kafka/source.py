"""The ``kafka`` source: Spark's Kafka source on librdkafka.

Offsets are the next offset to read per topic partition, in Spark's JSON shape
``{"topic": {"0": 23}}``, and live in the query's checkpoint (never in a consumer group). A
batch ``(start, end]`` is read as one split per partition range (``minPartitions`` cuts large
ones), each with assign + seek, in parallel. ``confluent_kafka`` is imported only when a
reader starts talking to Kafka, never when this module is imported.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Sequence
from typing import Any

import pyarrow as pa

from microbatch import (
    Offset,
    Options,
    ReadAllAvailable,
    ReadContext,
    ReadLimit,
    ReadMaxRows,
    SchemaError,
    Source,
    SourceCapabilities,
    StreamReader,
)
from microbatch.errors import CorruptCheckpointError

from . import _arrow
from ._client_config import client_settings
from ._data_loss import CUSTOM_GROUP_ID, check_planned, offset_changed
from ._limits import TriggerDelay, rate_limit, split_ranges
from ._offsets import (
    PartitionOffsets,
    TopicPartition,
    check_batch_range,
    from_json_offset,
    offset_options,
    resolve_ending,
    to_json_offset,
)
from ._source_options import SOURCE_OPTIONS, consumer_settings, group_id, isolation_level

__all__ = ["KafkaSource", "KafkaStreamReader"]

log = logging.getLogger("microbatch.kafka")

_INITIAL_OFFSET = "initialOffset"
"""The state file holding the first start, resolved (Spark's ``sources/0/0``)."""
_TOPICS = "topics"
"""The state file holding the id of each topic read, and where a topic created again starts."""
_NO_LIMIT = 2**63 - 1
_EARLIEST_MAX_AGE = 1.0
_BACKWARDS_GRACE = 5.0
"""Seconds a partition of an unchanged topic may stay below the query's position (a restarted
broker catching up) before it counts as offsets that went backwards."""
_GRACE_POLL = 0.2
_LAST_COMMIT_WAIT = 5.0
"""Seconds ``stop()`` waits for the answer to the last commit of offsets to the group."""


class KafkaSource(Source):
    """Records of Kafka topics, with Spark's fixed schema and options.

    Exactly one of ``subscribe``, ``subscribePattern`` and ``assign`` says what is read;
    ``kafka.bootstrap.servers`` is required; every other ``kafka.*`` option goes to librdkafka.
    """

    format_name = "kafka"
    description = "records of Kafka topics"
    options = SOURCE_OPTIONS
    # "optional" only so that a schema given with .schema(...) reaches __init__, which refuses
    # it with the decoding idiom
    capabilities = SourceCapabilities(replayable=True, available_now=True, user_schema="optional")

    def __init__(
        self,
        options: Options,
        *,
        user_schema: pa.Schema | None = None,
        session: Any = None,
        streaming: bool = True,
    ) -> None:
        super().__init__(options, user_schema=user_schema, session=session, streaming=streaming)
        if user_schema is not None:
            raise SchemaError(
                "Source 'kafka' has a fixed schema (key, value, topic, partition, offset, "
                "timestamp, timestampType, and headers with includeHeaders=true) and does not "
                "accept one from .schema(...); remove the call. To read values in a schema, "
                'decode the value column: Spark\'s from_json(col("value").cast("string"), '
                'schema) is .parse_json("value", schema) in microbatch'
            )
        self.starting, self.ending = offset_options(options, streaming=streaming)
        if not streaming:
            for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if options.is_set(name):
                    log.warning("%s option ignored in batch queries", name)
        elif options.is_set("maxTriggerDelay") and options.min_offsets_per_trigger is None:
            log.warning("maxTriggerDelay option ignored without minOffsetsPerTrigger")
        if "group.id" in client_settings(options):
            log.warning(CUSTOM_GROUP_ID)
        from ._metadata import Subscription

        self.subscription = Subscription.from_options(options)

    def schema(self) -> pa.Schema:
        return _arrow.schema(bool(self.opts.include_headers))

    def describe(self) -> str:
        return f"KafkaV2[{self.subscription.describe()}]"

    def stream_reader(self, context: ReadContext) -> KafkaStreamReader:
        return KafkaStreamReader(self, context)


class KafkaStreamReader(StreamReader):
    """Offsets, planning, progress and group commits of one run of the ``kafka`` source.

    Nothing talks to Kafka before the first ``initial_offset``/``latest_offset``.
    """

    def __init__(self, source: KafkaSource, context: ReadContext) -> None:
        from ._metadata import KafkaMetadata
        from ._split_reader import KafkaSplitReader, losses_for

        opts = source.opts
        self.opts = opts
        self.source = source
        self.context = context
        self.streaming = context.streaming
        self.group_id = group_id(opts, context.query_id)
        self.settings = consumer_settings(opts, self.group_id)
        user = {key: str(value) for key, value in client_settings(opts).items()}
        # offset and topic look-ups wait at most socket.timeout.ms when it is set
        timeout = float(user.get("socket.timeout.ms", 10_000)) / 1000
        self.metadata = KafkaMetadata(
            user,
            source.subscription,
            isolation=isolation_level(opts),
            timeout=timeout,
            retries=int(opts["fetchOffset.numRetries"]),
            retry_interval=int(opts["fetchOffset.retryIntervalMs"]) / 1000,
        )
        self.loss_key = f"{self.group_id}/{uuid.uuid4().hex}"
        custom = "group.id" in client_settings(opts)
        self.loss = losses_for(
            self.loss_key, bool(opts.fail_on_data_loss), self.group_id, custom_group_id=custom
        )
        self.delay: TriggerDelay | None = None
        if self.streaming and opts.min_offsets_per_trigger is not None:
            self.delay = TriggerDelay(
                int(opts.min_offsets_per_trigger), opts.max_trigger_delay.total_seconds()
            )
        self.max_offsets: int | None = opts.max_offsets_per_trigger if self.streaming else None
        self._split_reader = KafkaSplitReader(
            settings=tuple(sorted(self.settings.items())),
            include_headers=bool(opts.include_headers),
            fail_on_data_loss=bool(opts.fail_on_data_loss),
            poll_timeout_ms=int(opts["kafkaConsumer.pollTimeoutMs"]),
            group_id=self.group_id,
            loss_key=self.loss_key,
        )
        self._pinned: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_end: PartitionOffsets | None = None
        self._new_earliest: PartitionOffsets = {}
        self._committed: PartitionOffsets | None = None
        self._commits_sent = self._commits_done = 0  # group commits, and their answers
        self._earliest_cache: PartitionOffsets = {}
        self._backwards_since: dict[TopicPartition, float] = {}
        self._topic_ids: dict[str, str] | None = None
        self._restarts: dict[TopicPartition, tuple[int, int]] = {}
        """Partitions of topics created again: ``(old position, where to read instead)``."""
        self._watcher: Any = None
        self._committer: Any = None
        self._earliest_at = float("-inf")
        self._stopped = False

    def __repr__(self) -> str:
        return f"KafkaStreamReader({self.source.describe()})"

    # -- offsets --------------------------------------------------------------------------
    def initial_offset(self) -> Offset:
        state = self.context.state
        if state is not None:
            kept = state.read(_INITIAL_OFFSET)
            if kept is not None:
                return dict(kept)
        offset = to_json_offset(self._resolve_start())
        if state is not None and not state.create(_INITIAL_OFFSET, offset):
            kept = state.read(_INITIAL_OFFSET)  # another instance was first
            if kept is not None:
                return dict(kept)
        return dict(offset)

    def _resolve_start(self) -> PartitionOffsets:
        assigned = self.metadata.partitions(force=True)
        earliest = self.metadata.earliest(assigned)
        latest = self.metadata.latest(assigned)
        by_timestamp: dict[Any, int | None] = {}
        if self.source.starting.by_time:
            stamps = self.source.starting.timestamps_for(assigned)
            by_timestamp = self.metadata.for_timestamps(stamps)
        return self.source.starting.resolve(assigned, earliest, latest, by_timestamp)

    def default_read_limit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None or self.delay is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger or _NO_LIMIT)
        return ReadAllAvailable()

    def prepare_available_now(self) -> None:
        self._pinned = self._fetch_latest()
        if self.delay is not None:
            self.delay.disable()

    def _fetch_latest(self) -> PartitionOffsets:
        latest = self.metadata.latest(self.metadata.partitions())
        if self.metadata.suspect:  # a topic seen missing: its id again, after its offsets
            self.metadata.partitions()
        return latest

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        begin = self._offsets(start, "start")
        if not self.streaming:
            end = self._batch_end(begin)
            self._latest = end
            return start if end == begin else to_json_offset(end)
        from ._consumers import POOL

        POOL.maintain(self.settings)  # idle consumers stop fetching, then close
        self.metadata.expect(begin)
        latest = self._pinned if self._pinned is not None else self._fetch_latest()
        begin = self._check_topic_ids(begin, latest)
        latest = self._wait_steady(begin, latest)
        self._latest = latest
        end = latest
        if not isinstance(limit, ReadAllAvailable):
            if self.delay is not None and not self.delay.should_fire(begin, latest):
                self._last_end = begin
                return start
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            if max_rows is not None and max_rows < _NO_LIMIT:
                end = rate_limit(max_rows, self._with_new_partitions(begin, latest), latest)
        if end == begin:
            self._last_end = begin
            if self._pinned is None:
                self._watch(latest)
            return start
        if self._watcher is not None:
            self._watcher.disarm()
        return to_json_offset(end)

    def _watch(self, latest: PartitionOffsets) -> None:
        """Wake the query when records arrive beyond ``latest`` (it is idle there)."""
        if self._watcher is None:
            from ._watcher import Watcher

            self._watcher = Watcher(self.settings, self.context.wake)
        self._watcher.arm(latest)

    def _steady(
        self, begin: PartitionOffsets, latest: PartitionOffsets
    ) -> tuple[PartitionOffsets, set[TopicPartition]]:
        """``latest``, except that a partition whose latest offset went below the query's
        position is taken as unchanged until it stays so for ``_BACKWARDS_GRACE`` seconds: a
        restarted broker answers with a high watermark that catches up in a moment, which
        must not read as offsets that went backwards (data loss). A topic created again has
        a new id and is reported before this (:meth:`_check_topic_ids`). Also returns the
        partitions held so."""
        now = time.monotonic()
        steady = dict(latest)
        held: set[TopicPartition] = set()
        for tp, offset in latest.items():
            position = begin.get(tp)
            if position is None or offset >= position:
                self._backwards_since.pop(tp, None)
                continue
            since = self._backwards_since.setdefault(tp, now)
            if now - since < _BACKWARDS_GRACE:
                steady[tp] = position
                held.add(tp)
        return steady, held

    def _wait_steady(self, begin: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets:
        """:meth:`_steady`; while partitions are held and nothing else is to be read, wait
        and ask again, so that a run (available-now, once) never ends inside the grace and a
        partition that stays behind is reported."""
        while True:
            steady, held = self._steady(begin, latest)
            if not held or self._stopped or steady != begin:
                return steady
            time.sleep(_GRACE_POLL)
            fresh = self.metadata.latest(self.metadata.partitions())
            if self._pinned is not None:  # taken while the broker was catching up
                self._pinned = {**self._pinned, **{tp: fresh[tp] for tp in held if tp in fresh}}
                latest = {**latest, **{tp: fresh[tp] for tp in held if tp in fresh}}
            else:
                latest = fresh

    # -- topics created again -------------------------------------------------------------
    def _check_topic_ids(
        self, begin: PartitionOffsets, latest: PartitionOffsets
    ) -> PartitionOffsets:
        """``begin``, where partitions of topics created again start at their new earliest
        offset. A topic whose id differs from the one the query read is reported as
        offsets changed (``failOnDataLoss``) at once, however far the new topic has grown."""
        known = self._known_topic_ids()
        current = self.metadata.topic_ids
        changed = False
        restarts = {tp: pair for tp, pair in self._restarts.items() if begin.get(tp) == pair[0]}
        if restarts != self._restarts:
            self._restarts, changed = restarts, True
        topics = {tp[0] for tp in begin} | {tp[0] for tp in latest}
        for topic in sorted(topics):
            now = current.get(topic)
            if now is None:
                continue
            was = known.get(topic)
            if was is not None and was != now:
                moved = sorted(tp for tp in begin if tp[0] == topic)
                earliest = self.metadata.earliest(moved) if moved else {}
                for tp in moved:
                    # raises with failOnDataLoss, before the new id is kept
                    self.loss.report(offset_changed(tp, begin[tp], latest.get(tp, 0)), 0)
                for tp in moved:
                    self._restarts[tp] = (begin[tp], earliest.get(tp, 0))
                log.warning(
                    "Kafka source %s: topic %r was deleted and created again (its id changed "
                    "from %s to %s); reading it from its earliest offsets",
                    self.source.describe(),
                    topic,
                    was,
                    now,
                )
            if was != now:
                known[topic] = now
                changed = True
        if changed:
            self._save_topics(known)
        return self._with_restarts(begin)

    def _with_restarts(self, begin: PartitionOffsets) -> PartitionOffsets:
        """``begin`` with the new starts of partitions of topics created again."""
        if not self._restarts:
            return begin
        return {
            tp: (
                self._restarts[tp][1]
                if tp in self._restarts and self._restarts[tp][0] == offset
                else offset
            )
            for tp, offset in begin.items()
        }

    def _known_topic_ids(self) -> dict[str, str]:
        if self._topic_ids is None:
            self._topic_ids = {}
            state = self.context.state
            kept = state.read(_TOPICS) if state is not None else None
            if isinstance(kept, dict):
                self._topic_ids = {str(k): str(v) for k, v in kept.get("ids", {}).items()}
                for topic, parts in kept.get("restarts", {}).items():
                    for partition, pair in parts.items():
                        self._restarts[(str(topic), int(partition))] = (int(pair[0]), int(pair[1]))
        return self._topic_ids

    def _save_topics(self, ids: dict[str, str]) -> None:
        state = self.context.state
        if state is None:
            return
        restarts: dict[str, dict[str, list[int]]] = {}
        for (topic, partition), (old, new) in sorted(self._restarts.items()):
            restarts.setdefault(topic, {})[str(partition)] = [old, new]
        state.write(_TOPICS, {"ids": dict(sorted(ids.items())), "restarts": restarts})

    def _with_new_partitions(
        self, begin: PartitionOffsets, latest: PartitionOffsets
    ) -> PartitionOffsets:
        """``begin`` plus the partitions of ``latest`` it lacks, at their earliest offsets."""
        new = [tp for tp in latest if tp not in begin]
        if not new:
            return begin
        unknown = [tp for tp in new if tp not in self._new_earliest]
        if unknown:
            self._new_earliest.update(self.metadata.earliest(unknown))
        full = dict(begin)
        for tp in new:
            full[tp] = self._new_earliest.get(tp, 0)
        return full

    def _batch_end(self, begin: PartitionOffsets) -> PartitionOffsets:
        self.metadata.expect(begin)
        assigned = self.metadata.partitions(force=True)
        latest = self.metadata.latest(assigned)
        end = resolve_ending(self.source.ending, assigned, latest)
        check_batch_range(begin, end)
        return end

    def report_latest_offset(self) -> Offset | None:
        return None if self._latest is None else to_json_offset(self._latest)

    def _offsets(self, offset: Offset, what: str) -> PartitionOffsets:
        try:
            return from_json_offset(offset)
        except ValueError as error:
            raise CorruptCheckpointError(
                f"The Kafka source got the {what} offset {offset!r}, which is not a Kafka "
                f'offset ({error}); Kafka offsets look like {{"topic": {{"0": 23}}}}. The '
                "checkpoint belongs to another source."
            ) from None

    # -- planning -------------------------------------------------------------------------
    def partitions(self, start: Offset, end: Offset) -> Sequence[Any]:
        from ._split_reader import KafkaSplit

        begin = self._offsets(start, "start")
        stop = self._offsets(end, "end")
        self._last_end = stop
        if begin == stop:
            return []
        if self.streaming:
            self._known_topic_ids()  # a batch replayed after a restart: its new starts
            begin = self._with_restarts(begin)
        starts = check_planned(begin, stop, self._earliest(stop), self.loss)
        ranges = [(tp, starts[tp], stop[tp]) for tp in sorted(starts) if stop[tp] > starts[tp]]
        pieces = split_ranges(ranges, self.opts.min_partitions)
        return [
            KafkaSplit(tp[0], tp[1], first, until, last=until == stop[tp])
            for tp, first, until in pieces
        ]

    def _earliest(self, partitions: Collection[TopicPartition]) -> PartitionOffsets:
        """The earliest offsets of ``partitions``, asked at most every
        ``_EARLIEST_MAX_AGE`` seconds (they only grow). Records deleted since the last look-up
        are found by the split reader instead, which fails or skips them the same way."""
        now = time.monotonic()
        cached = self._earliest_cache
        if now - self._earliest_at >= _EARLIEST_MAX_AGE or not all(
            tp in cached for tp in partitions
        ):
            cached = self.metadata.earliest(list(partitions))
            self._earliest_cache, self._earliest_at = cached, now
        return {tp: cached[tp] for tp in partitions if tp in cached}

    def split_reader(self) -> Any:
        return self._split_reader

    # -- after a batch --------------------------------------------------------------------
    def commit(self, end: Offset) -> None:
        if not self.opts.commit_offsets_to_group:
            return
        offsets = self._offsets(end, "end")
        if offsets == self._committed or not offsets:
            return
        from confluent_kafka import KafkaException, TopicPartition

        try:
            committer = self._group_committer()
            committer.poll(0)  # the outcome of the last commit (logged by _committed_cb)
            # asynchronous: a broker away must not hold the query (a synchronous commit
            # waits up to 45 s)
            committer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                asynchronous=True,
            )
            self._commits_sent += 1
            self._committed = offsets
        except (KafkaException, RuntimeError) as error:
            self._committed = None
            log.warning(
                "Kafka source %s: committing offsets %s to consumer group %s failed (the "
                "checkpoint holds them; the next commit tries again): %s",
                self.source.describe(),
                to_json_offset(offsets),
                self.group_id,
                error,
            )

    def _group_committer(self) -> Any:
        """The consumer that commits to the group (made on first use), whose commit results
        are served by its ``poll``."""
        if self._committer is None:
            from confluent_kafka import Consumer

            from ._consumers import with_logger

            settings = {**with_logger(self.settings), "on_commit": self._committed_cb}
            self._committer = Consumer(settings)
        return self._committer

    def _committed_cb(self, error: Any, partitions: Any) -> None:
        self._commits_done += 1
        failed = [tp for tp in partitions or () if tp.error is not None]
        if error is None and not failed:
            return
        self._committed = None  # the next commit sends them again
        reason = error if error is not None else failed[0].error
        log.warning(
            "Kafka source %s: committing offsets to consumer group %s failed (the checkpoint "
            "holds them; the next commit tries again): %s",
            self.source.describe(),
            self.group_id,
            reason,
        )

    def metrics(self) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        latest, end = self._latest, self._last_end
        if latest and end is not None:
            behind = [latest[tp] - end[tp] for tp in latest if tp in end]
            if behind:
                figures["minOffsetsBehindLatest"] = str(min(behind))
                figures["maxOffsetsBehindLatest"] = str(max(behind))
                figures["avgOffsetsBehindLatest"] = str(float(sum(behind)) / len(behind))
        figures.update(self.loss.metrics())
        return figures

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        from ._consumers import POOL
        from ._split_reader import forget_losses

        if self._watcher is not None:
            self._watcher.close()
        if self._committer is not None:
            committer, self._committer = self._committer, None
            try:
                # the last commit is sent asynchronously: wait a moment for its answer, so
                # that a query stopped cleanly leaves the group at its checkpoint
                deadline = time.monotonic() + _LAST_COMMIT_WAIT
                committer.poll(0)
                while self._commits_done < self._commits_sent and time.monotonic() < deadline:
                    committer.poll(0.1)
                committer.close()
            except Exception as error:  # best effort
                log.debug("closing the Kafka source's group committer failed: %s", error)
        self.metadata.close()
        POOL.close(self.settings)
        forget_losses(self.loss_key)

"""``failOnDataLoss``: offsets a query should read that Kafka no longer has.

Records aged out by retention or deleted (``delete_records``) under a range not read yet, a
deleted topic or partition, a partition whose offsets went backwards (a topic deleted and
created again): with ``failOnDataLoss=true`` (the default) the batch fails with a
:class:`~microbatch.SourceError` in Spark's words (the ``KAFKA_DATA_LOSS`` text, then the
reason naming the topic-partition and the offsets); with ``false`` a warning is logged, the
query goes on with what exists, and the progress metrics count the events (``dataLoss``) and
the offsets skipped (``offsetOutOfRange``).

:func:`check_planned` applies the checks when a batch is planned, on the query's thread, so
that the outcome does not depend on which process reads a split.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from microbatch import SourceError

from ._offsets import PartitionOffsets, TopicPartition, describe_tp, describe_tps

__all__ = [
    "DATA_LOSS",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE",
    "DataLoss",
    "added_partition_not_zero",
    "check_planned",
    "deleted_partitions",
    "initial_offsets_missing",
    "offset_changed",
    "records_missing",
]

DATA_LOSS = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    "source option failOnDataLoss to false. Reason:"
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".'
)
CUSTOM_GROUP_ID = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set "
    "this option. This option is unsafe to use since multiple concurrent queries or sources "
    "using the same group id will interfere with each other as they are part of the same "
    "consumer group. Restarted queries may also suffer interference from the previous run "
    "having the same group id. The user should have only one query per group id, and/or set "
    "the option 'kafka.session.timeout.ms' to be very small so that the Kafka consumers from "
    "the previous query are marked dead by the Kafka group coordinator before the restarted "
    "query starts running."
)


def initial_offsets_missing(tps: Iterable[TopicPartition]) -> str:
    """A new partition whose earliest offset cannot be fetched."""
    return (
        f"Cannot find initial offsets for partitions {describe_tps(tps)}. "
        "They may have been deleted."
    )


def added_partition_not_zero(tp: TopicPartition, offset: int) -> str:
    """A new partition whose first offset is not 0: its first records are gone."""
    return f"Added partition {describe_tp(tp)} starts from {offset} instead of 0."


def deleted_partitions(tps: Iterable[TopicPartition], *, custom_group_id: bool = False) -> str:
    """Partitions read so far that exist no more (``custom_group_id``: ``kafka.group.id`` is
    set, and Spark then adds its warning about shared groups)."""
    text = f"Partitions {describe_tps(tps)} have been deleted."
    return f"{text} {CUSTOM_GROUP_ID}" if custom_group_id else text


def offset_changed(tp: TopicPartition, previous: int, new: int) -> str:
    """A partition whose latest offset is below where the query is (it went backwards)."""
    return (
        f"Partition {describe_tp(tp)} offset was changed from {previous} to {new}. This could "
        "either be a user error that the start offset is set too high and this is the first "
        "batch, or the kafka topic-partition is broken, and some data may have been missed."
    )


def records_missing(start: int, end: int, tp: TopicPartition, group_id: str) -> str:
    """Records of ``[start, end)`` that are not in Kafka any more."""
    return (
        f"Could not read records in offset [{start}, {end}) for topic partition "
        f"{describe_tp(tp)} with consumer group {group_id}."
    )


class DataLoss:
    """Reports lost data as ``failOnDataLoss`` says, and counts it.

    ``fail``: :meth:`report` raises :class:`~microbatch.SourceError`. Otherwise it logs a
    warning on ``logger`` and counts; :meth:`metrics` gives the counts as strings for the
    source's progress metrics. ``group_id`` is the consumer group named in the texts;
    ``custom_group_id`` says that the user set ``kafka.group.id``. Thread-safe.
    """

    def __init__(
        self,
        fail: bool,
        group_id: str,
        *,
        logger: logging.Logger,
        custom_group_id: bool = False,
    ) -> None:
        self.fail = fail
        self.group_id = group_id
        self.custom_group_id = custom_group_id
        self._logger = logger
        self._lock = threading.Lock()
        self._events = 0
        self._offsets = 0

    def report(self, reason: str, lost_offsets: int) -> None:
        """One data loss event, ``lost_offsets`` offsets of it skipped (0 when unknown)."""
        if self.fail:
            raise SourceError(f"{DATA_LOSS} {reason}")
        self._logger.warning("%s %s", reason, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)
        with self._lock:
            self._events += 1
            self._offsets += max(lost_offsets, 0)

    @property
    def events(self) -> int:
        """Data loss events reported (and skipped) so far."""
        return self._events

    @property
    def offsets_skipped(self) -> int:
        """Offsets skipped so far because of data loss."""
        return self._offsets

    def metrics(self) -> dict[str, str]:
        """``{"dataLoss": <events>, "offsetOutOfRange": <offsets skipped>}`` as Spark names them."""
        with self._lock:
            return {"dataLoss": str(self._events), "offsetOutOfRange": str(self._offsets)}


def check_planned(
    start: PartitionOffsets,
    latest: PartitionOffsets,
    earliest: PartitionOffsets,
    loss: DataLoss,
) -> PartitionOffsets:
    """Spark's checks of a planned batch; the offsets to read from, per partition.

    ``start`` is where the batch starts (the previous batch's end), ``latest`` where it ends
    (the partitions that exist now), ``earliest`` the earliest offset Kafka has for each of
    them (a partition missing there could not be looked up). In Spark's order:

    - a partition new since ``start``: not in ``earliest`` → ``initial_offsets_missing``, left
      out; earliest not 0 → ``added_partition_not_zero`` (those offsets count as skipped); read
      from its earliest offset;
    - partitions of ``start`` gone from ``latest`` → ``deleted_partitions``, left out;
    - ``latest < start`` → ``offset_changed``; the batch reads nothing there and the query goes
      on from ``latest``;
    - ``start < earliest`` (records aged out or deleted under the range) →
      ``records_missing`` for ``[start, min(earliest, latest))``, that many offsets skipped;
      read from the earliest offset (nothing when the whole range is gone).

    Each finding goes to ``loss.report``, which raises when ``failOnDataLoss`` is true. The
    result maps each partition of ``latest`` that can be read to its start, never beyond its
    end in ``latest``.
    """
    new = sorted(set(latest) - set(start))
    missing = [tp for tp in new if tp not in earliest]
    if missing:
        loss.report(initial_offsets_missing(missing), 0)
    starts: PartitionOffsets = {}
    for tp in new:
        if tp in earliest:
            if earliest[tp] != 0:
                loss.report(added_partition_not_zero(tp, earliest[tp]), earliest[tp])
            starts[tp] = earliest[tp]
    gone = sorted(set(start) - set(latest))
    if gone:
        loss.report(deleted_partitions(gone, custom_group_id=loss.custom_group_id), 0)
    for tp in sorted(set(start) & set(latest)):
        begin, end = start[tp], latest[tp]
        if end < begin:
            loss.report(offset_changed(tp, begin, end), 0)
            starts[tp] = end
            continue
        first = earliest.get(tp)
        if first is not None and begin < first:
            until = min(first, end)
            if until > begin:
                loss.report(records_missing(begin, until, tp, loss.group_id), until - begin)
            begin = until
        starts[tp] = begin
    return dict(sorted(starts.items()))

"""How much a batch reads, and in how many splits: Spark's arithmetic, exactly.

- :func:`rate_limit`: ``maxOffsetsPerTrigger`` shared across partitions in proportion to their
  backlog, in floating point as Spark computes it (``limit * (size / total)``, rounded down,
  except that a share below one is rounded up so that no partition starves). A batch can
  therefore read slightly more than the limit: sizes 1, 1, 1000 with a limit of 10 read
  1 + 1 + 9 = 11 offsets.
- :class:`TriggerDelay`: ``minOffsetsPerTrigger`` with ``maxTriggerDelay``: no batch while
  fewer new offsets than the minimum are there, unless the delay has passed since the last batch.
- :func:`split_ranges`: ``minPartitions``: large ranges cut into several splits.

Offsets here count offsets, not records: transaction markers and compacted records take
offsets too, so a batch may hold fewer rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from ._offsets import PartitionOffsets, TopicPartition

__all__ = ["Range", "TriggerDelay", "rate_limit", "round_half_up", "split_ranges"]

Range = tuple[TopicPartition, int, int]


def rate_limit(limit: int, start: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets:
    """The end offsets of a batch reading at most about ``limit`` offsets from ``start``.

    ``start`` holds every partition of ``latest`` (a new partition at its earliest offset).
    Each partition with new data gets ``limit * (size / total)`` offsets (a double, as in
    Spark), floored, or rounded up to 1 when below 1, and never beyond its latest offset.
    Partitions without new data (or unknown in ``start``) end at their latest offset; when
    nothing is new at all the batch ends at ``latest``.
    """
    sizes = {
        tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0
    }
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    ends: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            ends[tp] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        ends[tp] = min(end, start[tp] + share)
    return ends


class TriggerDelay:
    """``minOffsetsPerTrigger`` / ``maxTriggerDelay``: whether a trigger runs a batch now.

    As Spark's ``delayBatch``: a trigger fires when ``max_delay_seconds`` have passed since the
    last one that fired (the first check of a run always fires), or when the new offsets
    (``latest[tp] - start[tp]`` summed, a partition missing from ``start`` counting from 0)
    reach ``min_offsets``. Otherwise the batch waits. ``clock`` returns seconds (a fake one in
    tests). Used from the query's thread only.
    """

    def __init__(
        self,
        min_offsets: int,
        max_delay_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_offsets = min_offsets
        self.max_delay_seconds = max_delay_seconds
        self._clock = clock
        self._last_fired: float | None = None
        self._disabled = False

    @property
    def disabled(self) -> bool:
        """True after :meth:`disable`."""
        return self._disabled

    def should_fire(self, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """True when a batch from ``start`` to ``latest`` runs now; a fired trigger is recorded
        as the start of the next delay."""
        if self._disabled:
            return True
        now = self._clock()
        if self._last_fired is None or now - self._last_fired >= self.max_delay_seconds:
            self._last_fired = now
            return True
        new = sum(end - start.get(tp, 0) for tp, end in latest.items())
        if new < self.min_offsets:
            return False
        self._last_fired = now
        return True

    def disable(self) -> None:
        """Never delay again: an available-now run must not stop with data left (its run ends
        at the first trigger without a batch)."""
        self._disabled = True


def round_half_up(value: float) -> int:
    """Java's ``Math.round`` of a non-negative double: the nearest integer, halves up
    (Python's ``round`` rounds halves to even)."""
    floor = math.floor(value)
    return floor + 1 if value - floor >= 0.5 else floor


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(round_half_up(size / total * min_parts), 1)


def split_ranges(ranges: Sequence[Range], min_partitions: int | None) -> list[Range]:
    """The splits of a batch: ``(tp, start, end)`` ranges, empty ones dropped.

    Without ``min_partitions``, or with at least that many non-empty ranges, one split per
    range. Otherwise Spark's ``KafkaOffsetRangeCalculator``: ranges whose share of
    ``min_partitions`` rounds to one stay whole; each other range is cut into
    ``round(size / split_total * (min_partitions - whole))`` pieces (halves up) of equal size,
    the last piece taking the remainder. The count is approximate, as in Spark.
    """
    kept = [r for r in ranges if r[2] - r[1] > 0]
    if min_partitions is None or len(kept) >= min_partitions:
        return list(kept)
    total = sum(end - begin for _, begin, end in kept)
    whole = {r[0] for r in kept if _part_count(r[2] - r[1], total, min_partitions) == 1}
    split_total = total - sum(r[2] - r[1] for r in kept if r[0] in whole)
    split_min = max(min_partitions - len(whole), 1)
    out: list[Range] = []
    for tp, begin, end in kept:
        size = end - begin
        parts = 1 if tp in whole else _part_count(size, split_total, split_min)
        remaining, at = size, begin
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            until = min(at + this, end)
            if until > at:
                out.append((tp, at, until))
            at = until
    return out

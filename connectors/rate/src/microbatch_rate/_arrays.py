"""Building blocks shared by the rate sources: the schema, the ``numPartitions`` option (and a
base class that declares both) and vectorised strided value ranges."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microbatch import Option, Source, Split
from microbatch.errors import SourceError

__all__ = [
    "CHUNK_ROWS",
    "INT64_MAX",
    "NUM_PARTITIONS",
    "SCHEMA",
    "TIMESTAMP",
    "RateSourceBase",
    "StridedSplit",
    "foreign_split",
    "int_field",
    "partition_count",
    "resolve_partitions",
    "value_chunks",
]

TIMESTAMP = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([pa.field("timestamp", TIMESTAMP), pa.field("value", pa.int64())])
CHUNK_ROWS = 65_536
"""The largest record batch ``read`` yields."""
INT64_MAX = 2**63 - 1

NUM_PARTITIONS = Option(
    name="numPartitions",
    type="int",
    minimum=1,
    doc="Number of splits each batch is read in (default: the number of CPUs).",
)


def resolve_partitions(value: int | None) -> int:
    """The ``numPartitions`` option, or the number of CPUs when it is not set."""
    return value if value is not None else max(1, os.cpu_count() or 1)


class RateSourceBase(Source):
    """What both rate sources share: the schema ``(timestamp, value)`` and ``numPartitions``
    (declared by each source's ``options`` with :data:`NUM_PARTITIONS`)."""

    def schema(self) -> pa.Schema:
        return SCHEMA

    @property
    def num_partitions(self) -> int:
        """The ``numPartitions`` option, or the number of CPUs when it is not set."""
        return resolve_partitions(self.opts.num_partitions)


@functools.cache
def _iota() -> pa.Int64Array:
    return pa.array(range(CHUNK_ROWS), pa.int64())


def partition_count(range_start: int, range_end: int, partition: int, partitions: int) -> int:
    """How many of the values ``range_start + partition + k * partitions`` lie below
    ``range_end`` (Spark's assignment of values to partitions)."""
    first = range_start + partition
    return max(0, -(-(range_end - first) // partitions))


@dataclass(frozen=True)
class StridedSplit(Split):
    """Partition ``partition`` of ``partitions`` of the values ``[range_start, range_end)``:
    the values ``range_start + partition + k * partitions`` (Spark's assignment)."""

    partition: int
    partitions: int
    range_start: int
    range_end: int

    def count(self) -> int:
        """How many values this split holds."""
        return partition_count(self.range_start, self.range_end, self.partition, self.partitions)

    def values(self) -> Iterator[pa.Int64Array]:
        """This split's values, in arrays of at most ``CHUNK_ROWS``."""
        return value_chunks(self.range_start + self.partition, self.count(), self.partitions)


def value_chunks(first: int, count: int, step: int) -> Iterator[pa.Int64Array]:
    """``first, first + step, ...`` (``count`` values) as arrays of at most ``CHUNK_ROWS``."""
    iota = _iota()
    for offset in range(0, count, CHUNK_ROWS):
        size = min(CHUNK_ROWS, count - offset)
        positions = iota if size == CHUNK_ROWS else iota.slice(0, size)
        if step != 1:
            positions = pc.multiply(positions, pa.scalar(step, pa.int64()))
        # typed scalars: pyarrow converts a bare Python int by trying an import of
        # dateutil on every call, which costs ~0.3 ms when dateutil is not installed
        yield pc.add(positions, pa.scalar(first + offset * step, pa.int64()))


def int_field(value: Any, name: str, *, what: str, expected: str) -> int:
    """Integer ``name`` of an offset or split of this source; a :class:`SourceError` naming
    ``what`` it is and the ``expected`` shape when it is missing or of another type."""
    try:
        field = value[name]
    except (TypeError, KeyError, IndexError):
        field = None
    if not isinstance(field, int) or isinstance(field, bool) or field < 0:
        hint = (
            " Was the checkpoint written by a query with another source?"
            if what == "offset"
            else ""
        )
        raise SourceError(
            f"{what} {value!r} was not made by this source: {name!r} must be a non-negative "
            f"integer; expected {expected}.{hint}"
        )
    return field


def foreign_split(split: Any, source: str, expected: type) -> SourceError:
    """The error for a split that ``source`` did not plan: it names the fields one has."""
    fields = ", ".join(getattr(expected, "__dataclass_fields__", {}))
    return SourceError(
        f"split {split!r} was not planned by the {source} source: expected a "
        f"{expected.__name__}({fields})"
    )

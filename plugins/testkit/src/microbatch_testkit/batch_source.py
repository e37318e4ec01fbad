"""Checks for a source's batch reads (``session.read``, ``streaming=False``).

:class:`BatchSourceContract` builds the connector object with ``streaming=False`` and reads
``partitions(initial_offset(), latest_offset(...))`` as a batch query does. It keeps the
option, registration and pickling checks of :class:`~microbatch_testkit.SourceContract` and
replaces the streaming ones (offsets moving, restarts, the engine query) with:

- the splits of a batch read pickle and, read in another process (``spawn``) by a pickled
  copy of ``split_reader()``, give the same rows as in-process (skipped with
  ``in_process_only``);
- the union of the splits equals one unpartitioned read (``unpartitioned_options()``);
- a second read from a new instance gives the same rows;
- every batch matches ``schema()``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, StreamReader

from ._base import check_picklable
from ._compare import rows_difference, show
from ._processes import read_splits_elsewhere
from .source import SourceContract

_KEPT = {"test_capabilities_are_declared"}


class BatchSourceContract(SourceContract):
    """Checks that a source's batch read keeps the contract ``session.read`` relies on.

    Hooks: ``make_options()`` (a partitioned read, more than one split),
    ``unpartitioned_options()`` (the same data in one split), ``bad_options()``,
    ``in_process_only``, ``make_schema()``, ``make_session()``.
    """

    __test__ = False
    engine_check = False

    def unpartitioned_options(self) -> dict[str, Any]:
        """Options reading the same rows as :meth:`make_options` without partitioning."""
        raise NotImplementedError(f"{type(self).__name__} must override unpartitioned_options()")

    def build(self, **kwargs: Any) -> StreamReader:
        kwargs.setdefault("streaming", False)
        return super().build(**kwargs)

    def batch_read(self, options: dict[str, Any] | None = None) -> tuple[StreamReader, list[Any]]:
        """A new batch reader and the splits of its whole read."""
        reader = self.build(options=options)
        start = reader.initial_offset()
        end = reader.latest_offset(start, ReadAllAvailable())
        return reader, self.splits_of(reader, start, end)

    def _read_all(self, options: dict[str, Any] | None = None) -> pa.Table:
        reader, splits = self.batch_read(options)
        schema = self.built_of(reader).schema
        batches: list[pa.RecordBatch] = []
        for index, split in enumerate(splits):
            batches += self.read_split(reader, split, f"split {index} of the batch read")
        return pa.Table.from_batches(batches, schema=schema)

    def test_batch_splits_pickle_and_read_elsewhere(self) -> None:
        reader, splits = self.batch_read()
        assert len(splits) > 1, f"make_options() gave {len(splits)} split(s); make it several"
        for index, split in enumerate(splits):
            check_picklable(split, f"split {index} of the batch read")
        check_picklable(self.split_reader_of(reader), "split_reader()")
        if self.in_process_only:
            pytest.skip(f"in_process_only: {self.in_process_only}")
        schema = self.built_of(reader).schema
        elsewhere = read_splits_elsewhere(self.split_reader_of(reader), splits, "the batch read")
        for index, (split, batches) in enumerate(zip(splits, elsewhere, strict=True)):
            here = pa.Table.from_batches(
                self.read_split(reader, split, f"split {index}"), schema=schema
            )
            there = pa.Table.from_batches(batches, schema=schema)
            difference = rows_difference(here, there, ordered=True)
            assert not difference, (
                f"split {index} ({show(split)}) read in another process differs:\n{difference}"
            )

    def test_splits_together_equal_an_unpartitioned_read(self) -> None:
        partitioned = self._read_all()
        whole = self._read_all(self.unpartitioned_options())
        assert whole.num_rows, "the unpartitioned read returned no rows: give the test data"
        difference = rows_difference(whole, partitioned, ordered=False)
        assert not difference, f"the splits together differ from one read:\n{difference}"

    def test_second_read_is_identical(self) -> None:
        first = self._read_all()
        second = self._read_all()
        difference = rows_difference(first, second, ordered=False)
        assert not difference, f"a second batch read differs from the first:\n{difference}"


for _name in [name for name in vars(SourceContract) if name.startswith("test_")]:
    if _name not in _KEPT:
        setattr(BatchSourceContract, _name, None)

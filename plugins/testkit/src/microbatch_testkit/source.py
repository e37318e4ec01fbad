"""The source conformance suite: subclass :class:`SourceContract` in your tests.

::

    from microbatch_testkit import SourceContract

    class TestCounterContract(SourceContract):
        source_class = CounterSource
        generates_data_on_its_own = True

        def make_options(self):
            return {"rowsPerBatch": 5}

The checks that apply are chosen from what the source class declares (``replayable``); each
failure names the offsets and the batch it was looking at.
"""

from __future__ import annotations

import json
import pickle
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from microbatch import (
    Offset,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    Source,
    SourceContext,
    StateStore,
)

from ._base import ContractBase
from ._compare import describe_schema_difference, rows_difference, show, show_batch

__all__ = ["SourceContract"]

_MAX_AVAILABLE_NOW_BATCHES = 1000


class SourceContract(ContractBase):
    """Checks that a :class:`~microbatch.Source` keeps the contract the engine relies on.

    Set :attr:`source_class`, implement :meth:`make_options`, and override the other hooks
    as your source needs. ``self.tmp_path`` and ``self.state`` are fresh for every test.
    """

    __test__ = False

    source_class: ClassVar[type[Source]]
    """The source under test."""
    generates_data_on_its_own: ClassVar[bool] = False
    """True for sources whose data grows without :meth:`produce` (a counter, a clock)."""

    # -- hooks ----------------------------------------------------------------------------
    def make_schema(self) -> pa.Schema | None:
        """The user schema passed in the context (for sources that take one); default None."""
        return None

    def produce(self, source: Source) -> None:
        """Make new data appear for ``source`` (write a file, add rows to a stream).

        Called between offset look-ups; after it returns, ``latest_offset`` must see the new
        data. Produce more rows than the default read limit admits so that the limit check
        bites. The default does nothing, which suits sources that generate data themselves
        (those may still use it, to advance a test clock for example).
        """

    def count_units(self, splits: list[Any], limit: ReadLimit) -> int:
        """How much of ``limit``'s unit (files, bytes) ``splits`` cover.

        Needed only when ``default_read_limit()`` is ``ReadMaxFiles`` or ``ReadMaxBytes``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override count_units(splits, limit): the source's "
            f"default read limit is {limit!r}, which the test kit cannot measure by itself"
        )

    # -- helpers --------------------------------------------------------------------------
    def _connector_class(self) -> type[Source]:
        cls = getattr(self, "source_class", None)
        if cls is None:
            pytest.fail(f"{type(self).__name__} must set source_class")
        return cls

    def _build_any(self, options: dict[str, Any]) -> Any:
        return self.build(options=options)

    def build(
        self,
        *,
        state: StateStore | None = None,
        options: dict[str, Any] | None = None,
        streaming: bool = True,
    ) -> Source:
        """A new source instance, as the engine makes one.

        ``options`` default to :meth:`make_options`; ``state`` defaults to ``self.state``.
        The instance is stopped when the test ends.
        """
        cls = self._connector_class()
        raw = self.make_options() if options is None else options
        parsed = cls.options.parse(raw, connector=cls.format_name)
        context = SourceContext(
            options=parsed,
            schema=self.make_schema(),
            state=self.state if state is None else state,
            streaming=streaming,
            session=self.session,
        )
        source = cls(context)
        self.built.append(source)
        return source

    def read_range(self, source: Source, start: Offset, end: Offset) -> pa.Table:
        """Everything ``source`` yields for ``(start, end]``, checked against its schema."""
        schema = source.schema
        splits = source.plan(start, end)
        assert isinstance(splits, list), (
            f"plan({show(start)}, {show(end)}) returned {type(splits).__name__}, not a list"
        )
        batches: list[pa.RecordBatch] = []
        for index, split in enumerate(splits):
            for number, batch in enumerate(source.read(split)):
                where = (
                    f"read(split {index} of plan({show(start)}, {show(end)})) yielded "
                    f"batch {number}"
                )
                assert isinstance(batch, pa.RecordBatch), (
                    f"{where} of type {type(batch).__name__}, not pyarrow.RecordBatch"
                )
                difference = describe_schema_difference(schema, batch.schema)
                assert not difference, (
                    f"{where} whose schema differs from source.schema:\n{difference}\n"
                    f"  batch: {show_batch(batch)}"
                )
                batches.append(batch)
        return pa.Table.from_batches(batches, schema=schema)

    def _next_end(self, source: Source, start: Offset, limit: ReadLimit) -> Offset:
        """Produce data and return the end of the next batch, failing when nothing appeared."""
        self.produce(source)
        end = source.latest_offset(start, limit)
        if end == start:
            pytest.fail(
                f"latest_offset({show(start)}, {limit!r}) returned the start offset after "
                "produce(): make produce() add data (or set generates_data_on_its_own = True)"
            )
        return end

    # -- tests ----------------------------------------------------------------------------
    def test_offsets_are_json(self) -> None:
        source = self.build()
        start = source.initial_offset()
        _assert_json_offset(start, "initial_offset()")
        limit = source.default_read_limit()
        end = self._next_end(source, start, limit)
        _assert_json_offset(end, f"latest_offset({show(start)}, {limit!r})")
        everything = source.latest_offset(start, ReadAllAvailable())
        _assert_json_offset(everything, f"latest_offset({show(start)}, ReadAllAvailable())")

    def test_latest_offset_is_stable(self) -> None:
        source = self.build()
        start = source.initial_offset()
        limit = source.default_read_limit()
        end = self._next_end(source, start, limit)
        if self.generates_data_on_its_own:
            start, end = end, source.latest_offset(end, limit)
        again = source.latest_offset(start, limit)
        assert again == end, (
            f"latest_offset({show(start)}, {limit!r}) changed between two calls with no new "
            f"data: first {show(end)}, then {show(again)}"
        )

    def test_latest_offset_respects_default_read_limit(self) -> None:
        source = self.build()
        limit = source.default_read_limit()
        if isinstance(limit, ReadAllAvailable):
            pytest.skip("default_read_limit() is ReadAllAvailable: nothing to respect")
        start = source.initial_offset()
        end = self._next_end(source, start, limit)
        if isinstance(limit, ReadMaxRows):
            rows = self.read_range(source, start, end).num_rows
            assert rows <= limit.max_rows, (
                f"latest_offset({show(start)}, {limit!r}) returned {show(end)}, but that range "
                f"holds {rows} rows"
            )
        elif isinstance(limit, ReadMaxFiles | ReadMaxBytes):
            allowed = limit.max_files if isinstance(limit, ReadMaxFiles) else limit.max_bytes
            units = self.count_units(source.plan(start, end), limit)
            assert units <= allowed, (
                f"latest_offset({show(start)}, {limit!r}) returned {show(end)}, but that range "
                f"covers {units} units"
            )
        else:
            pytest.fail(f"default_read_limit() returned an unknown limit {limit!r}")

    def test_latest_offset_returns_start_when_nothing_is_new(self) -> None:
        if self.generates_data_on_its_own:
            pytest.skip("the source generates data on its own: something is always new")
        source = self.build()
        start = source.initial_offset()
        drained = source.latest_offset(start, ReadAllAvailable())
        for limit in (ReadAllAvailable(), source.default_read_limit()):
            again = source.latest_offset(drained, limit)
            assert again == drained, (
                f"latest_offset({show(drained)}, {limit!r}) returned {show(again)} with no new "
                "data; it must return its start offset"
            )
        end = self._next_end(source, drained, ReadAllAvailable())
        again = source.latest_offset(end, ReadAllAvailable())
        assert again == end, (
            f"after reading up to {show(end)}, latest_offset({show(end)}, ReadAllAvailable()) "
            f"returned {show(again)} with no new data"
        )

    def test_empty_range_yields_no_rows(self) -> None:
        source = self.build()
        start = source.initial_offset()
        end = self._next_end(source, start, source.default_read_limit())
        for offset in (start, end):
            table = self.read_range(source, offset, offset)
            assert table.num_rows == 0, (
                f"plan({show(offset)}, {show(offset)}) of an empty range yielded "
                f"{show_batch(table)}"
            )

    def test_read_yields_the_declared_schema(self) -> None:
        source = self.build()
        schema = source.schema
        assert isinstance(schema, pa.Schema), f"source.schema is {schema!r}, not a pyarrow.Schema"
        start = source.initial_offset()
        end = self._next_end(source, start, source.default_read_limit())
        table = self.read_range(source, start, end)
        assert table.num_rows > 0, (
            f"latest_offset moved from {show(start)} to {show(end)}, but reading that range "
            "yielded no rows"
        )

    def test_splits_are_picklable(self) -> None:
        source = self.build()
        start = source.initial_offset()
        end = self._next_end(source, start, source.default_read_limit())
        for index, split in enumerate(source.plan(start, end)):
            try:
                pickle.dumps(split)
            except Exception as error:
                pytest.fail(
                    f"split {index} of plan({show(start)}, {show(end)}) cannot be pickled "
                    f"({type(error).__name__}: {error}): {split!r}"
                )

    def test_replay_reads_the_same_rows(self) -> None:
        cls = self._connector_class()
        if not cls.replayable:
            pytest.skip(f"{cls.__qualname__} declares replayable = False")
        first = self.build()
        start = first.initial_offset()
        end = self._next_end(first, start, first.default_read_limit())
        original = self.read_range(first, start, end)
        where = f"range ({show(start)}, {show(end)})"
        again = self.read_range(first, start, end)
        difference = rows_difference(original, again, ordered=True, context=f"re-reading {where}")
        assert not difference, difference
        first.stop()
        second = self.build()
        replayed = self.read_range(second, start, end)
        difference = rows_difference(
            original, replayed, ordered=True, context=f"a new instance reading {where}"
        )
        assert not difference, difference

    def test_available_now_reaches_a_pinned_target(self) -> None:
        cls = self._connector_class()
        if not cls.supports_available_now:
            pytest.skip(f"{cls.__qualname__} declares supports_available_now = False")
        source = self.build()
        start = source.initial_offset()
        self.produce(source)
        source.prepare_available_now()
        limit = source.default_read_limit()
        offset, batches = start, 0
        while True:
            end = source.latest_offset(offset, limit)
            if end == offset:
                break
            batches += 1
            assert batches <= _MAX_AVAILABLE_NOW_BATCHES, (
                f"after prepare_available_now(), latest_offset still moves after "
                f"{_MAX_AVAILABLE_NOW_BATCHES} batches (now at {show(end)}): the target must be "
                "pinned"
            )
            self.read_range(source, offset, end)
            offset = end
        self.produce(source)
        after = source.latest_offset(offset, limit)
        assert after == offset, (
            f"the available-now run reached {show(offset)}, then data produced afterwards moved "
            f"latest_offset to {show(after)}: the target pinned by prepare_available_now() "
            "must not move"
        )

    def test_restart_resumes_from_state(self) -> None:
        first = self.build()
        start = first.initial_offset()
        first.stop()
        second = self.build()
        resumed = second.initial_offset()
        assert resumed == start, (
            f"a second instance over the same state store starts at {show(resumed)}, "
            f"the first started at {show(start)}"
        )

    def test_stop_is_idempotent(self) -> None:
        unused = self.build()
        unused.stop()
        unused.stop()
        source = self.build()
        start = source.initial_offset()
        self._next_end(source, start, source.default_read_limit())
        source.stop()
        source.stop()


def _assert_json_offset(offset: Any, what: str) -> None:
    assert isinstance(offset, dict), f"{what} returned {offset!r}, not a dict"
    problem = ""
    try:
        text = json.dumps(offset, allow_nan=False)
    except (TypeError, ValueError) as error:
        problem = str(error)
    if problem:
        pytest.fail(f"{what} returned an offset that is not JSON ({problem}): {offset!r}")
    restored = json.loads(text)
    assert restored == offset, (
        f"{what} returned an offset that changes through JSON: {offset!r} became {restored!r}"
    )

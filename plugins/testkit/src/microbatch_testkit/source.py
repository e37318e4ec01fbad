"""The source conformance suite: subclass :class:`SourceContract` in your tests.

::

    from microbatch_testkit import SourceContract

    class TestCounterContract(SourceContract):
        source_class = CounterSource
        generates_data_on_its_own = True

        def make_options(self):
            return {"rowsPerBatch": 5}

Hooks and what each receives (contract 2):

- ``make_options() -> dict``: raw options, as a user passes them to ``.option()``; called for
  every instance a test builds (return options naming the same data each time).
- ``make_schema() -> pyarrow.Schema | None``: the user schema (``.schema(...)``), passed to the
  connector object as ``user_schema``; default ``None``.
- ``make_session()``: the ``session`` given to the connector object (and in ``ReadContext``).
- ``bad_options() -> [(raw options, expected message part)]``: options the source must refuse.
- ``produce(reader)``: make new data appear. ``reader`` is the :class:`~microbatch.StreamReader`
  that is asked for ``latest_offset`` next (one :meth:`SourceContract.build` returned; in the
  engine check, the running query's own); most sources ignore it (write a file, add rows to a
  stream, move a test clock).
- ``count_units(splits, limit) -> int``: for ``ReadMaxFiles``/``ReadMaxBytes`` limits, how
  many files or bytes the splits of ``reader.partitions(start, end)`` cover.

:meth:`SourceContract.build` makes the source as the builders do: options parsed,
``source_class(options, user_schema=..., session=..., streaming=...)``, ``schema()`` called
once, then ``stream_reader(ReadContext(...))``; it returns the stream reader.
:meth:`SourceContract.read_range` reads ``(start, end]`` through ``partitions()`` and
``split_reader().read(split)``.

Attributes: ``source_class``, ``generates_data_on_its_own``, ``in_process_only`` (a reason
that skips the process check), ``engine_check``, ``engine_batches``, ``engine_timeout``.

Besides the offset, schema, limit and option checks: a replayed range reads the same rows, also
after more data arrived and from a new instance; ``(a,b]`` then ``(b,c]`` reads exactly the rows
of ``(a,c]``; a new instance over the same state has the same initial offset after data was
added (a source starting at "the current end" must keep it in its state); every split is read
in another process (``spawn``) from a pickled split reader, with the same rows; a real query
through the engine yields, batch after batch, the rows of the whole range it covered.

The checks that apply are chosen from the source's ``capabilities`` (``replayable``,
``available_now``); each failure names the offsets and the batch it was looking at.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from microbatch import (
    Offset,
    ReadAllAvailable,
    ReadContext,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    Source,
    SourceCapabilities,
    Split,
    SplitReader,
    StateStore,
    StreamReader,
)

from ._base import ContractBase, check_picklable, checked_type
from ._compare import describe_schema_difference, rows_difference, show, show_batch
from ._processes import read_splits_elsewhere
from ._source_engine import run_source_query

__all__ = ["BuiltSource", "SourceContract"]

_MAX_AVAILABLE_NOW_BATCHES = 1000


@dataclass(frozen=True)
class BuiltSource:
    """What :meth:`SourceContract.build` made: the connector object, its schema, the context
    its stream reader was given, and the reader."""

    source: Source
    schema: pa.Schema
    context: ReadContext
    reader: StreamReader


class SourceContract(ContractBase[Source, SourceCapabilities]):
    """Checks that a :class:`~microbatch.Source` keeps the contract the engine relies on.

    Set :attr:`source_class`, implement :meth:`make_options`, and override the other hooks
    as your source needs. ``self.tmp_path`` and ``self.state`` are fresh for every test.
    """

    __test__ = False
    _role = "source"
    _capabilities_class = SourceCapabilities

    source_class: ClassVar[type[Source]]
    """The source under test."""
    generates_data_on_its_own: ClassVar[bool] = False
    """True for sources whose data grows without :meth:`produce` (a counter, a clock)."""
    in_process_only: ClassVar[str] = ""
    """Why this source's splits cannot be read in another process (skips that check); empty
    for every source meant to run on a cluster."""
    engine_check: ClassVar[bool] = True
    """False skips :meth:`test_runs_through_the_engine` (say why in your test class)."""
    engine_batches: ClassVar[int] = 3
    """For sources that generate data on their own: batches the engine check waits for."""
    engine_timeout: ClassVar[float] = 30.0
    """Seconds the engine check waits for the query to catch up."""

    # -- hooks ----------------------------------------------------------------------------
    def make_schema(self) -> pa.Schema | None:
        """The user schema passed to the connector object (for sources that take one)."""
        return None

    def produce(self, reader: StreamReader) -> None:
        """Make new data appear for ``reader`` (write a file, add rows to a stream).

        Called between offset look-ups; after it returns, ``reader.latest_offset`` must see
        the new data. Produce more rows than the default read limit admits so that the limit
        check bites. The default does nothing, which suits sources that generate data
        themselves (those may still use it, to advance a test clock for example).
        """

    def count_units(self, splits: Sequence[Split], limit: ReadLimit) -> int:
        """How much of ``limit``'s unit (files, bytes) ``splits`` cover.

        Needed only when ``default_read_limit()`` is ``ReadMaxFiles`` or ``ReadMaxBytes``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override count_units(splits, limit): the source's "
            f"default read limit is {limit!r}, which the test kit cannot measure by itself"
        )

    # -- helpers --------------------------------------------------------------------------
    def _build_any(self, options: dict[str, Any]) -> Any:
        return self.build(options=options)

    def build_source(
        self, *, options: dict[str, Any] | None = None, streaming: bool = True
    ) -> tuple[Source, pa.Schema]:
        """The connector object and its schema, as ``load()`` makes them (no reader)."""
        cls = self._connector_class()
        raw = self.make_options() if options is None else options
        parsed = cls.options.parse(raw, connector=cls.format_name)
        source = cls(
            parsed, user_schema=self.make_schema(), session=self.session, streaming=streaming
        )
        schema = source.schema()
        assert isinstance(schema, pa.Schema), (
            f"{cls.__qualname__}.schema() returned {schema!r}, not a pyarrow.Schema"
        )
        return source, schema

    def build(
        self,
        *,
        state: StateStore | None = None,
        options: dict[str, Any] | None = None,
        streaming: bool = True,
    ) -> StreamReader:
        """A new stream reader, made as the engine makes one for a query run.

        ``options`` default to :meth:`make_options`; ``state`` defaults to ``self.state``.
        The reader is stopped when the test ends; :meth:`built_of` gives what it was made of.
        """
        source, schema = self.build_source(options=options, streaming=streaming)
        context = ReadContext(
            schema=schema,
            state=self.state if state is None else state,
            wake=self._wake,
            streaming=streaming,
            query_id=self.query_id if streaming else None,
            session=self.session,
        )
        reader = checked_type(source, "stream_reader", source.stream_reader(context), StreamReader)
        self._keep(reader, BuiltSource(source, schema, context, reader))
        return reader

    def built_of(self, reader: StreamReader) -> BuiltSource:
        """The connector object, schema and context ``reader`` was made from."""
        made: BuiltSource = self._made_of(reader)
        return made

    def _wake(self) -> None:
        self.wakes += 1

    def split_reader_of(self, reader: StreamReader) -> SplitReader:
        """``reader.split_reader()``, checked to be a :class:`~microbatch.SplitReader`."""
        return checked_type(reader, "split_reader", reader.split_reader(), SplitReader)

    def splits_of(self, reader: StreamReader, start: Offset, end: Offset) -> list[Split]:
        """``reader.partitions(start, end)``, checked to be a sequence of Splits."""
        splits = reader.partitions(start, end)
        where = f"partitions({show(start)}, {show(end)})"
        assert isinstance(splits, Sequence), f"{where} returned {type(splits).__name__}, not a list"
        for index, split in enumerate(splits):
            assert isinstance(split, Split), (
                f"split {index} of {where} is {split!r}, not a microbatch.Split"
            )
        return list(splits)

    def read_split(
        self, reader: StreamReader, split: Split, where: str = "read(split)"
    ) -> list[pa.RecordBatch]:
        """The record batches of one split, each checked against the source's schema."""
        schema = self.built_of(reader).schema
        batches: list[pa.RecordBatch] = []
        for number, item in enumerate(self.split_reader_of(reader).read(split)):
            what = f"{where} yielded batch {number}"
            assert isinstance(item, pa.RecordBatch), (
                f"{what} of type {type(item).__name__}, not pyarrow.RecordBatch"
            )
            difference = describe_schema_difference(schema, item.schema)
            assert not difference, (
                f"{what} whose schema differs from schema():\n{difference}\n"
                f"  batch: {show_batch(item)}"
            )
            batches.append(item)
        return batches

    def read_range(self, reader: StreamReader, start: Offset, end: Offset) -> pa.Table:
        """Everything ``reader`` yields for ``(start, end]``, checked against its schema."""
        schema = self.built_of(reader).schema
        batches: list[pa.RecordBatch] = []
        for index, split in enumerate(self.splits_of(reader, start, end)):
            where = f"read(split {index} of partitions({show(start)}, {show(end)}))"
            batches += self.read_split(reader, split, where)
        return pa.Table.from_batches(batches, schema=schema)

    def _next_end(self, reader: StreamReader, start: Offset, limit: ReadLimit) -> Offset:
        """Produce data and return the end of the next batch, failing when nothing appeared."""
        self.produce(reader)
        end = reader.latest_offset(start, limit)
        if end == start:
            pytest.fail(
                f"latest_offset({show(start)}, {limit!r}) returned the start offset after "
                "produce(): make produce() add data (or set generates_data_on_its_own = True)"
            )
        return end

    @pytest.fixture(autouse=True)
    def _microbatch_source_setup(self) -> None:
        self.wakes = 0

    # -- tests ----------------------------------------------------------------------------
    def test_capabilities_are_declared(self) -> None:
        capabilities = self._capabilities()
        assert capabilities.user_schema in ("forbidden", "optional", "required"), (
            f"capabilities.user_schema is {capabilities.user_schema!r}"
        )
        if capabilities.user_schema == "required":
            assert self.make_schema() is not None, (
                "the source requires a user schema: make_schema() must return one"
            )

    def test_offsets_are_json(self) -> None:
        reader = self.build()
        start = reader.initial_offset()
        _assert_json_offset(start, "initial_offset()")
        limit = reader.default_read_limit()
        end = self._next_end(reader, start, limit)
        _assert_json_offset(end, f"latest_offset({show(start)}, {limit!r})")
        reported = reader.report_latest_offset()
        if reported is not None:
            _assert_json_offset(reported, "report_latest_offset()")
        everything = reader.latest_offset(start, ReadAllAvailable())
        _assert_json_offset(everything, f"latest_offset({show(start)}, ReadAllAvailable())")

    def test_latest_offset_is_stable(self) -> None:
        reader = self.build()
        start = reader.initial_offset()
        limit = reader.default_read_limit()
        end = self._next_end(reader, start, limit)
        if self.generates_data_on_its_own:
            start, end = end, reader.latest_offset(end, limit)
        _assert_latest_offset(
            reader, start, limit, end, f"it returned {show(end)} the first time, with no new data"
        )

    def test_latest_offset_respects_default_read_limit(self) -> None:
        reader = self.build()
        limit = reader.default_read_limit()
        if isinstance(limit, ReadAllAvailable):
            pytest.skip("default_read_limit() is ReadAllAvailable: nothing to respect")
        start = reader.initial_offset()
        end = self._next_end(reader, start, limit)
        if isinstance(limit, ReadMaxRows):
            rows = self.read_range(reader, start, end).num_rows
            assert rows <= limit.max_rows, (
                f"latest_offset({show(start)}, {limit!r}) returned {show(end)}, but that range "
                f"holds {rows} rows"
            )
        elif isinstance(limit, ReadMaxFiles | ReadMaxBytes):
            allowed = limit.max_files if isinstance(limit, ReadMaxFiles) else limit.max_bytes
            units = self.count_units(self.splits_of(reader, start, end), limit)
            assert units <= allowed, (
                f"latest_offset({show(start)}, {limit!r}) returned {show(end)}, but that range "
                f"covers {units} units"
            )
        else:
            pytest.fail(f"default_read_limit() returned an unknown limit {limit!r}")

    def test_latest_offset_returns_start_when_nothing_is_new(self) -> None:
        if self.generates_data_on_its_own:
            pytest.skip("the source generates data on its own: something is always new")
        reader = self.build()
        start = reader.initial_offset()
        drained = reader.latest_offset(start, ReadAllAvailable())
        for limit in (ReadAllAvailable(), reader.default_read_limit()):
            _assert_latest_offset(
                reader, drained, limit, drained, "with no new data it must return its start offset"
            )
        end = self._next_end(reader, drained, ReadAllAvailable())
        _assert_latest_offset(
            reader, end, ReadAllAvailable(), end, f"after reading up to {show(end)}, no new data"
        )

    def test_empty_range_yields_no_rows(self) -> None:
        reader = self.build()
        start = reader.initial_offset()
        end = self._next_end(reader, start, reader.default_read_limit())
        for offset in (start, end):
            table = self.read_range(reader, offset, offset)
            assert table.num_rows == 0, (
                f"partitions({show(offset)}, {show(offset)}) of an empty range yielded "
                f"{show_batch(table)}"
            )

    def test_read_yields_the_declared_schema(self) -> None:
        reader = self.build()
        start = reader.initial_offset()
        end = self._next_end(reader, start, reader.default_read_limit())
        table = self.read_range(reader, start, end)
        assert table.num_rows > 0, (
            f"latest_offset moved from {show(start)} to {show(end)}, but reading that range "
            "yielded no rows"
        )

    def test_splits_and_split_reader_are_picklable(self) -> None:
        reader = self.build()
        start = reader.initial_offset()
        end = self._next_end(reader, start, reader.default_read_limit())
        for index, split in enumerate(self.splits_of(reader, start, end)):
            check_picklable(split, f"split {index} of partitions({show(start)}, {show(end)})")
        split_reader = self.split_reader_of(reader)
        check_picklable(split_reader, f"split_reader() of {type(reader).__qualname__}")

    def test_replay_reads_the_same_rows(self) -> None:
        self._require_replayable()
        first = self.build()
        start = first.initial_offset()
        end = self._next_end(first, start, first.default_read_limit())
        original = self.read_range(first, start, end)
        where = f"range ({show(start)}, {show(end)})"
        again = self.read_range(first, start, end)
        difference = rows_difference(original, again, ordered=True, context=f"re-reading {where}")
        assert not difference, difference
        self.produce(first)
        again = self.read_range(first, start, end)
        difference = rows_difference(
            original, again, ordered=True, context=f"re-reading {where} after produce() added data"
        )
        assert not difference, difference
        first.stop()
        second = self.build()
        self.produce(second)
        replayed = self.read_range(second, start, end)
        difference = rows_difference(
            original,
            replayed,
            ordered=True,
            context=f"a new instance reading {where} after produce() added data",
        )
        assert not difference, difference

    def test_consecutive_ranges_add_up(self) -> None:
        self._require_replayable()
        reader = self.build()
        a = reader.initial_offset()
        limit = reader.default_read_limit()
        b = self._next_end(reader, a, limit)
        c = self._next_end(reader, b, limit)
        first, second = self.read_range(reader, a, b), self.read_range(reader, b, c)
        whole = self.read_range(reader, a, c)
        both = pa.concat_tables([first, second])
        difference = rows_difference(  # splits may interleave rows (partitions): no order
            whole,
            both,
            ordered=False,
            context=(
                f"reading ({show(a)}, {show(b)}] ({first.num_rows} rows) then "
                f"({show(b)}, {show(c)}] ({second.num_rows} rows), compared with reading "
                f"({show(a)}, {show(c)}] ({whole.num_rows} rows) in one go"
            ),
        )
        assert not difference, difference

    def test_available_now_reaches_a_pinned_target(self) -> None:
        if not self._capabilities().available_now:
            pytest.skip(f"{self._connector_class().__qualname__} declares available_now=False")
        reader = self.build()
        start = reader.initial_offset()
        self.produce(reader)
        reader.prepare_available_now()
        limit = reader.default_read_limit()
        offset, batches = start, 0
        while True:
            end = reader.latest_offset(offset, limit)
            if end == offset:
                break
            batches += 1
            assert batches <= _MAX_AVAILABLE_NOW_BATCHES, (
                f"after prepare_available_now(), latest_offset still moves after "
                f"{_MAX_AVAILABLE_NOW_BATCHES} batches (now at {show(end)}): the target must be "
                "pinned"
            )
            self.read_range(reader, offset, end)
            offset = end
        self.produce(reader)
        after = reader.latest_offset(offset, limit)
        assert after == offset, (
            f"the available-now run reached {show(offset)}, then data produced afterwards moved "
            f"latest_offset to {show(after)}: the target pinned by prepare_available_now() "
            "must not move"
        )

    def test_restart_resumes_from_state(self) -> None:
        first = self.build()
        start = first.initial_offset()
        self.produce(first)
        end = first.latest_offset(start, ReadAllAvailable())
        replayable = self._capabilities().replayable and end != start
        original = self.read_range(first, start, end) if replayable else None
        first.stop()
        second = self.build()
        self.produce(second)
        resumed = second.initial_offset()
        assert resumed == start, (
            f"a second instance over the same state store starts at {show(resumed)}, the first "
            f"started at {show(start)} (data was added in between): the initial offset must be "
            "kept in ReadContext.state when it is first taken, not computed again (a source "
            "starting at 'the current end' would otherwise skip what arrived meanwhile)"
        )
        if original is not None:
            replayed = self.read_range(second, start, end)
            difference = rows_difference(
                original,
                replayed,
                ordered=True,
                context=(
                    f"a second instance over the same state reading ({show(start)}, {show(end)}] "
                    "after more data was added"
                ),
            )
            assert not difference, difference

    def test_splits_are_read_in_other_processes(self) -> None:
        if self.in_process_only:
            pytest.skip(f"in_process_only: {self.in_process_only}")
        reader = self.build()
        start = reader.initial_offset()
        limit = reader.default_read_limit()
        middle = self._next_end(reader, start, limit)
        end = self._next_end(reader, middle, limit)
        where = f"partitions({show(start)}, {show(end)})"
        splits = self.splits_of(reader, start, end)
        assert splits, f"{where} returned no splits, though latest_offset moved"
        elsewhere = read_splits_elsewhere(self.split_reader_of(reader), splits, where)
        replayable = self._capabilities().replayable
        schema = self.built_of(reader).schema
        for index, (split, batches) in enumerate(zip(splits, elsewhere, strict=True)):
            what = f"split {index} of {where}, read in another process"
            for number, batch in enumerate(batches):
                difference = describe_schema_difference(schema, batch.schema)
                assert not difference, f"{what}: batch {number} has another schema:\n{difference}"
            if replayable:
                here = self.read_split(reader, split, f"read(split {index} of {where})")
                difference = rows_difference(
                    pa.Table.from_batches(here, schema=schema),
                    pa.Table.from_batches(batches, schema=schema),
                    ordered=True,
                    context=f"{what}, compared with reading it in this process",
                )
                assert not difference, difference
        total = sum(batch.num_rows for batches in elsewhere for batch in batches)
        assert total > 0, f"every split of {where}, read in another process, yielded no rows"

    def test_runs_through_the_engine(self) -> None:
        if not self.engine_check:
            pytest.skip("engine_check = False")
        run_source_query(self)

    def _require_replayable(self) -> None:
        if not self._capabilities().replayable:
            pytest.skip(f"{self._connector_class().__qualname__} declares replayable=False")

    def test_stop_is_idempotent(self) -> None:
        unused = self.build()
        unused.stop()
        unused.stop()
        reader = self.build()
        start = reader.initial_offset()
        self._next_end(reader, start, reader.default_read_limit())
        reader.stop()
        reader.stop()


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


def _assert_latest_offset(
    reader: StreamReader, start: Any, limit: ReadLimit, expected: Any, why: str
) -> None:
    """``latest_offset(start, limit)`` must be ``expected``; the failure says ``why``."""
    got = reader.latest_offset(start, limit)
    assert got == expected, (
        f"latest_offset({show(start)}, {limit!r}) returned {show(got)}, expected "
        f"{show(expected)}: {why}"
    )

"""The sink conformance suite: subclass :class:`SinkContract` in your tests.

::

    from microbatch_testkit import SinkContract

    class TestJsonLinesContract(SinkContract):
        sink_class = JsonLinesSink

        def make_options(self):
            return {"path": str(self.tmp_path / "out")}

        def read_back(self, writer):
            return read_my_files(self.tmp_path / "out", schema=self.input_schema())

Hooks and what each receives (contract 2):

- ``make_options() -> dict``: raw options; called for every writer a test builds.
- ``make_session()``: the ``session`` given to the connector object and in ``WriteContext``.
- ``bad_options() -> [(raw options, expected message part)]``: options the sink must refuse.
- ``read_back(writer) -> pyarrow.Table``: everything the sink has made visible so far.
  ``writer`` is a :class:`~microbatch.StreamWriter` from :meth:`SinkContract.build` (often the
  newest one: after a simulated crash, one built after it); :meth:`SinkContract.built_of`
  gives the connector object and the ``WriteContext`` it was made with.
- ``make_context_extras() -> dict``: ``WriteContext.extras`` of every writer built.
- ``input_schema()`` / ``input_batches()``: the rows each test batch carries (default
  :mod:`microbatch_testkit.data`'s edge cases).
- ``expected_contents(committed) -> pyarrow.Table``: what ``read_back`` should return once the
  rows ``committed`` are visible (override for sinks that change data on the way).
- ``expected_update_contents(batches) -> pyarrow.Table``: what update mode leaves after
  ``batches`` (default: all their rows; override for a sink that upserts by key).
- ``commit_crash_modules(writer) -> set[str]``: the top-level packages whose lines the
  crash-inside-commit check kills at (default: the sink's, the writer's, ``microbatch``).

Attributes: ``sink_class``, ``ordered``, ``output_mode``, ``query_name``, ``in_process_only``
(a reason that skips the process check), ``engine_check``.

Besides the data, replay, option and capability checks: complete mode replaces the previous
batch; update mode keeps earlier rows; an exactly-once sink killed with SIGKILL at each line of
its own ``commit`` (in a forked child; ``MICROBATCH_TESTKIT_COMMIT_KILLS`` sets how many kill
points, ``all`` for every line) shows the batch wholly or not at all, and a replay by a new writer
leaves it exactly once; every part is written in another process (``spawn``) from a pickled part
writer; two available-now queries through the engine leave every batch once.

:meth:`SinkContract.build` makes the sink as ``start()`` does: options parsed,
``sink_class(options, session=...)``, then ``stream_writer(WriteContext(...))``; it returns the
stream writer. :meth:`SinkContract.run_batch` writes each part with
``writer.part_writer().write(data, PartContext(...))`` and then calls
``writer.commit(messages, batch_id)``.

The checks that apply are chosen from the sink's ``capabilities`` (``guarantee``,
``output_modes``, ``partition_by``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from microbatch import (
    CommitMessage,
    Guarantee,
    OutputMode,
    PartContext,
    PartWriter,
    Sink,
    SinkCapabilities,
    StateStore,
    StreamWriter,
    WriteContext,
)
from microbatch.errors import UnsupportedOperationError
from microbatch.planner import check_sink_supports

from . import data
from ._base import ContractBase, check_picklable, checked_type
from ._compare import describe_schema_difference, rows_difference
from ._processes import write_parts_elsewhere
from ._sink_checks import check_commit_under_kills, run_sink_query

__all__ = ["BuiltSink", "SinkContract"]

Parts = list[list[pa.RecordBatch]]


@dataclass(frozen=True)
class BuiltSink:
    """What :meth:`SinkContract.build` made: the connector object, the context its stream
    writer was given, and the writer."""

    sink: Sink
    context: WriteContext
    writer: StreamWriter


class SinkContract(ContractBase[Sink, SinkCapabilities]):
    """Checks that a :class:`~microbatch.Sink` keeps the contract the engine relies on.

    Set :attr:`sink_class`, implement :meth:`make_options` and :meth:`read_back`, and
    override the other hooks as your sink needs. ``self.tmp_path`` and ``self.state`` are
    fresh for every test; every writer a test builds shares ``self.state``, ``self.session``
    and one query id, as the writers of one query's runs do.
    """

    __test__ = False
    _role = "sink"
    _capabilities_class = SinkCapabilities

    sink_class: ClassVar[type[Sink]]
    """The sink under test."""
    ordered: ClassVar[bool] = False
    """True when :meth:`read_back` must return rows in the order they were written."""
    output_mode: ClassVar[OutputMode] = OutputMode.APPEND
    """The output mode the data tests use."""
    query_name: ClassVar[str | None] = None
    """The query name placed in the context (the memory sink needs one)."""
    in_process_only: ClassVar[str] = ""
    """Why this sink's parts cannot be written in another process (skips that check); empty
    for every sink meant to run on a cluster."""
    engine_check: ClassVar[bool] = True
    """False skips :meth:`test_runs_through_the_engine` (say why in your test class)."""

    # -- hooks ----------------------------------------------------------------------------
    def read_back(self, writer: StreamWriter) -> pa.Table:
        """Everything the sink has made visible so far, as a table."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_back(writer)")

    def make_context_extras(self) -> dict[str, Any]:
        """``WriteContext.extras`` for every writer built; default empty."""
        return {}

    def input_schema(self) -> pa.Schema:
        """The schema of :meth:`input_batches`; default :data:`data.EDGE_SCHEMA`."""
        return data.EDGE_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        """The rows each test batch carries; default :func:`data.edge_batches`."""
        return data.edge_batches()

    def expected_update_contents(self, batches: list[pa.Table]) -> pa.Table:
        """What :meth:`read_back` should return after ``batches`` were committed in update
        mode, before :meth:`expected_contents` is applied.

        Default: every batch's rows, in order (a sink without a key adds the updated rows it
        is given, as Spark's console and memory sinks do). A sink that upserts by key returns
        the latest row of each key here.
        """
        return pa.concat_tables(batches)

    def commit_crash_modules(self, writer: StreamWriter) -> set[str]:
        """Top-level packages whose lines the crash-inside-commit check may be killed at
        (``writer`` is the stream writer whose commit is killed): default the packages of the
        sink class and of ``writer``'s class, and ``microbatch`` (the core's ledger helper)."""
        return {
            self._connector_class().__module__.partition(".")[0],
            type(writer).__module__.partition(".")[0],
            "microbatch",
        }

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        """What :meth:`read_back` should return once ``committed`` is visible.

        Default: ``committed`` itself. Override for sinks that change the data on the way
        (a text rendering, added columns).
        """
        return committed

    # -- helpers --------------------------------------------------------------------------
    def _build_any(self, options: dict[str, Any]) -> Any:
        return self.build(options=options)

    def build_sink(self, *, options: dict[str, Any] | None = None) -> Sink:
        """The connector object, as ``start()`` makes it (no writer)."""
        cls = self._connector_class()
        raw = self.make_options() if options is None else options
        parsed = cls.options.parse(raw, connector=cls.format_name)
        return cls(parsed, session=self.session)

    def build(
        self,
        *,
        state: StateStore | None = None,
        options: dict[str, Any] | None = None,
        output_mode: OutputMode | None = None,
        partition_by: tuple[str, ...] = (),
        last_committed_batch_id: int | None = None,
    ) -> StreamWriter:
        """A new stream writer, made as the engine makes one for a query run; stopped when
        the test ends. :meth:`built_of` gives the connector object and context."""
        sink = self.build_sink(options=options)
        context = WriteContext(
            schema=self.input_schema(),
            output_mode=self.output_mode if output_mode is None else output_mode,
            query_id=self.query_id,
            query_name=self.query_name,
            partition_by=partition_by,
            state=self.state if state is None else state,
            session=self.session,
            last_committed_batch_id=last_committed_batch_id,
            extras=self.make_context_extras(),
        )
        writer = checked_type(sink, "stream_writer", sink.stream_writer(context), StreamWriter)
        self._keep(writer, BuiltSink(sink, context, writer))
        return writer

    def built_of(self, writer: StreamWriter) -> BuiltSink:
        """The connector object and context ``writer`` was made from."""
        made: BuiltSink = self._made_of(writer)
        return made

    def part_writer_of(self, writer: StreamWriter) -> PartWriter:
        """``writer.part_writer()``, checked to be a :class:`~microbatch.PartWriter`."""
        return checked_type(writer, "part_writer", writer.part_writer(), PartWriter)

    def part_context(self, batch_id: int, index: int, count: int) -> PartContext:
        """The :class:`~microbatch.PartContext` of part ``index`` of ``count``."""
        return PartContext(
            batch_id=batch_id, part_index=index, num_parts=count, query_id=self.query_id
        )

    def write_parts(
        self, writer: StreamWriter, batch_id: int, parts: Parts
    ) -> list[CommitMessage | None]:
        """Each part of batch ``batch_id`` through one ``part_writer()``; the messages, in
        part order (as the engine does, each part gets its own ``PartContext``)."""
        schema = self.input_schema()
        part_writer = self.part_writer_of(writer)
        messages: list[CommitMessage | None] = []
        for index, part in enumerate(parts):
            message = part_writer.write(
                pa.RecordBatchReader.from_batches(schema, part),
                self.part_context(batch_id, index, len(parts)),
            )
            assert message is None or isinstance(message, CommitMessage), (
                f"write() of part {index} of batch {batch_id} returned "
                f"{type(message).__name__}, not a microbatch.CommitMessage or None"
            )
            messages.append(message)
        return messages

    def run_batch(self, writer: StreamWriter, batch_id: int, parts: Parts) -> None:
        """Write every part of batch ``batch_id`` and commit it, as the engine does."""
        writer.commit(self.write_parts(writer, batch_id, parts), batch_id)

    def input_parts(self) -> Parts:
        """:meth:`input_batches` cut into two parts (two splits of one batch)."""
        batches = self.input_batches()
        if len(batches) >= 2:
            half = len(batches) // 2
            return [batches[:half], batches[half:]]
        table = self._table(batches)
        half = table.num_rows // 2
        return [table.slice(0, half).to_batches(), table.slice(half).to_batches()]

    def _table(self, batches: Sequence[pa.RecordBatch]) -> pa.Table:
        return pa.Table.from_batches(list(batches), schema=self.input_schema())

    def _expected(
        self, committed_batches: list[pa.Table], mode: OutputMode | None = None
    ) -> pa.Table:
        if (mode or self.output_mode) == OutputMode.COMPLETE:
            committed_batches = committed_batches[-1:]
        if not committed_batches:
            return self.expected_contents(self.input_schema().empty_table())
        return self.expected_contents(pa.concat_tables(committed_batches))

    def assert_contents(self, writer: StreamWriter, expected: pa.Table, when: str) -> None:
        """Fail, showing the differing rows, unless ``read_back(writer)`` equals
        ``expected``."""
        actual = self.read_back(writer)
        assert isinstance(actual, pa.Table), (
            f"read_back() returned {type(actual).__name__}, not a pyarrow.Table"
        )
        difference = rows_difference(expected, actual, ordered=self.ordered, context=when)
        if difference and actual.num_rows:
            schema_difference = describe_schema_difference(expected.schema, actual.schema)
            if schema_difference:
                difference += f"\n  schema of read_back() differs:\n{schema_difference}"
        assert not difference, difference

    # -- tests ----------------------------------------------------------------------------
    def test_committed_batch_is_read_back(self) -> None:
        writer = self.build()
        batches = self.input_batches()
        self.run_batch(writer, 0, [batches])
        self.assert_contents(writer, self._expected([self._table(batches)]), "after batch 0")

    def test_parts_of_a_batch_are_committed_together(self) -> None:
        writer = self.build()
        parts = self.input_parts()
        whole = self._table([batch for part in parts for batch in part])
        self.run_batch(writer, 0, parts)
        self.assert_contents(writer, self._expected([whole]), "after batch 0 written in two parts")
        messages = self.write_parts(writer, 1, parts)
        if self._capabilities().guarantee == Guarantee.EXACTLY_ONCE:
            self.assert_contents(
                writer, self._expected([whole]), "after batch 1 was written but not committed"
            )
        writer.commit(messages, 1)
        self.assert_contents(writer, self._expected([whole, whole]), "after batch 1")

    def test_replayed_batch_is_applied_once(self) -> None:
        guarantee = self._capabilities().guarantee
        if guarantee != Guarantee.EXACTLY_ONCE:
            pytest.skip(
                f"{self._connector_class().__qualname__} declares guarantee={guarantee.value}"
            )
        parts = self.input_parts()
        whole = self._table([batch for part in parts for batch in part])
        once = self._expected([whole])
        first = self.build()
        self.run_batch(first, 0, parts)
        self.assert_contents(first, once, "after batch 0")
        first.stop()
        second = self.build()
        messages = self.write_parts(second, 0, parts)
        second.commit(messages, 0)
        self.assert_contents(second, once, "after a new writer re-ran write and commit of batch 0")
        second.commit(messages, 0)
        self.assert_contents(second, once, "after commit of batch 0 was called once more")
        self.run_batch(second, 1, parts)
        self.assert_contents(second, self._expected([whole, whole]), "after batch 1")

    def test_empty_batches_commit(self) -> None:
        writer = self.build()
        empty = [pa.RecordBatch.from_pylist([], schema=self.input_schema())]
        self.run_batch(writer, 0, [empty])
        writer.commit([], 1)
        self.assert_contents(
            writer, self._expected([]), "after an empty batch and a batch of no parts"
        )
        batches = self.input_batches()
        self.run_batch(writer, 2, [batches])
        self.assert_contents(writer, self._expected([self._table(batches)]), "after batch 2")

    def test_part_writer_and_messages_are_picklable(self) -> None:
        writer = self.build()
        part_writer = self.part_writer_of(writer)
        check_picklable(part_writer, f"part_writer() of {type(writer).__qualname__}")
        messages = self.write_parts(writer, 0, self.input_parts())
        for index, message in enumerate(messages):
            check_picklable(message, f"the commit message of part {index} of batch 0")
        writer.abort(messages, 0)

    def test_capabilities_are_declared_and_checked(self) -> None:
        cls = self._connector_class()
        capabilities = self._capabilities()
        modes = capabilities.output_modes
        assert modes, f"{cls.__qualname__}.capabilities.output_modes is empty"
        unknown = [mode for mode in modes if not isinstance(mode, OutputMode)]
        assert not unknown, (
            f"{cls.__qualname__}.capabilities.output_modes holds non-OutputMode values {unknown}"
        )
        assert isinstance(capabilities.guarantee, Guarantee), (
            f"{cls.__qualname__}.capabilities.guarantee is not a Guarantee"
        )
        assert isinstance(capabilities.partition_by, bool)
        for mode in OutputMode:
            if mode in modes:
                self.build(output_mode=mode)
                check_sink_supports(cls, mode, ())
            else:
                with pytest.raises(UnsupportedOperationError):
                    check_sink_supports(cls, mode, ())
        first_mode = sorted(modes)[0]
        if capabilities.partition_by:
            check_sink_supports(cls, first_mode, ("id",))
        else:
            with pytest.raises(UnsupportedOperationError):
                check_sink_supports(cls, first_mode, ("id",))

    def test_complete_mode_replaces_the_previous_batch(self) -> None:
        if OutputMode.COMPLETE not in self._capabilities().output_modes:
            pytest.skip("the sink does not declare complete mode")
        mode = OutputMode.COMPLETE
        whole = self._table(self.input_batches())
        smaller = whole.slice(0, max(1, whole.num_rows // 2))
        writer = self.build(output_mode=mode)
        self.run_batch(writer, 0, [whole.to_batches()])
        self.assert_contents(writer, self._expected([whole], mode), "complete mode, after batch 0")
        self.run_batch(writer, 1, [smaller.to_batches()])
        self.assert_contents(
            writer,
            self._expected([whole, smaller], mode),
            f"complete mode, after batch 1 ({smaller.num_rows} rows), which must replace the "
            f"{whole.num_rows} rows of batch 0",
        )
        if self._capabilities().guarantee == Guarantee.EXACTLY_ONCE:
            # the new writer stands for a restarted query, and goes on from here: the first
            # one is now a zombie that a transactional sink may have fenced
            writer = self.build(output_mode=mode)
            self.run_batch(writer, 1, [smaller.to_batches()])
            self.assert_contents(
                writer,
                self._expected([whole, smaller], mode),
                "complete mode, after batch 1 was replayed by a new writer",
            )
        self.run_batch(writer, 2, [[]])
        self.assert_contents(
            writer,
            self._expected([whole, smaller, smaller.schema.empty_table()], mode),
            "complete mode, after batch 2 with no rows (the result is now empty)",
        )

    def test_update_mode_keeps_the_rows_of_earlier_batches(self) -> None:
        if OutputMode.UPDATE not in self._capabilities().output_modes:
            pytest.skip("the sink does not declare update mode")
        whole = self._table(self.input_batches())
        first = whole.slice(0, max(1, whole.num_rows // 2))
        second = whole.slice(first.num_rows)
        writer = self.build(output_mode=OutputMode.UPDATE)
        self.run_batch(writer, 0, [first.to_batches()])
        self.run_batch(writer, 1, [second.to_batches()])
        expected = self.expected_contents(self.expected_update_contents([first, second]))
        self.assert_contents(
            writer,
            expected,
            f"update mode, after batch 0 ({first.num_rows} rows) and batch 1 "
            f"({second.num_rows} other rows): batch 1 updates, it does not replace",
        )

    def test_parts_are_written_in_other_processes(self) -> None:
        if self.in_process_only:
            pytest.skip(f"in_process_only: {self.in_process_only}")
        writer = self.build()
        parts = self.input_parts()
        contexts = [self.part_context(0, index, len(parts)) for index in range(len(parts))]
        messages = write_parts_elsewhere(
            self.part_writer_of(writer), self.input_schema(), parts, contexts
        )
        writer.commit(messages, 0)
        whole = self._table([batch for part in parts for batch in part])
        self.assert_contents(
            writer,
            self._expected([whole]),
            f"after batch 0's {len(parts)} parts were written in other processes by pickled "
            "copies of part_writer() and committed here",
        )

    def test_commit_is_atomic_when_killed(self) -> None:
        guarantee = self._capabilities().guarantee
        if guarantee != Guarantee.EXACTLY_ONCE:
            pytest.skip(
                f"{self._connector_class().__qualname__} declares guarantee={guarantee.value}"
            )
        if not hasattr(os, "fork"):
            pytest.skip("the crash-inside-commit check forks the test process (POSIX only)")
        check_commit_under_kills(self)

    def test_runs_through_the_engine(self) -> None:
        if not self.engine_check:
            pytest.skip("engine_check = False")
        run_sink_query(self)

    def test_stop_is_idempotent(self) -> None:
        unused = self.build()
        unused.stop()
        unused.stop()
        writer = self.build()
        self.run_batch(writer, 0, [self.input_batches()])
        writer.stop()
        writer.stop()

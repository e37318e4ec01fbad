"""The sink conformance suite: subclass :class:`SinkContract` in your tests.

::

    from microbatch_testkit import SinkContract

    class TestJsonLinesContract(SinkContract):
        sink_class = JsonLinesSink

        def make_options(self):
            return {"path": str(self.tmp_path / "out")}

        def read_back(self, sink):
            return read_my_files(self.tmp_path / "out", schema=sink.context.schema)

Input comes from :mod:`microbatch_testkit.data` unless :meth:`~SinkContract.input_batches` is
overridden. The checks that apply are chosen from what the sink class declares
(``guarantee``, ``output_modes``, ``supports_partition_by``).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from microbatch import Guarantee, OutputMode, Sink, SinkContext, StateStore
from microbatch.errors import UnsupportedOperationError

from . import data
from ._base import ContractBase
from ._compare import describe_schema_difference, rows_difference

__all__ = ["SinkContract"]

Parts = list[list[pa.RecordBatch]]


class SinkContract(ContractBase):
    """Checks that a :class:`~microbatch.Sink` keeps the contract the engine relies on.

    Set :attr:`sink_class`, implement :meth:`make_options` and :meth:`read_back`, and
    override the other hooks as your sink needs. ``self.tmp_path`` and ``self.state`` are
    fresh for every test; every sink a test builds shares ``self.state``, ``self.session``
    and one query id, as the instances of one query's runs do.
    """

    __test__ = False

    sink_class: ClassVar[type[Sink]]
    """The sink under test."""
    ordered: ClassVar[bool] = False
    """True when :meth:`read_back` must return rows in the order they were written."""
    output_mode: ClassVar[OutputMode] = OutputMode.APPEND
    """The output mode the data tests use."""
    query_name: ClassVar[str | None] = None
    """The query name placed in the context (the memory sink needs one)."""

    # -- hooks ----------------------------------------------------------------------------
    def read_back(self, sink: Sink) -> pa.Table:
        """Everything the sink has made visible so far, as a table."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_back(sink)")

    def make_context_extras(self) -> dict[str, Any]:
        """``SinkContext.extras`` for every sink built; default empty."""
        return {}

    def input_schema(self) -> pa.Schema:
        """The schema of :meth:`input_batches`; default :data:`data.EDGE_SCHEMA`."""
        return data.EDGE_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        """The rows each test batch carries; default :func:`data.edge_batches`."""
        return data.edge_batches()

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        """What :meth:`read_back` should return once ``committed`` is visible.

        Default: ``committed`` itself. Override for sinks that change the data on the way
        (a text rendering, added columns).
        """
        return committed

    # -- helpers --------------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    def _microbatch_sink_setup(self) -> None:
        self.query_id = str(uuid.uuid4())

    def _connector_class(self) -> type[Sink]:
        cls = getattr(self, "sink_class", None)
        if cls is None:
            pytest.fail(f"{type(self).__name__} must set sink_class")
        return cls

    def _build_any(self, options: dict[str, Any]) -> Any:
        return self.build(options=options)

    def build(
        self,
        *,
        state: StateStore | None = None,
        options: dict[str, Any] | None = None,
        output_mode: OutputMode | None = None,
        partition_by: tuple[str, ...] = (),
    ) -> Sink:
        """A new sink instance, as the engine makes one; stopped when the test ends."""
        cls = self._connector_class()
        raw = self.make_options() if options is None else options
        parsed = cls.options.parse(raw, connector=cls.format_name)
        context = SinkContext(
            options=parsed,
            schema=self.input_schema(),
            output_mode=self.output_mode if output_mode is None else output_mode,
            query_id=self.query_id,
            query_name=self.query_name,
            partition_by=partition_by,
            state=self.state if state is None else state,
            session=self.session,
            extras=self.make_context_extras(),
        )
        sink = cls(context)
        self.built.append(sink)
        return sink

    def write_parts(self, sink: Sink, batch_id: int, parts: Parts) -> list[Any]:
        """``sink.write`` of each part of batch ``batch_id``; the messages, in part order."""
        schema = self.input_schema()
        return [
            sink.write(batch_id, pa.RecordBatchReader.from_batches(schema, part)) for part in parts
        ]

    def run_batch(self, sink: Sink, batch_id: int, parts: Parts) -> None:
        """Write every part of batch ``batch_id`` and commit it, as the engine does."""
        sink.commit(batch_id, self.write_parts(sink, batch_id, parts))

    def input_parts(self) -> Parts:
        """:meth:`input_batches` cut into two parts (two splits of one batch)."""
        batches = self.input_batches()
        if len(batches) >= 2:
            half = len(batches) // 2
            return [batches[:half], batches[half:]]
        table = self._table(batches)
        half = table.num_rows // 2
        return [table.slice(0, half).to_batches(), table.slice(half).to_batches()]

    def _table(self, batches: list[pa.RecordBatch]) -> pa.Table:
        return pa.Table.from_batches(batches, schema=self.input_schema())

    def _expected(self, committed_batches: list[pa.Table]) -> pa.Table:
        if self.output_mode == OutputMode.COMPLETE:
            committed_batches = committed_batches[-1:]
        if not committed_batches:
            return self.expected_contents(self.input_schema().empty_table())
        return self.expected_contents(pa.concat_tables(committed_batches))

    def assert_contents(self, sink: Sink, expected: pa.Table, when: str) -> None:
        """Fail, showing the differing rows, unless ``read_back(sink)`` equals ``expected``."""
        actual = self.read_back(sink)
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
        sink = self.build()
        batches = self.input_batches()
        self.run_batch(sink, 0, [batches])
        self.assert_contents(sink, self._expected([self._table(batches)]), "after batch 0")

    def test_parts_of_a_batch_are_committed_together(self) -> None:
        sink = self.build()
        parts = self.input_parts()
        whole = self._table([batch for part in parts for batch in part])
        self.run_batch(sink, 0, parts)
        self.assert_contents(sink, self._expected([whole]), "after batch 0 written in two parts")
        messages = self.write_parts(sink, 1, parts)
        if self._connector_class().guarantee == Guarantee.EXACTLY_ONCE:
            self.assert_contents(
                sink, self._expected([whole]), "after batch 1 was written but not committed"
            )
        sink.commit(1, messages)
        self.assert_contents(sink, self._expected([whole, whole]), "after batch 1")

    def test_replayed_batch_is_applied_once(self) -> None:
        cls = self._connector_class()
        if cls.guarantee != Guarantee.EXACTLY_ONCE:
            pytest.skip(f"{cls.__qualname__} declares guarantee = {cls.guarantee.value}")
        parts = self.input_parts()
        whole = self._table([batch for part in parts for batch in part])
        once = self._expected([whole])
        first = self.build()
        self.run_batch(first, 0, parts)
        self.assert_contents(first, once, "after batch 0")
        first.stop()
        second = self.build()
        messages = self.write_parts(second, 0, parts)
        second.commit(0, messages)
        self.assert_contents(
            second, once, "after a new instance re-ran write and commit of batch 0"
        )
        second.commit(0, messages)
        self.assert_contents(second, once, "after commit of batch 0 was called once more")
        self.run_batch(second, 1, parts)
        self.assert_contents(second, self._expected([whole, whole]), "after batch 1")

    def test_empty_batches_commit(self) -> None:
        sink = self.build()
        empty = [pa.RecordBatch.from_pylist([], schema=self.input_schema())]
        self.run_batch(sink, 0, [empty])
        sink.commit(1, [])
        self.assert_contents(
            sink, self._expected([]), "after an empty batch and a batch of no parts"
        )
        batches = self.input_batches()
        self.run_batch(sink, 2, [batches])
        self.assert_contents(sink, self._expected([self._table(batches)]), "after batch 2")

    def test_output_modes_are_declared_and_checked(self) -> None:
        cls = self._connector_class()
        modes = cls.output_modes
        assert modes, f"{cls.__qualname__}.output_modes is empty"
        unknown = [mode for mode in modes if not isinstance(mode, OutputMode)]
        assert not unknown, f"{cls.__qualname__}.output_modes holds non-OutputMode values {unknown}"
        assert isinstance(cls.guarantee, Guarantee), (
            f"{cls.__qualname__}.guarantee is not a Guarantee"
        )
        assert isinstance(cls.supports_partition_by, bool)
        check = engine_sink_check()
        for mode in OutputMode:
            if mode in modes:
                self.build(output_mode=mode)
                if check is not None:
                    check(cls, mode, ())
            elif check is not None:
                with pytest.raises(UnsupportedOperationError):
                    check(cls, mode, ())
        if check is not None:
            first_mode = sorted(modes)[0]
            if cls.supports_partition_by:
                check(cls, first_mode, ("id",))
            else:
                with pytest.raises(UnsupportedOperationError):
                    check(cls, first_mode, ("id",))

    def test_stop_is_idempotent(self) -> None:
        unused = self.build()
        unused.stop()
        unused.stop()
        sink = self.build()
        self.run_batch(sink, 0, [self.input_batches()])
        sink.stop()
        sink.stop()


def engine_sink_check() -> Callable[[type[Sink], OutputMode, tuple[str, ...]], None] | None:
    """The engine's start-time check of a sink's output mode and partitioning, when present."""
    try:
        writer = importlib.import_module("microbatch.writer")
    except ImportError:
        return None
    return getattr(writer, "check_sink_supports", None)

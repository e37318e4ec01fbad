"""Connector contract 2 as the engine enforces it: connector objects, typed splits and commit
messages, the part context, the planner's checks, and first-contract classes refused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch._registry import ConnectorRegistry
from microbatch.errors import StreamingQueryException
from microbatch.planner import (
    QueryPlan,
    SinkNode,
    SourceNode,
    StatefulNode,
    check_streaming_plan,
)

SCHEMA = pa.schema([pa.field("id", pa.int64())])
CALLS: Counter[str] = Counter()


@dataclass(frozen=True)
class Upto(mb.Split):
    first: int
    stop: int


class CountingReader(mb.StreamReader, mb.SplitReader):
    """Three batches of two rows, two splits each (or untyped splits when told)."""

    def __init__(self, typed: bool) -> None:
        self.typed = typed

    def initial_offset(self) -> mb.Offset:
        return {"n": 0}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(2)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return {"n": min(6, start["n"] + 2)}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> Sequence[Any]:
        first = start["n"]
        if not self.typed:
            return [[first, end["n"]]]
        return [Upto(first, first + 1), Upto(first + 1, end["n"])]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, Upto)
        yield pa.record_batch([pa.array(range(split.first, split.stop), pa.int64())], SCHEMA)


class CountingSource(mb.Source):
    """Counts what the engine and the builders call."""

    format_name = "counting-contract-test"
    capabilities = mb.SourceCapabilities(available_now=True, user_schema="optional")
    options = mb.OptionSpec(
        mb.Option(name="typed", type="bool", default=True, doc="Typed splits or plain lists.")
    )

    def __init__(self, options: mb.Options, **kwargs: Any) -> None:
        super().__init__(options, **kwargs)
        CALLS["source.__init__"] += 1

    def schema(self) -> pa.Schema:
        CALLS["source.schema"] += 1
        return self.user_schema or SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        CALLS["source.stream_reader"] += 1
        assert context.schema == SCHEMA
        return CountingReader(self.opts.typed)


@dataclass(frozen=True)
class Seen(mb.CommitMessage):
    part: mb.PartContext
    rows: int


PARTS: list[mb.PartContext] = []
COMMITS: list[tuple[int, list[Any]]] = []


class RecordingWriter(mb.StreamWriter, mb.PartWriter):
    def __init__(self, typed: bool) -> None:
        self.typed = typed

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> Any:
        rows = data.read_all().num_rows
        return Seen(part, rows) if self.typed else {"rows": rows}

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        COMMITS.append((batch_id, list(messages)))


class RecordingSink(mb.Sink):
    format_name = "recording-contract-test"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)
    options = mb.OptionSpec(
        mb.Option(name="typed", type="bool", default=True, doc="Typed messages or plain dicts.")
    )

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        CALLS["sink.stream_writer"] += 1
        return RecordingWriter(self.opts.typed)


@pytest.fixture
def session(session: mb.Session, register: Callable[..., None]) -> mb.Session:
    CALLS.clear()
    COMMITS.clear()
    register(session, "contract-test", CountingSource, RecordingSink)
    return session


def run(session: mb.Session, source_typed: bool = True, sink_typed: bool = True) -> Any:
    frame = session.read_stream.format("counting-contract-test").option("typed", source_typed)
    loaded = frame.load()
    query = (
        loaded.write_stream.format("recording-contract-test")
        .option("typed", sink_typed)
        .trigger(available_now=True)
        .start()
    )
    return query


def test_load_asks_for_the_schema_once_and_makes_no_reader(session: mb.Session) -> None:
    frame = session.read_stream.format("counting-contract-test").load()
    assert frame.schema == SCHEMA
    frame.output_schema()
    assert CALLS == {"source.__init__": 1, "source.schema": 1}
    query = frame.write_stream.format("recording-contract-test").trigger(available_now=True)
    query.start().await_termination(timeout=20)
    assert CALLS == {
        "source.__init__": 1,
        "source.schema": 1,
        "source.stream_reader": 1,
        "sink.stream_writer": 1,
    }


def test_each_part_is_told_its_batch_index_and_query(session: mb.Session) -> None:
    query = run(session)
    query.await_termination(timeout=20)
    assert [batch_id for batch_id, _ in COMMITS] == [0, 1, 2]
    for batch_id, messages in COMMITS:
        parts = [message.part for message in messages]
        assert [(p.batch_id, p.part_index, p.num_parts) for p in parts] == [
            (batch_id, 0, 2),
            (batch_id, 1, 2),
        ]
        assert {p.query_id for p in parts} == {query.id}
        assert [message.rows for message in messages] == [1, 1]


def test_untyped_splits_stop_the_query_with_a_clear_error(session: mb.Session) -> None:
    query = run(session, source_typed=False)
    with pytest.raises(StreamingQueryException, match=r"partitions\(\) returned \[0, 2\], which"):
        query.await_termination(timeout=20)
    assert "microbatch.Split" in str(query.exception())


def test_untyped_commit_messages_stop_the_query_with_a_clear_error(session: mb.Session) -> None:
    query = run(session, sink_typed=False)
    with pytest.raises(StreamingQueryException, match=r"write\(\) returned a dict, not a"):
        query.await_termination(timeout=20)
    assert COMMITS == []


def test_complete_mode_on_a_stateless_query_fails_at_start_with_sparks_message(
    session: mb.Session,
) -> None:
    rate = session.read_stream.format("rate").load()
    with pytest.raises(mb.UnsupportedOperationError) as caught:
        rate.write_stream.format("memory").query_name("c").output_mode("complete").start()
    assert str(caught.value) == (
        "Complete output mode not supported when there are no streaming aggregations on "
        "streaming DataFrames/Datasets"
    )
    assert session.streams.active == []


def plan_with(*operators: StatefulNode, mode: mb.OutputMode) -> QueryPlan:
    spec: Any = object()
    node: Any = SourceNode(spec)
    for operator in operators:
        node = StatefulNode(
            node, operator.kind, operator.operator_id, SCHEMA, watermarked=operator.watermarked
        )
    sink_info: Any = None
    options: Any = None
    return QueryPlan(node, SinkNode(sink_info, options, mode))


def aggregate(operator_id: int = 0, watermarked: bool = False) -> StatefulNode:
    child: Any = None
    return StatefulNode(child, "aggregate", operator_id, SCHEMA, watermarked=watermarked)


def test_the_planner_applies_sparks_output_mode_rules_to_stateful_operators() -> None:
    complete, append, update = mb.OutputMode.COMPLETE, mb.OutputMode.APPEND, mb.OutputMode.UPDATE
    check_streaming_plan(plan_with(aggregate(), mode=complete))
    check_streaming_plan(plan_with(aggregate(), mode=update))
    check_streaming_plan(plan_with(aggregate(watermarked=True), mode=append))
    with pytest.raises(mb.UnsupportedOperationError, match=r"^Append output mode not supported"):
        check_streaming_plan(plan_with(aggregate(), mode=append))
    with pytest.raises(mb.UnsupportedOperationError, match=r"^Multiple streaming aggregations"):
        check_streaming_plan(plan_with(aggregate(0), aggregate(1), mode=complete))
    with pytest.raises(mb.UnsupportedOperationError, match=r"^Complete output mode not supported"):
        check_streaming_plan(plan_with(mode=complete))
    plan = plan_with(aggregate(7), mode=update)
    assert [node.operator_id for node in plan.stateful_operators()] == [7]
    assert len(plan.sources()) == 1


def test_a_plan_carries_the_schema_of_every_step(session: mb.Session) -> None:
    from microbatch.planner import plan_query

    frame = (
        session.read_stream.format("counting-contract-test")
        .load()
        .with_column("double", mb.col("id") * 2)
        .select("double")
    )
    info = session.registry.find("sink", "recording-contract-test")
    plan = plan_query(
        frame,
        info,
        RecordingSink.options.parse({}, connector="recording-contract-test"),
        mb.OutputMode.APPEND,
    )
    schemas = [node.schema.names for node in plan.nodes()]
    assert schemas == [["id"], ["id", "double"], ["double"]]
    assert plan.explain_lines()[0].startswith("Select")
    assert plan.explain_lines()[-1].startswith("    Source 0: ")


class FirstContractSink(mb.Sink):
    """Declares its capabilities and writes the way the first contract did (it has no
    ``stream_writer``: the first contract had none)."""

    format_name = "first-contract-test"
    guarantee = mb.Guarantee.EXACTLY_ONCE

    def write(self, batch_id: int, data: Any) -> Any:
        return None


def test_a_first_contract_connector_is_refused_with_what_replaced_it(
    refusal: Callable[[type], str],
) -> None:
    message = refusal(FirstContractSink)
    assert "is written for the first connector contract" in message
    assert "'guarantee' (now capabilities = SinkCapabilities(guarantee=...))" in message
    assert "'write' (now PartWriter.write(data, part))" in message


def test_a_plugin_is_handed_only_the_two_registration_calls() -> None:
    handed: list[Any] = []

    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: Any) -> None:
            handed.append(registry)

    registry = ConnectorRegistry()
    registry.register_plugin(Plugin(), "narrow")
    [registrar] = handed
    assert isinstance(registrar, mb.Registrar)
    assert not hasattr(registrar, "plugin_manager")
    assert {name for name in dir(registrar) if not name.startswith("_")} == {
        "add_sink",
        "add_source",
    }

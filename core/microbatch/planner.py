"""The logical plan of a streaming query, and Spark's checks of what a query may do.

``plan_query`` turns a frame and a sink configuration into a :class:`QueryPlan`: a tree of
nodes, each with the schema of the rows it yields, and the sink node on top. The checks run
here, at ``start()``, with Spark's error texts, before any checkpoint is touched.

A plan is a chain today (one source, stateless transforms), but its nodes already have room for
what comes next: several sources under a :class:`UnionNode` (offsets are kept per source index
in the checkpoint) and stateful operators (:class:`StatefulNode`, each with an operator id that
names its state folder in the checkpoint). No frame method builds those two yet, and the engine
refuses a plan holding them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from .connector import OutputMode, Sink
from .errors import ConfigurationError, UnsupportedOperationError

if TYPE_CHECKING:
    from ._frame import StreamFrame
    from ._reader import SourceSpec
    from ._registry import ConnectorInfo
    from ._transforms import Transform
    from .options import Options

__all__ = [
    "PlanNode",
    "QueryPlan",
    "SinkNode",
    "SourceNode",
    "StatefulNode",
    "TransformNode",
    "UnionNode",
    "check_sink_supports",
    "check_streaming_plan",
    "plan_query",
]


@dataclass(frozen=True)
class SourceNode:
    """A streaming source; ``index`` is its place among the query's sources."""

    spec: SourceSpec
    index: int = 0

    @property
    def schema(self) -> pa.Schema:
        return self.spec.schema

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return ()

    def describe(self) -> str:
        return f"Source {self.index}: {self.spec.source.describe()}"


@dataclass(frozen=True)
class TransformNode:
    """A stateless transform of each batch (select, filter, parse_json...)."""

    child: PlanNode
    step: Transform
    schema: pa.Schema

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)

    def describe(self) -> str:
        return self.step.describe()


@dataclass(frozen=True)
class StatefulNode:
    """A stateful operator: a streaming aggregation or a deduplication.

    ``operator_id`` names the operator's state folder in the checkpoint; ``watermarked`` says
    whether an event-time watermark bounds its state (Spark's append-mode rule needs one).
    """

    child: PlanNode
    kind: Literal["aggregate", "deduplicate"]
    operator_id: int
    schema: pa.Schema
    watermarked: bool = False

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)

    def describe(self) -> str:
        return f"Stateful {self.kind} (operator {self.operator_id})"


@dataclass(frozen=True)
class UnionNode:
    """Rows of several streams with the same schema."""

    inputs: tuple[PlanNode, ...]
    schema: pa.Schema

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return self.inputs

    def describe(self) -> str:
        return f"Union of {len(self.inputs)} streams"


PlanNode = SourceNode | TransformNode | StatefulNode | UnionNode


@dataclass(frozen=True)
class SinkNode:
    """Where the rows go, and how."""

    info: ConnectorInfo
    options: Options
    output_mode: OutputMode
    partition_by: tuple[str, ...] = ()

    @property
    def sink_class(self) -> type[Sink]:
        cls: type[Sink] = self.info.cls  # type: ignore[assignment]
        return cls


@dataclass(frozen=True)
class QueryPlan:
    """A checked streaming query: the node tree and the sink on top."""

    root: PlanNode
    sink: SinkNode

    @property
    def output_schema(self) -> pa.Schema:
        return self.root.schema

    def nodes(self) -> list[PlanNode]:
        """Every node, children before parents."""
        found: list[PlanNode] = []

        def visit(node: PlanNode) -> None:
            for child in node.children:
                visit(child)
            found.append(node)

        visit(self.root)
        return found

    def sources(self) -> list[SourceNode]:
        return [node for node in self.nodes() if isinstance(node, SourceNode)]

    def stateful_operators(self) -> list[StatefulNode]:
        return [node for node in self.nodes() if isinstance(node, StatefulNode)]

    def transforms(self) -> list[Transform]:
        """The stateless steps of a one-source chain, in order."""
        return [node.step for node in self.nodes() if isinstance(node, TransformNode)]

    def explain_lines(self) -> list[str]:
        lines: list[str] = []

        def visit(node: PlanNode, depth: int) -> None:
            lines.append("  " * depth + node.describe())
            for child in node.children:
                visit(child, depth + 1)

        visit(self.root, 0)
        return lines


def plan_query(
    frame: StreamFrame,
    sink_info: ConnectorInfo,
    sink_options: Options,
    output_mode: OutputMode,
    partition_by: tuple[str, ...] = (),
) -> QueryPlan:
    """The plan of ``frame`` written to the sink, checked; raises what Spark raises."""
    node: PlanNode = SourceNode(frame.source_spec)
    for step in frame.pipeline:
        schema = step.apply(pa.RecordBatch.from_pylist([], schema=node.schema)).schema
        node = TransformNode(node, step, schema)
    plan = QueryPlan(node, SinkNode(sink_info, sink_options, output_mode, partition_by))
    check_sink_supports(plan.sink.sink_class, output_mode, partition_by)
    check_streaming_plan(plan)
    missing = [column for column in partition_by if column not in plan.output_schema.names]
    if missing:
        raise ConfigurationError(
            f"partition_by columns {missing} are not in the output: {plan.output_schema.names}"
        )
    return plan


def check_sink_supports(
    sink_class: type[Sink], output_mode: OutputMode | str, partition_by: tuple[str, ...] = ()
) -> None:
    """Raise :class:`UnsupportedOperationError` when the sink cannot take this output mode or
    a ``partition_by``."""
    mode = OutputMode.parse(output_mode)
    name = sink_class.format_name
    capabilities = sink_class.capabilities
    if mode not in capabilities.output_modes:
        accepted = ", ".join(sorted(m.value for m in capabilities.output_modes))
        raise UnsupportedOperationError(
            f"Invalid streaming output mode: {mode.value}. This output mode is not supported by "
            f"sink '{name}' (it supports: {accepted})."
        )
    if partition_by and not capabilities.partition_by:
        raise UnsupportedOperationError(f"'{name}' does not support partitioning (partition_by)")


def check_streaming_plan(plan: QueryPlan) -> None:
    """Spark's unsupported-operation checks for a streaming query (its
    ``UnsupportedOperationChecker``), with its messages."""
    mode = plan.sink.output_mode
    aggregations = [node for node in plan.stateful_operators() if node.kind == "aggregate"]
    if len(aggregations) > 1:
        raise UnsupportedOperationError(
            "Multiple streaming aggregations are not supported with streaming DataFrames/Datasets"
        )
    if mode == OutputMode.COMPLETE and not aggregations:
        raise UnsupportedOperationError(
            "Complete output mode not supported when there are no streaming aggregations on "
            "streaming DataFrames/Datasets"
        )
    if mode == OutputMode.APPEND and any(not node.watermarked for node in aggregations):
        raise UnsupportedOperationError(
            "Append output mode not supported when there are streaming aggregations on "
            "streaming DataFrames/DataSets without watermark"
        )

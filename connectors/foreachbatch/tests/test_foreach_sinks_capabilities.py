"""What the foreach and foreachBatch sinks declare: every output mode, at least once, no
checkpoint needed and no partitionBy."""

from __future__ import annotations

import pytest

from microbatch import Guarantee, OutputMode, Sink
from microbatch_foreachbatch import ForeachBatchSink, ForeachSink


@pytest.mark.parametrize(
    ("sink_class", "format_name"), [(ForeachSink, "foreach"), (ForeachBatchSink, "foreachBatch")]
)
def test_declared_capabilities(sink_class: type[Sink], format_name: str) -> None:
    capabilities = sink_class.capabilities
    assert sink_class.format_name == format_name
    assert capabilities.output_modes == set(OutputMode)
    assert capabilities.guarantee is Guarantee.AT_LEAST_ONCE
    assert capabilities.needs_checkpoint is False
    assert not capabilities.partition_by

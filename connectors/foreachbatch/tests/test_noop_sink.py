"""The noop sink drains every part and keeps nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from microbatch import OutputMode, PartContext, WriteContext
from microbatch_foreachbatch import NoopSink, RowsProcessed

SCHEMA = pa.schema([("value", pa.int64())])


def test_noop_reads_every_row_of_every_part() -> None:
    produced: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 30, 10):
            produced.append(start)
            yield pa.RecordBatch.from_pydict({"value": list(range(start, start + 10))}, SCHEMA)

    connector = NoopSink(NoopSink.options.parse({}, connector="noop"))
    sink = connector.stream_writer(WriteContext(schema=SCHEMA))
    message = sink.part_writer().write(
        pa.RecordBatchReader.from_batches(SCHEMA, batches()), PartContext(0, 0, 1)
    )
    sink.commit([message], 0)
    sink.stop()
    assert message == RowsProcessed(30)
    assert produced == [0, 10, 20]  # the upstream was consumed to the end
    assert NoopSink.capabilities.output_modes == set(OutputMode)
    assert NoopSink.capabilities.needs_checkpoint is False

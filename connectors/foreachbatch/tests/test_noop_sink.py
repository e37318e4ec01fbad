"""The noop sink drains every part and keeps nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from microbatch import OutputMode, SinkContext
from microbatch_foreachbatch import NoopSink

SCHEMA = pa.schema([("value", pa.int64())])


def test_noop_reads_every_row_of_every_part() -> None:
    produced: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 30, 10):
            produced.append(start)
            yield pa.RecordBatch.from_pydict({"value": list(range(start, start + 10))}, SCHEMA)

    sink = NoopSink(
        SinkContext(options=NoopSink.options.parse({}, connector="noop"), schema=SCHEMA)
    )
    message = sink.write(0, pa.RecordBatchReader.from_batches(SCHEMA, batches()))
    sink.commit(0, [message])
    sink.stop()
    assert message == 30
    assert produced == [0, 10, 20]  # the upstream was consumed to the end
    assert NoopSink.output_modes == set(OutputMode)
    assert NoopSink.needs_checkpoint is False

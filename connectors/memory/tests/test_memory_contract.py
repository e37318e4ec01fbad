"""The ``memory`` source and sink pass the microbatch-testkit suites."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch import Sink, Source
from microbatch_memory import MemorySink, MemoryStream, MemoryStreamSource
from microbatch_testkit import SinkContract, SourceContract, data


class TestMemorySourceContract(SourceContract):
    source_class = MemoryStreamSource

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "stream"):
            self.stream = MemoryStream(data.EDGE_SCHEMA)
        return {"stream": self.stream}

    def produce(self, source: Source) -> None:
        for batch in data.edge_batches():
            self.stream.add_data(batch)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "missing required option 'stream'")]


class TestMemorySinkContract(SinkContract):
    sink_class = MemorySink
    query_name = "contract_output"
    ordered = True

    def make_options(self) -> dict[str, Any]:
        return {}

    def make_session(self) -> Any:
        return mb.Session(load_plugins=False)

    def read_back(self, sink: Sink) -> pa.Table:
        return self.session.table("contract_output")


class TestMemorySinkCompleteModeContract(TestMemorySinkContract):
    output_mode = mb.OutputMode.COMPLETE

"""The core runs with no connector installed: no first-party package is importable here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter in which every ``microbatch_*`` package fails to import, as if
# only the ``microbatch`` distribution were installed.
SCRIPT = textwrap.dedent(
    """
    import importlib.abc
    import sys


    class NoConnectors(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0].startswith("microbatch_"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None


    sys.meta_path.insert(0, NoConnectors())

    from collections.abc import Iterator
    from dataclasses import dataclass

    import pyarrow as pa

    import microbatch as mb
    from microbatch._cli import main

    SCHEMA = pa.schema([("n", pa.int64())])
    ROWS = []


    @dataclass(frozen=True)
    class Upto(mb.Split):
        stop: int


    class Reader(mb.StreamReader, mb.SplitReader):
        def initial_offset(self):
            return {"n": 0}

        def latest_offset(self, start, limit):
            return {"n": 3}

        def partitions(self, start, end):
            return [Upto(end["n"])] if end != start else []

        def read(self, split):
            yield pa.record_batch([pa.array(range(split.stop), pa.int64())], SCHEMA)


    class Three(mb.Source):
        format_name = "three"

        def schema(self):
            return SCHEMA

        def stream_reader(self, context):
            return Reader()


    class Collect(mb.BatchWriter):
        def add_batch(self, table, batch_id):
            ROWS.extend(table.column("n").to_pylist())


    class Collector(mb.Sink):
        format_name = "collector"
        capabilities = mb.SinkCapabilities(needs_checkpoint=False)

        def stream_writer(self, context):
            return Collect(context)


    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry):
            registry.add_source(Three)
            registry.add_sink(Collector)


    with mb.Session(plugins=[Plugin()]) as session:
        assert session.registry.failures == []
        frame = session.read_stream.format("three").load()
        query = frame.write_stream.format("collector").trigger(available_now=True).start()
        query.await_termination(20)
    assert ROWS == [0, 1, 2], ROWS
    assert main(["demo"]) == 2
    print("core alone: ok")
    """
)


def test_the_core_runs_a_query_with_no_connector_installed() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MICROBATCH_DISABLE_PLUGIN_AUTOLOAD": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "core alone: ok" in result.stdout
    assert "pip install microbatch-demo" in result.stderr

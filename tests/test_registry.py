from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch._registry import ConnectorRegistry
from microbatch.errors import UnknownFormatError


class TinyWriter(mb.BatchWriter):
    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        pass


class TinySink(mb.Sink):
    format_name = "tiny"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        return TinyWriter(context)


class OtherTinySink(TinySink):
    pass


def plugin_for(*sinks: type[mb.Sink]) -> Any:
    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
            for sink in sinks:
                registry.add_sink(sink)

    return Plugin()


def test_installed_connectors_are_found_with_their_distribution() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    info = registry.find("source", "RATE")
    assert info.format_name == "rate" and info.distribution == "microbatch-rate"
    assert info.version == "0.1.0"
    roles = {(c.format_name, c.role) for c in registry.connectors()}
    assert {("memory", "sink"), ("memory", "source"), ("foreachBatch", "sink")} <= roles


def test_a_name_clash_names_both_distributions_and_keeps_the_first() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(plugin_for(TinySink), "one", distribution="dist-one", version="1")
    registry.register_plugin(plugin_for(OtherTinySink), "two", distribution="dist-two", version="2")
    assert registry.find("sink", "tiny").cls is TinySink
    [failure] = registry.failures
    assert failure.distribution == "dist-two"
    assert "registered twice: by dist-one 1" in failure.error and "dist-two 2" in failure.error


def test_a_broken_plugin_is_reported_and_the_others_still_load() -> None:
    class Broken:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
            raise ImportError("No module named 'confluent_kafka'")

    registry = ConnectorRegistry()
    registry.register_plugin(Broken(), "kafka", distribution="microbatch-kafka", version="9.9")
    registry.register_plugin(plugin_for(TinySink), "tiny")
    assert registry.find("sink", "tiny").cls is TinySink
    with pytest.raises(UnknownFormatError) as caught:
        registry.find("source", "kafka")
    message = str(caught.value)
    assert "plugin 'kafka' (microbatch-kafka 9.9) failed to load" in message
    assert "No module named 'confluent_kafka'" in message


def test_registering_something_that_is_not_a_connector_fails_clearly() -> None:
    class NotASink:
        format_name = "x"

    registry = ConnectorRegistry()
    registry.register_plugin(plugin_for(NotASink), "bad")  # type: ignore[arg-type]
    assert "is not a subclass of microbatch.Sink" in registry.failures[0].error


def run_python(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    return result.stdout.strip()


def test_autoload_can_be_disabled_and_plugins_blocked() -> None:
    code = """
        from microbatch._registry import ConnectorRegistry
        r = ConnectorRegistry(); r.load_entry_points()
        print(sorted({c.format_name for c in r.connectors()}))
    """
    assert run_python(code, MICROBATCH_DISABLE_PLUGIN_AUTOLOAD="1") == "[]"
    blocked = run_python(code, MICROBATCH_BLOCK_PLUGINS="rate")
    assert "'rate'" not in blocked and "'memory'" in blocked


def test_entry_point_that_fails_to_import_is_reported(tmp_path: Path) -> None:
    dist = tmp_path / "microbatch_broken-1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: microbatch-broken\nVersion: 1.2\n")
    (dist / "entry_points.txt").write_text(
        "[microbatch.connectors]\nbroken = microbatch_broken_missing.plugin\n"
    )
    code = """
        from microbatch._registry import ConnectorRegistry
        r = ConnectorRegistry(); r.load_entry_points()
        print([(f.plugin, f.distribution, f.version) for f in r.failures])
        print(r.find("source", "rate").distribution)
    """
    out = run_python(code, PYTHONPATH=str(tmp_path)).splitlines()
    assert out == ["[('broken', 'microbatch-broken', '1.2')]", "microbatch-rate"]


def test_a_plugin_that_fails_halfway_leaves_none_of_its_connectors() -> None:
    class HalfBroken:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
            registry.add_sink(TinySink)
            raise RuntimeError("second registration failed")

    registry = ConnectorRegistry()
    registry.register_plugin(HalfBroken(), "half", distribution="dist-half", version="1")
    assert registry.connectors() == []
    assert "second registration failed" in registry.failures[0].error
    with pytest.raises(UnknownFormatError, match="Unknown format 'tiny'"):
        registry.find_any("tiny")

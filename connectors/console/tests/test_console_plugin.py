"""The plugin module registers the console sink (the entry point and the option docs are
checked by the testkit's contract suite)."""

from __future__ import annotations

import microbatch_console.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_console import ConsoleSink


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_console.plugin, "console")
    assert [(info.format_name, info.role) for info in registry.connectors()] == [
        ("console", "sink")
    ]


def test_sink_has_a_description() -> None:
    assert ConsoleSink.description

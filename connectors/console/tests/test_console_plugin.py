from __future__ import annotations

import microbatch_console.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_console import ConsoleSink


def test_entry_point_registers_the_sink() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    assert [failure for failure in registry.failures if failure.plugin == "console"] == []
    console = registry.find("sink", "console")
    assert console.cls is ConsoleSink
    assert (console.distribution, console.version) == ("microbatch-console", "0.1.0")


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_console.plugin, "console")
    assert [(info.format_name, info.role) for info in registry.connectors()] == [
        ("console", "sink")
    ]


def test_every_option_is_documented() -> None:
    assert ConsoleSink.description
    for option in ConsoleSink.options:
        assert option.doc.strip(), f"console.{option.name} has no doc"

from __future__ import annotations

import microbatch_socket.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_socket import SocketSource


def test_entry_point_registers_the_source() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    assert [failure for failure in registry.failures if failure.plugin == "socket"] == []
    info = registry.find("source", "socket")
    assert info.cls is SocketSource
    assert (info.distribution, info.version) == ("microbatch-socket", "0.1.0")


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_socket.plugin, "socket")
    assert [(info.format_name, info.role) for info in registry.connectors()] == [
        ("socket", "source")
    ]


def test_every_option_is_documented() -> None:
    assert SocketSource.description
    for option in SocketSource.options:
        assert option.doc.strip(), f"socket.{option.name} has no doc"

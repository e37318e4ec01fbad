"""The plugin module registers the socket source (the entry point and the option docs are
checked by the testkit's contract suite)."""

from __future__ import annotations

import microbatch_socket.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_socket import SocketSource


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_socket.plugin, "socket")
    assert [(info.format_name, info.role) for info in registry.connectors()] == [
        ("socket", "source")
    ]


def test_source_has_a_description() -> None:
    assert SocketSource.description

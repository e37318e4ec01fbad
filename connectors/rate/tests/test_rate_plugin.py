"""The plugin module registers both rate sources (the entry point and the option docs are
checked by the testkit's contract suites)."""

from __future__ import annotations

import microbatch_rate.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_rate import RateMicroBatchSource, RateSource


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_rate.plugin, "rate")
    assert registry.failures == []
    names = {(info.format_name, info.role) for info in registry.connectors()}
    assert names == {("rate", "source"), ("rate-micro-batch", "source")}
    assert registry.find("source", "RATE-MICRO-BATCH").cls is RateMicroBatchSource


def test_sources_have_a_description() -> None:
    assert RateSource.description
    assert RateMicroBatchSource.description

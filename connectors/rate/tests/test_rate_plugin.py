from __future__ import annotations

import microbatch_rate.plugin
from microbatch._registry import ConnectorRegistry
from microbatch_rate import RateMicroBatchSource, RateSource


def test_entry_point_registers_both_sources() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    assert [failure for failure in registry.failures if failure.plugin == "rate"] == []
    rate = registry.find("source", "rate")
    assert rate.cls is RateSource
    assert (rate.distribution, rate.version) == ("microbatch-rate", "0.1.0")
    assert registry.find("source", "RATE-MICRO-BATCH").cls is RateMicroBatchSource


def test_plugin_module_registers_by_hand() -> None:
    registry = ConnectorRegistry()
    registry.register_plugin(microbatch_rate.plugin, "rate")
    assert registry.failures == []
    names = {(info.format_name, info.role) for info in registry.connectors()}
    assert names == {("rate", "source"), ("rate-micro-batch", "source")}


def test_every_option_is_documented() -> None:
    for cls in (RateSource, RateMicroBatchSource):
        assert cls.description
        for option in cls.options:
            assert option.doc.strip(), f"{cls.format_name}.{option.name} has no doc"

"""Fixtures shared by the core's tests: an open session, test connectors registered on it as a
plugin (or refused at registration), and JSON-lines input files that appear the way a file
source expects them to."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch._registry import ConnectorRegistry
from microbatch._writer import DataStreamWriter
from microbatch.errors import PluginLoadError

Register = Callable[..., None]
"""``register(session, name, *connectors)``: see :func:`register`."""

Refusal = Callable[[type[mb.Sink]], str]
"""``refusal(sink_class)``: see :func:`refusal`."""

WriteRows = Callable[[Path, str, range], None]
"""``write_rows(folder, name, ids)``: see :func:`write_rows`."""

FileByFile = Callable[[mb.Session, str], DataStreamWriter]
"""``file_by_file(session, fmt)``: see :func:`file_by_file`."""


@pytest.fixture
def session() -> Iterator[mb.Session]:
    """A new session, closed after the test."""
    with mb.Session() as opened:
        yield opened


def _register(session: mb.Session, name: str, *connectors: type[Any]) -> None:
    """Register ``connectors`` (sources and sinks) on ``session`` as one plugin called ``name``;
    the plugin must load without a recorded failure."""

    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: mb.Registrar) -> None:
            for connector in connectors:
                if issubclass(connector, mb.Sink):
                    registry.add_sink(connector)
                else:
                    registry.add_source(connector)

    session.registry.register_plugin(Plugin(), name)
    assert not [failure for failure in session.registry.failures if failure.plugin == name]


@pytest.fixture
def register() -> Register:
    """``register(session, name, *connectors)``: the test's connectors as a plugin ``name``."""
    return _register


def _refusal(cls: type[mb.Sink]) -> str:
    """The :class:`PluginLoadError` text of registering sink ``cls`` in a new registry, which
    must not know the sink afterwards."""
    registry = ConnectorRegistry()
    with pytest.raises(PluginLoadError) as caught:
        registry.add_sink(cls)
    with pytest.raises(mb.UnknownFormatError):
        registry.find("sink", cls.format_name)
    return str(caught.value)


@pytest.fixture
def refusal() -> Refusal:
    """``refusal(sink_class)``: why registering the sink is refused (it must be)."""
    return _refusal


def _write_rows(folder: Path, name: str, ids: range) -> None:
    """Write ``{"id": i}`` for each of ``ids`` as the JSON-lines file ``folder/name``, staged
    beside ``folder`` and renamed into it, so a file source never sees it half written."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{name}.staging"
    staging.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    os.replace(staging, folder / name)


@pytest.fixture
def write_rows() -> WriteRows:
    """``write_rows(folder, name, ids)``: a new input file of ``{"id": i}`` rows."""
    return _write_rows


@pytest.fixture
def file_by_file(tmp_path: Path) -> FileByFile:
    """``file_by_file(session, fmt)``: an available-now query, ready to start, that reads the
    JSON-lines files of ``tmp_path / "in"`` (``id bigint``) one file a batch into the sink
    ``fmt`` with the checkpoint ``tmp_path / "cp"``."""

    def build(session: mb.Session, fmt: str) -> DataStreamWriter:
        return (
            session.read_stream.format("json")
            .schema("id bigint")
            .option("maxFilesPerTrigger", 1)
            .load(str(tmp_path / "in"))
            .write_stream.format(fmt)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(available_now=True)
        )

    return build

"""pytest plugin of the test kit (entry point ``pytest11``: ``microbatch``).

Fixtures:

- ``memory_state``: a fresh, empty :class:`~microbatch.StateStore` on fsspec's in-memory
  filesystem (``memory://``), removed after the test;
- ``state_store``: a fresh :class:`~microbatch.StateStore` in the test's ``tmp_path``;
- ``wide`` and ``row_of``: tables printed by the ``microbatch`` command (``microbatch
  connectors``, ``microbatch docs options``...) wide enough not to wrap, and
  ``row_of(text, name)``, the cells of the row whose first cell is ``name``;
- ``kafka_service``, ``make_kafka_topic``, ``postgres_service``, ``postgres_database``: real
  Kafka and PostgreSQL (see :mod:`microbatch_testkit.services.fixtures`; they need the
  ``services`` extra and skip with a message saying what to set up when no provider can serve).

Marker ``services``: added to every test that uses ``kafka_service`` or ``postgres_service``
(``pytest -m services`` selects the tests that need real services).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from microbatch import StateStore

from .services.fixtures import (
    kafka_service,
    make_kafka_topic,
    postgres_database,
    postgres_service,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_sessionstart,
    pytest_terminal_summary,
)

__all__ = [
    "kafka_service",
    "make_kafka_topic",
    "memory_state",
    "postgres_database",
    "postgres_service",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "row_of",
    "state_store",
    "wide",
]


@pytest.fixture
def memory_state() -> Iterator[StateStore]:
    """A new state store under a unique ``memory://`` folder."""
    store = StateStore(f"memory://microbatch-testkit/{uuid.uuid4().hex}")
    yield store
    if store.fs.exists(store.path):
        store.fs.rm(store.path, recursive=True)


@pytest.fixture
def state_store(tmp_path: Path) -> StateStore:
    """A new state store in the folder ``state`` of the test's ``tmp_path``."""
    return StateStore(str(tmp_path / "state"))


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables of the ``microbatch`` command wide enough that no cell wraps in captured output."""
    monkeypatch.setenv("COLUMNS", "220")


def _row_of(text: str, name: str) -> list[str]:
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no table row for {name!r} in:\n{text}")


@pytest.fixture
def row_of(wide: None) -> Callable[[str, str], list[str]]:
    """``row_of(text, name)``: the cells of the row of a printed table whose first cell is
    ``name`` (an ``AssertionError`` showing ``text`` when there is none); the test's tables are
    printed wide enough that no cell wraps."""
    return _row_of

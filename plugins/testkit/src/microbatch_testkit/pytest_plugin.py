"""pytest plugin of the test kit (entry point ``pytest11``: ``microbatch``).

Fixtures:

- ``memory_state``: a fresh, empty :class:`~microbatch.StateStore` on fsspec's in-memory
  filesystem (``memory://``), removed after the test;
- ``state_store``: a fresh :class:`~microbatch.StateStore` in the test's ``tmp_path``;
- ``kafka_service``, ``make_kafka_topic``, ``postgres_service``, ``postgres_database``: real
  Kafka and PostgreSQL (see :mod:`microbatch_testkit.services.fixtures`; they need the
  ``services`` extra and skip with a message saying what to set up when no provider can serve).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from microbatch import StateStore

from .services.fixtures import (
    kafka_service,
    make_kafka_topic,
    postgres_database,
    postgres_service,
    pytest_sessionstart,
    pytest_terminal_summary,
)

__all__ = [
    "kafka_service",
    "make_kafka_topic",
    "memory_state",
    "postgres_database",
    "postgres_service",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "state_store",
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

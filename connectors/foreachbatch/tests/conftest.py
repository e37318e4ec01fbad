"""SQLite files for the tests of ``foreach_batch`` functions that apply batches with
:class:`microbatch.BatchLedger`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def new_database(tmp_path: Path) -> Callable[[str], Path]:
    """Makes ``target.db`` in ``tmp_path`` with one table, ``new_database("t (x INTEGER)")``,
    and returns its path."""

    def create(table: str) -> Path:
        path = tmp_path / "target.db"
        with closing(sqlite3.connect(path)) as connection:
            connection.execute(f"CREATE TABLE {table}")
            connection.commit()
        return path

    return create


def _select(path: Path, query: str) -> list[Any]:
    with closing(sqlite3.connect(path)) as fresh:
        return sorted(fresh.execute(query).fetchall())


@pytest.fixture
def select() -> Callable[[Path, str], list[Any]]:
    """``select(path, query)``: the rows of ``query``, sorted, read over a fresh connection
    (what another process would see)."""
    return _select

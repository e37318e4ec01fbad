"""Shared fixtures of the jdbc connector's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The SQLAlchemy URL of a new, empty SQLite database file."""
    return f"sqlite:///{tmp_path / 'test.db'}"

"""Makes :mod:`file_connector_helpers` importable by the tests of this folder (the suite runs with
``--import-mode=importlib``, which puts no test folder on ``sys.path``); and the fixtures
that many of them share."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import microbatch as mb

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)


@pytest.fixture
def session() -> Iterator[mb.Session]:
    """A session, closed after the test."""
    with mb.Session() as opened:
        yield opened


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder ``in`` for a source to read."""
    path = tmp_path / "in"
    path.mkdir()
    return path

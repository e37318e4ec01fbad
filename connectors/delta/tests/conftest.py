"""Fixtures shared by the Delta connector's tests: small real tables written with delta-rs.

``delta_table`` is a :class:`TableMaker` on a fresh folder of ``tmp_path``: ``append(rows)``,
``overwrite(rows)``, ``delete(predicate)``, ``update(values, predicate)``, ``optimize()`` each
make one commit with delta-rs and return the new version; ``read()`` is the table's contents
(``DeltaTable(...).to_pyarrow_table()``); ``history()`` its commits. ``numbers(first, count)``
is a small table of ``id`` (long) and ``name`` (string) rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest


def numbers(first: int, count: int, **columns: Any) -> pa.Table:
    """Rows ``id`` = first .. first+count-1 and ``name`` = ``"n<id>"``, plus constant
    ``columns`` (``part="a"``)."""
    ids = list(range(first, first + count))
    data: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i}" for i in ids], pa.string()),
    }
    for name, value in columns.items():
        data[name] = pa.array([value] * count)
    return pa.table(data)


class TableMaker:
    """A Delta table in a test folder, changed one delta-rs commit at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.uri = str(path)

    def _version(self) -> int:
        from deltalake import DeltaTable

        return int(DeltaTable(self.uri).version())

    def append(
        self,
        rows: pa.Table | Mapping[str, Sequence[Any]],
        *,
        partition_by: Sequence[str] | None = None,
        **options: Any,
    ) -> int:
        """Append ``rows`` (one commit); the new version. ``options`` go to write_deltalake
        (``schema_mode="merge"``, ``configuration={...}``)."""
        from deltalake import write_deltalake

        table = rows if isinstance(rows, pa.Table) else pa.table(dict(rows))
        write_deltalake(
            self.uri, table, mode="append", partition_by=list(partition_by or []) or None, **options
        )
        return self._version()

    def overwrite(self, rows: pa.Table, **options: Any) -> int:
        from deltalake import write_deltalake

        write_deltalake(self.uri, rows, mode="overwrite", **options)
        return self._version()

    def delete(self, predicate: str | None = None) -> int:
        from deltalake import DeltaTable

        DeltaTable(self.uri).delete(predicate)
        return self._version()

    def update(self, values: Mapping[str, str], predicate: str | None = None) -> int:
        from deltalake import DeltaTable

        DeltaTable(self.uri).update(updates=dict(values), predicate=predicate)
        return self._version()

    def optimize(self) -> int:
        """Compact the table's small files (a ``dataChange=false`` commit)."""
        from deltalake import DeltaTable

        DeltaTable(self.uri).optimize.compact()
        return self._version()

    def read(self) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(self.uri).to_pyarrow_table()

    def history(self) -> list[dict[str, Any]]:
        from deltalake import DeltaTable

        return list(DeltaTable(self.uri).history())


@pytest.fixture
def delta_table(tmp_path: Path) -> TableMaker:
    """A not yet created Delta table under ``tmp_path`` (the first write creates it)."""
    return TableMaker(tmp_path / "table")


@pytest.fixture
def make_numbers() -> Any:
    """:func:`numbers`, as a fixture."""
    return numbers

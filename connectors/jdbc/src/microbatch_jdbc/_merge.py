"""A ``MERGE`` statement for dialects that have one but no ``ON CONFLICT`` (SQL Server,
Oracle), as a SQLAlchemy construct: one source row of bound parameters per execution, so that
it runs as an executemany. Identifiers are rendered by the dialect's identifier preparer and
the source row is a SQLAlchemy ``SELECT`` of casts (``FROM DUAL`` where Oracle needs it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement

if TYPE_CHECKING:
    from sqlalchemy import Table

__all__ = ["Merge", "merge_statement", "parameter_name"]


def parameter_name(index: int) -> str:
    """The bound parameter of the ``index``-th column (rows are passed under these names, so
    that no column name ever becomes a parameter name)."""
    return f"p{index}"


class Merge(Executable, ClauseElement):
    """``MERGE INTO table USING (one row) ON keys WHEN MATCHED THEN UPDATE WHEN NOT MATCHED
    THEN INSERT``."""

    inherit_cache = False

    def __init__(self, table: Table, columns: Sequence[str], keys: Sequence[str]) -> None:
        self.table = table
        self.columns = list(columns)
        self.keys = list(keys)


def merge_statement(table: Table, columns: Sequence[str], keys: Sequence[str]) -> Merge:
    """The statement; execute it with rows keyed by :func:`parameter_name`."""
    return Merge(table, columns, keys)


@compiles(Merge)
def _compile(element: Merge, compiler: Any, **kw: Any) -> str:
    from sqlalchemy import bindparam, cast, select

    table = element.table
    source = select(
        *(
            cast(
                bindparam(parameter_name(index), type_=table.c[name].type), table.c[name].type
            ).label(name)
            for index, name in enumerate(element.columns)
        )
    ).subquery("s")
    quote = compiler.preparer.quote
    on = " AND ".join(f"t.{quote(key)} = s.{quote(key)}" for key in element.keys)
    values = [name for name in element.columns if name not in element.keys]
    text = (
        f"MERGE INTO {compiler.preparer.format_table(table)} t "
        f"USING {compiler.process(source, asfrom=True, **kw)} ON ({on})"
    )
    if values:
        assignments = ", ".join(f"{quote(name)} = s.{quote(name)}" for name in values)
        text += f" WHEN MATCHED THEN UPDATE SET {assignments}"
    columns = ", ".join(quote(name) for name in element.columns)
    sources = ", ".join(f"s.{quote(name)}" for name in element.columns)
    text += f" WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({sources})"
    if compiler.dialect.name == "mssql":
        text += ";"  # SQL Server requires MERGE to be terminated
    return text

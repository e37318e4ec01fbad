"""What every PostgreSQL provider offers tests: a server URL and a fresh database per test."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._restartable import RestartableService

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDatabase", "PostgresService", "sqlalchemy_url"]

_UNSAFE = re.compile(r"[^a-z0-9_]+")


def sqlalchemy_url(url: str) -> str:
    """``url`` (``postgres://``, ``postgresql://`` or any ``postgresql+driver://``) with the
    psycopg 3 driver, as SQLAlchemy expects it."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL URL: {parsed.render_as_string(hide_password=True)}")
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def _with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


def _hidden(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@dataclass(frozen=True)
class PostgresDatabase:
    """A database of its own on the test server.

    ``url`` is a SQLAlchemy URL (``postgresql+psycopg://...``) for ``create_engine``; ``dsn``
    is the same address as a libpq URI for ``psycopg.connect``.
    """

    name: str
    url: str = field(repr=False)

    @property
    def dsn(self) -> str:
        """The libpq connection URI (``postgresql://user@host:port/name``)."""
        from sqlalchemy.engine import make_url

        return make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)

    def __repr__(self) -> str:
        return f"PostgresDatabase(name={self.name!r}, url={_hidden(self.url)!r})"


class PostgresService(RestartableService):
    """A PostgreSQL server for tests, found or started by one of the providers.

    ``url`` is the SQLAlchemy URL of its maintenance database (``postgres``). Tests should
    work in a database of their own: :meth:`create_database` makes one, :meth:`drop_database`
    removes it even while connections are open.
    """

    service = "PostgreSQL server"
    restartable_with = "MICROBATCH_SERVICES=local or docker"

    def __init__(self, url: str = "", *, description: str = "") -> None:
        self.url = url
        self.description = description or "PostgreSQL"

    def __repr__(self) -> str:
        shown = _hidden(self.url) if self.url else "(not started)"
        return f"<{type(self).__name__} {shown} ({self.provider})>"

    @property
    def dsn(self) -> str:
        """The maintenance database's libpq connection URI."""
        return PostgresDatabase("postgres", self.url).dsn

    def database(self, name: str) -> PostgresDatabase:
        """The address of the existing database ``name`` on this server."""
        return PostgresDatabase(name, _with_database(self.url, name))

    def create_database(self, *, name: str | None = None, hint: str = "test") -> PostgresDatabase:
        """Create an empty database (named ``name``, or uniquely after ``hint``) and return it."""
        from psycopg import sql

        database = name or _database_name(hint)
        with self._admin() as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        return self.database(database)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending its open connections; a missing one is no error."""
        from psycopg import sql

        with self._admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def accepts_connections(self) -> bool:
        """True when the server answers a query now (one connection attempt, 2 s at most)."""
        import psycopg

        try:
            with psycopg.connect(self.dsn, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def _admin(self) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)

    def close(self) -> None:
        """Release the server: stop what this provider started and delete its data."""


def _database_name(hint: str) -> str:
    cleaned = _UNSAFE.sub("_", hint.lower()).strip("_")[:40] or "test"
    return f"{cleaned}_{uuid.uuid4().hex[:8]}"

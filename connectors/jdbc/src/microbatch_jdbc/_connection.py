"""The database a jdbc query talks to: its URL, credentials, engine and transient errors.

SQLAlchemy is imported inside the functions, so that registering the connector never loads it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import microbatch as mb

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

__all__ = [
    "CONNECTION_OPTIONS",
    "Database",
    "database_from_options",
    "is_retriable",
]

CONNECTION_OPTIONS = (
    mb.Option(
        name="url",
        required=True,
        identity=True,
        doc=(
            "The database, as a SQLAlchemy URL (postgresql+psycopg://user@host:5432/db, "
            "sqlite:///path.db...); a password in it is never shown."
        ),
    ),
    mb.Option(name="user", doc="The user name, when the URL has none (Spark's option)."),
    mb.Option(
        name="password", secret=True, doc="The password, when the URL has none; never shown."
    ),
    mb.Option(
        name="sessionInitStatement",
        doc="SQL run on every new connection before anything else (Spark's option).",
    ),
)
"""Options every jdbc source and sink declares."""

_RETRIABLE_SQLSTATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now
        "08000",  # connection_exception
        "08001",
        "08003",
        "08004",
        "08006",
        "08007",
    }
)


@dataclass(frozen=True)
class Database:
    """Where the database is and how to log in: small and picklable (a split reader or part
    writer opens its own engine from it, in its own process)."""

    url: str = field(repr=False)
    """The SQLAlchemy URL with the credentials applied (never shown: see :attr:`shown`)."""
    init_statement: str | None = None

    @property
    def shown(self) -> str:
        """The URL as it may be displayed: ``scheme://user:***@host:port/db``."""
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        """The dialect's name: ``postgresql``, ``sqlite``, ``mysql``..."""
        from sqlalchemy.engine import make_url

        return make_url(self.url).get_backend_name()

    def __repr__(self) -> str:
        return f"Database({self.shown})"

    def engine(self, **settings: Any) -> Engine:
        """A new engine for this database (``settings`` go to ``create_engine``); the
        ``sessionInitStatement`` runs on each of its new connections."""
        from sqlalchemy import create_engine, event

        engine = create_engine(self.url, **settings)
        if self.init_statement:
            statement = self.init_statement

            @event.listens_for(engine, "connect")
            def _initialise(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute(statement)
                finally:
                    cursor.close()
                if hasattr(dbapi_connection, "commit"):
                    dbapi_connection.commit()

        return engine

    def connect(self, engine: Engine) -> Connection:
        """A connection of ``engine``; a failure to connect is a ``RetriableError`` naming the
        database (shown without its password)."""
        try:
            return engine.connect()
        except Exception as error:
            if is_retriable(error):
                raise mb.RetriableError(
                    f"could not connect to {self.shown}: {_first_line(error)}"
                ) from error
            raise


def database_from_options(opts: mb.Options) -> Database:
    """The database named by the ``url``, ``user``, ``password`` and ``sessionInitStatement``
    options; a URL SQLAlchemy cannot parse is an ``OptionError``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url: URL = make_url(str(opts.url))
    except ArgumentError as error:
        raise mb.OptionError(
            f"invalid value for option 'url': {error}; expected a SQLAlchemy URL such as "
            "postgresql+psycopg://user@host:5432/db or sqlite:///path.db"
        ) from None
    if opts.get("user") and not url.username:
        url = url.set(username=opts.user)
    if opts.get("password") and not url.password:
        url = url.set(password=opts.password)
    return Database(
        url.render_as_string(hide_password=False), opts.get("sessionInitStatement") or None
    )


def is_retriable(error: BaseException) -> bool:
    """True for a failure that running the batch again may cure: a lost or refused connection,
    a serialization failure, a deadlock, a server shutting down."""
    from sqlalchemy import exc

    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        orig = getattr(current, "orig", None)  # a driver error wrapped by SQLAlchemy
        if isinstance(orig, BaseException) and orig is not current.__cause__:
            chain.append(orig)
        current = current.__cause__ or current.__context__
    for item in chain:
        if isinstance(item, exc.DBAPIError) and item.connection_invalidated:
            return True
        state = getattr(getattr(item, "orig", None), "sqlstate", None) or getattr(
            item, "sqlstate", None
        )
        if isinstance(state, str) and state in _RETRIABLE_SQLSTATES:
            return True
        if isinstance(item, sqlite3.OperationalError):  # also syntax errors and missing tables
            return "locked" in str(item) or "busy" in str(item)
        if isinstance(item, exc.OperationalError | exc.InterfaceError) and not isinstance(
            item.orig, sqlite3.OperationalError
        ):
            return True
        if isinstance(item, ConnectionError | TimeoutError):
            return True
    return False


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__

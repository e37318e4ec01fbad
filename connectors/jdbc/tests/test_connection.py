"""The shared connection handling: URL and credentials, the displayed URL, transient errors."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc._connection import (
    CONNECTION_OPTIONS,
    Database,
    database_from_options,
    is_retriable,
)

SPEC = mb.OptionSpec(*CONNECTION_OPTIONS)


def parse(**raw: str) -> mb.Options:
    return SPEC.parse(raw, connector="jdbc")


def test_user_and_password_options_fill_a_url_without_them() -> None:
    database = database_from_options(
        parse(url="postgresql+psycopg://db.local:5432/shop", user="etl", password="s3cret!")
    )
    assert sa.make_url(database.url).username == "etl"
    assert sa.make_url(database.url).password == "s3cret!"
    assert database.shown == "postgresql+psycopg://etl:***@db.local:5432/shop"
    assert "s3cret" not in repr(database) and database.dialect == "postgresql"


def test_credentials_in_the_url_win_and_are_never_shown() -> None:
    database = database_from_options(
        parse(url="postgresql://alice:pa55word@h/db", user="bob", password="other")
    )
    assert sa.make_url(database.url).username == "alice"
    assert database.shown == "postgresql://alice:***@h/db"
    assert "pa55word" not in repr(parse(url="postgresql://alice:pa55word@h/db"))


def test_a_url_sqlalchemy_cannot_read_is_an_option_error() -> None:
    with pytest.raises(mb.OptionError, match="expected a SQLAlchemy URL"):
        database_from_options(parse(url="jdbc:postgresql://h:5432/db"))


def test_the_session_init_statement_runs_on_each_new_connection(tmp_path: Path) -> None:
    database = database_from_options(
        parse(url=f"sqlite:///{tmp_path / 'x.db'}", sessionInitStatement="PRAGMA user_version = 7")
    )
    engine = pickle.loads(pickle.dumps(database)).engine()
    with database.connect(engine) as connection:
        assert connection.execute(sa.text("PRAGMA user_version")).scalar() == 7
    engine.dispose()


def test_transient_failures_are_retriable_and_mistakes_are_not(tmp_path: Path) -> None:
    engine = Database(f"sqlite:///{tmp_path / 'x.db'}").engine()
    with engine.connect() as connection, pytest.raises(sa.exc.OperationalError) as missing:
        connection.execute(sa.text("SELECT * FROM no_such_table"))
    assert not is_retriable(missing.value)
    locked = sa.exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    assert is_retriable(locked)
    assert not is_retriable(ValueError("bad value"))
    assert is_retriable(ConnectionResetError("peer reset"))
    engine.dispose()


def test_a_refused_connection_is_a_retriable_error_naming_the_database() -> None:
    database = Database("postgresql+psycopg://u:hidden@127.0.0.1:1/db?connect_timeout=2")
    engine = database.engine()
    with pytest.raises(mb.RetriableError, match=r"could not connect to .*u:\*\*\*@127.0.0.1:1/db"):
        database.connect(engine)
    engine.dispose()

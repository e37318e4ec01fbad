"""The local PostgreSQL provider stops and starts its server on the same URL with the same data;
providers that do not control their server say so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from microbatch_testkit.services import PostgresService
from microbatch_testkit.services._external import ExternalPostgres
from microbatch_testkit.services._postgres_local import LocalPostgres, postgres_problem


@pytest.fixture(scope="module")
def local_postgres() -> Iterator[LocalPostgres]:
    problem = postgres_problem()
    if problem is not None:
        pytest.skip(f"the local PostgreSQL provider needs {problem}")
    service = LocalPostgres()
    try:
        service.start()
        yield service
    finally:
        service.close()


def _count(service: PostgresService, dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as connection:
        row = connection.execute("SELECT count(*) FROM kept").fetchone()
    assert row is not None
    return int(row[0])


def _refused(dsn: str) -> bool:
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=2).close()
    except psycopg.OperationalError:
        return True
    return False


@pytest.mark.parametrize("graceful", [True, False], ids=["fast-shutdown", "sigkill"])
def test_stopped_keeps_the_url_and_the_data(local_postgres: LocalPostgres, graceful: bool) -> None:
    import psycopg

    database = local_postgres.create_database(hint="restart")
    with psycopg.connect(database.dsn) as connection:
        connection.execute("CREATE TABLE kept (id int)")
        connection.execute("INSERT INTO kept SELECT generate_series(1, 100)")
    url, pid = local_postgres.url, local_postgres.pid
    open_session = psycopg.connect(database.dsn, autocommit=True)
    with local_postgres.stopped(graceful=graceful):
        assert not local_postgres.running
        assert local_postgres.pid is None
        assert _refused(database.dsn)
        with pytest.raises(psycopg.OperationalError):
            open_session.execute("SELECT 1")
    assert local_postgres.running
    assert local_postgres.url == url
    assert local_postgres.pid not in (None, pid)
    assert _count(local_postgres, database.dsn) == 100
    open_session.close()
    local_postgres.drop_database(database.name)


def test_restart_and_ensure_running(local_postgres: LocalPostgres) -> None:
    pid = local_postgres.pid
    local_postgres.restart()
    assert local_postgres.running and local_postgres.pid != pid
    local_postgres.stop()
    local_postgres.stop()  # twice is no error
    local_postgres.ensure_running()
    assert local_postgres.running
    local_postgres.start()  # already running: nothing happens
    assert local_postgres.create_database(hint="after").name.startswith("after_")


def test_an_external_server_cannot_be_stopped() -> None:
    service = ExternalPostgres("postgresql://u@db.invalid/postgres")
    assert not service.can_restart
    with pytest.raises(NotImplementedError, match="MICROBATCH_SERVICES=local"):
        service.restart()
    with (
        pytest.raises(NotImplementedError, match="external PostgreSQL provider"),
        service.stopped(),
    ):
        pass
    service.ensure_running()  # nothing to do for a server someone else runs

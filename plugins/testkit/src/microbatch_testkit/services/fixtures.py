"""pytest fixtures for real Kafka and PostgreSQL (registered by the test kit's pytest plugin).

Session-scoped services, started on first use by the provider that
:func:`~microbatch_testkit.services.select_provider` picks:

- ``kafka_service``: a :class:`~microbatch_testkit.services.KafkaService`;
- ``postgres_service``: a :class:`~microbatch_testkit.services.PostgresService`.

Per test:

- ``make_kafka_topic``: ``make_kafka_topic(partitions=1, config=None) -> str`` creates a
  uniquely named topic, deleted after the test; the broker is started again after a test
  that left it stopped;
- ``postgres_database``: a new empty database
  (:class:`~microbatch_testkit.services.PostgresDatabase`), dropped after the test.

When no provider can serve, tests that use these fixtures are skipped with a message naming
what to set up, or fail when ``MICROBATCH_REQUIRE_SERVICES=1``.

The marker ``services`` is registered, and added to every test that uses ``kafka_service`` or
``postgres_service`` (directly or through other fixtures), so that ``pytest -m services`` runs
exactly the tests that need real services (for instance once more with another provider).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from ._selection import ENV_REQUIRE, ServiceUnavailable, require_services

if TYPE_CHECKING:
    from ._kafka import KafkaService
    from ._postgres import PostgresDatabase, PostgresService

__all__ = [
    "kafka_service",
    "make_kafka_topic",
    "postgres_database",
    "postgres_service",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_sessionstart",
    "pytest_terminal_summary",
]


class _Closable(Protocol):
    def close(self) -> None: ...


_S = TypeVar("_S", bound=_Closable)


def _serve(start: Callable[[], _S]) -> Iterator[_S]:
    """The body of a service fixture: ``start()`` the service, yield it, close it afterwards.

    When no provider can serve, the test is skipped (or fails, with
    ``MICROBATCH_REQUIRE_SERVICES=1``).
    """
    try:
        service = start()
    except ServiceUnavailable as exc:
        if require_services():
            pytest.fail(f"{exc} ({ENV_REQUIRE}=1 makes a missing service a failure)", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield service
    finally:
        service.close()


@pytest.fixture(scope="session")
def kafka_service() -> Iterator[KafkaService]:
    """A Kafka cluster for the whole session (see the module docstring)."""
    from ._start import start_kafka

    yield from _serve(start_kafka)


@pytest.fixture
def make_kafka_topic(
    kafka_service: KafkaService, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """A factory of new topics for this test: ``make_kafka_topic(3, config={...})``."""
    created: list[str] = []

    def make(partitions: int = 1, *, config: Mapping[str, str] | None = None) -> str:
        kafka_service.ensure_running()
        topic = kafka_service.create_topic(partitions, config=config, hint=request.node.name)
        created.append(topic)
        return topic

    yield make
    kafka_service.ensure_running()
    for topic in created:
        with contextlib.suppress(Exception):  # cleanup only: the data goes with the broker
            kafka_service.delete_topic(topic)


@pytest.fixture(scope="session")
def postgres_service() -> Iterator[PostgresService]:
    """A PostgreSQL server for the whole session (see the module docstring)."""
    from ._start import start_postgres

    yield from _serve(start_postgres)


@pytest.fixture
def postgres_database(
    postgres_service: PostgresService, request: pytest.FixtureRequest
) -> Iterator[PostgresDatabase]:
    """A new empty database for this test, dropped afterwards (open connections included)."""
    postgres_service.ensure_running()
    database = postgres_service.create_database(hint=request.node.name)
    yield database
    postgres_service.ensure_running()
    postgres_service.drop_database(database.name)


SERVICE_FIXTURES = ("kafka_service", "postgres_service")
"""The fixtures whose tests get the ``services`` marker."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``services`` marker."""
    config.addinivalue_line(
        "markers",
        "services: needs real Kafka or PostgreSQL (added to every test using kafka_service or "
        "postgres_service; tests that start services themselves carry it explicitly)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test whose fixture closure holds a service fixture with ``services``."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if any(name in names for name in SERVICE_FIXTURES) and not item.get_closest_marker(
            "services"
        ):
            item.add_marker(pytest.mark.services)


_FIRST_STARTUP = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note where this session's startups begin (a test may run pytest inside pytest)."""
    from ._start import STARTUPS

    session.config.stash[_FIRST_STARTUP] = len(STARTUPS)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the services this session started, with their providers and startup times."""
    from ._start import STARTUPS

    mine = STARTUPS[terminalreporter.config.stash.get(_FIRST_STARTUP, 0) :]
    if not mine:
        return
    terminalreporter.write_sep("-", "microbatch test services")
    for startup in mine:
        extra = f"; {startup.note}" if startup.note else ""
        terminalreporter.write_line(
            f"{startup.service}: {startup.description}, up in {startup.seconds:.1f} s{extra} "
            f"[{startup.provider} provider: {startup.reason}]"
        )

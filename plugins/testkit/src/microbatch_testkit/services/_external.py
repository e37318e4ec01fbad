"""The ``external`` providers: services that already run, named by environment variables.

``MICROBATCH_KAFKA_BOOTSTRAP`` holds a broker's bootstrap servers, ``MICROBATCH_POSTGRES_URL``
a PostgreSQL URL whose user may create databases. Nothing is started or stopped; topics and
databases the tests create are deleted after each test.
"""

from __future__ import annotations

from ._kafka import KafkaService
from ._postgres import PostgresService, sqlalchemy_url

__all__ = ["ExternalKafka", "ExternalPostgres"]


class ExternalKafka(KafkaService):
    """A running Kafka cluster; it cannot be restarted from the tests."""

    provider = "external"

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__(bootstrap_servers, description=f"Kafka at {bootstrap_servers} (external)")

    def check(self, *, timeout: float = 30.0) -> None:
        """Raise ``RuntimeError`` unless the cluster answers a metadata request in time."""
        if not self.wait_ready(timeout=timeout):
            raise RuntimeError(
                f"MICROBATCH_KAFKA_BOOTSTRAP={self.bootstrap_servers} does not answer a "
                f"metadata request within {timeout:.0f} s: is the broker running there?"
            )


class ExternalPostgres(PostgresService):
    """A running PostgreSQL server."""

    provider = "external"

    def __init__(self, url: str) -> None:
        super().__init__(sqlalchemy_url(url), description="PostgreSQL (external)")

    def check(self) -> None:
        """Raise ``RuntimeError`` unless the server accepts a connection."""
        import psycopg

        try:
            with psycopg.connect(self.dsn, connect_timeout=10) as connection:
                version = connection.execute("SHOW server_version").fetchone()
        except psycopg.OperationalError as exc:
            raise RuntimeError(
                f"MICROBATCH_POSTGRES_URL ({self!r}) does not accept a connection: "
                f"{str(exc).strip().splitlines()[0]}"
            ) from None
        if version is not None:
            self.description = f"PostgreSQL {version[0]} (external)"

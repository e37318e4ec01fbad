"""Real Kafka and PostgreSQL for integration tests, from Docker, local processes or your own.

Install with ``pip install 'microbatch-testkit[services]'``. The pytest fixtures
(``kafka_service``, ``make_kafka_topic``, ``postgres_service``, ``postgres_database``; see
:mod:`microbatch_testkit.services.fixtures`) are registered with the kit's pytest plugin::

    def test_round_trip(kafka_service, make_kafka_topic):
        topic = make_kafka_topic(3)
        producer = confluent_kafka.Producer(kafka_service.client_config())
        ...

``MICROBATCH_SERVICES`` picks the provider: ``auto`` (default), ``docker`` (testcontainers:
``apache/kafka`` and ``postgres`` images, overridable with ``MICROBATCH_KAFKA_IMAGE`` and
``MICROBATCH_POSTGRES_IMAGE``; ``MICROBATCH_DOCKER_NETWORK=host`` for host networking instead of
published ports), ``local`` (the Apache Kafka broker run with ``java`` from jars
Maven downloads once into ``~/.cache/microbatch``, and a throwaway cluster from the installed
PostgreSQL server binaries) or ``external`` (``MICROBATCH_KAFKA_BOOTSTRAP`` and
``MICROBATCH_POSTGRES_URL``). Outside pytest, :func:`start_kafka` and :func:`start_postgres`
give the same services; ``close()`` them when done. The provider classes (``LocalKafka``,
``DockerKafka``, ``ExternalKafka`` and their PostgreSQL twins) can also be used directly.
"""

from __future__ import annotations

from ._docker import DockerKafka, DockerPostgres
from ._external import ExternalKafka, ExternalPostgres
from ._kafka import BROKER_SETTINGS, KafkaService
from ._kafka_local import DEFAULT_KAFKA_VERSION, LocalKafka, cache_root, fetch_kafka_jars
from ._postgres import PostgresDatabase, PostgresService
from ._postgres_local import LocalPostgres
from ._selection import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_POSTGRES_URL,
    ENV_REQUIRE,
    ENV_SERVICES,
    MODES,
    MachineProbe,
    Probe,
    Provider,
    Selection,
    Service,
    ServiceUnavailable,
    require_services,
    select_provider,
)
from ._start import STARTUPS, Startup, start_kafka, start_postgres

__all__ = [
    "BROKER_SETTINGS",
    "DEFAULT_KAFKA_VERSION",
    "ENV_KAFKA_BOOTSTRAP",
    "ENV_POSTGRES_URL",
    "ENV_REQUIRE",
    "ENV_SERVICES",
    "MODES",
    "STARTUPS",
    "DockerKafka",
    "DockerPostgres",
    "ExternalKafka",
    "ExternalPostgres",
    "KafkaService",
    "LocalKafka",
    "LocalPostgres",
    "MachineProbe",
    "PostgresDatabase",
    "PostgresService",
    "Probe",
    "Provider",
    "Selection",
    "Service",
    "ServiceUnavailable",
    "Startup",
    "cache_root",
    "fetch_kafka_jars",
    "require_services",
    "select_provider",
    "start_kafka",
    "start_postgres",
]

"""Kafka connectors for microbatch: ``format("kafka")`` as a source and as a sink.

Importing this package does not import ``confluent_kafka``: the client loads when a Kafka
query starts.
"""

from __future__ import annotations

__all__: list[str] = []

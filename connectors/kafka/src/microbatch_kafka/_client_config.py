"""The ``kafka.*`` options: librdkafka settings passed through, and the ones refused.

Every option starting with ``kafka.`` reaches librdkafka without the prefix and lower-cased
(librdkafka's names are lower-case; Spark users write ``kafka.bootstrap.servers``). Settings
that would break what the connector relies on are refused when the query is built, saying
what to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from microbatch import Options, Rule

PREFIX = "kafka."
BOOTSTRAP = "bootstrap.servers"

# Secrets the core's key patterns (password, sasl.jaas.config, *.secret...) do not cover.
SECRET_KEYS = ("ssl.key.pem", "sasl.oauthbearer.config", "ssl.keystore.location")


def client_settings(options: Options) -> dict[str, Any]:
    """The librdkafka settings the user gave: ``kafka.*`` options without the prefix, keys
    lower-cased, values as given (strings, numbers or booleans)."""
    return {key.lower(): value for key, value in options.passthrough.items()}


def requires_bootstrap(client: str) -> Rule:
    """The rule that ``kafka.bootstrap.servers`` is set (Spark's wording; ``client`` is
    ``consumer`` or ``producer``)."""
    return Rule(
        lambda options: BOOTSTRAP in client_settings(options),
        f"Option '{PREFIX}{BOOTSTRAP}' must be specified for configuring Kafka {client}",
    )


def refuses(refused: Mapping[str, str]) -> Rule:
    """A rule refusing the librdkafka settings named in ``refused`` (lower-case keys without
    the prefix), each with the hint of what to do instead."""

    def check(options: Options) -> bool:
        problems = [
            f"Kafka option '{PREFIX}{key}' is not supported: {refused[key]}"
            for key in sorted(client_settings(options))
            if key in refused
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return True

    return Rule(check, "a Kafka setting is not supported")

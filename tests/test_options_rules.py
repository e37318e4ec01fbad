"""Option validators, cross-option rules, parsed defaults, documented options and secret rules."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch._registry import ConnectorRegistry
from microbatch.errors import OptionError
from microbatch.options import REDACTED, Option, OptionSpec, scrub


def problems_of(spec: OptionSpec, raw: dict[str, Any], connector: str = "test") -> list[str]:
    with pytest.raises(OptionError) as caught:
        spec.parse(raw, connector=connector)
    assert f"Invalid options for '{connector}'" in str(caught.value)
    return list(caught.value.problems)


# -- 1. per-option validators ------------------------------------------------------------------
def _even(value: int) -> str | None:
    return None if value % 2 == 0 else f"must be even, got {value}"


def _no_spaces(value: str) -> None:
    if " " in value:
        raise ValueError("must not contain spaces")


def test_validators_report_with_every_other_problem_at_once() -> None:
    spec = OptionSpec(
        Option(name="batchSize", type="int", default=2, validate=_even, doc="An even size."),
        Option(name="table", validate=_no_spaces, doc="A table name."),
        Option(name="flag", type="bool", default=False, validate=lambda v: not v, doc="Off."),
        Option(name="host", required=True, doc="Host."),
    )
    problems = problems_of(
        spec, {"batch_size": "3", "table": "my table", "flag": "true", "colour": "red"}
    )
    assert "invalid value '3' for option 'batchSize': must be even, got 3" in problems
    assert "invalid value 'my table' for option 'table': must not contain spaces" in problems
    assert "invalid value 'true' for option 'flag': is not accepted" in problems
    assert any(problem.startswith("unknown option 'colour'") for problem in problems)
    assert "missing required option 'host': Host." in problems
    assert len(problems) == 5
    options = spec.parse({"batchSize": 4, "table": "t", "host": "h"}, connector="test")
    assert options.batch_size == 4 and options.flag is False


def test_a_validator_message_never_shows_a_secret() -> None:
    spec = OptionSpec(
        Option(
            name="password",
            secret=True,
            validate=lambda v: f"{v!r} is too short" if len(v) < 12 else None,
            doc="The password.",
        )
    )
    [problem] = problems_of(spec, {"password": "hunter22"})
    assert "hunter22" not in problem and "too short" in problem


# -- 2. cross-option rules ---------------------------------------------------------------------
@functools.cache
def subscribe_spec() -> OptionSpec:
    """A Kafka-like spec with every kind of rule (built on first use)."""
    return OptionSpec(
        Option(name="subscribe", type="list", doc="Topics to read."),
        Option(name="subscribePattern", doc="A regular expression of topics to read."),
        Option(name="assign", type="json", doc="Partitions to read."),
        Option(name="maxOffsetsPerTrigger", type="int", minimum=1, doc="Rows per batch."),
        Option(name="minOffsetsPerTrigger", type="int", minimum=1, doc="Least rows per batch."),
        Option(name="maxTriggerDelay", type="duration", doc="Longest wait for the minimum."),
        Option(name="startingTimestamp", type="int", doc="Start at this time."),
        Option(name="startingOffsets", doc="Start at these offsets."),
        Option(name="username", doc="User name."),
        Option(name="password", secret=True, doc="Password."),
        Option(name="first", type="int", default=0, doc="First row."),
        Option(name="last", type="int", default=10, doc="Last row."),
        rules=(
            mb.ExactlyOneOf("subscribe", "subscribePattern", "assign"),
            mb.AtMostOneOf("startingTimestamp", "startingOffsets", hint="give one starting point"),
            mb.Requires("maxTriggerDelay", "minOffsetsPerTrigger"),
            mb.Requires("password", "username"),
            mb.AtLeastOneOf("first", "last"),
            mb.Rule(lambda o: o.first <= o.last, "option 'first' must not be after 'last'"),
        ),
    )


def test_exactly_one_of_names_what_was_given() -> None:
    problems = problems_of(subscribe_spec(), {"first": 1})
    assert (
        "exactly one of 'subscribe', 'subscribePattern', 'assign' must be set; got none" in problems
    )
    problems = problems_of(subscribe_spec(), {"subscribe": "a", "assign": "{}", "first": 1})
    assert (
        "exactly one of 'subscribe', 'subscribePattern', 'assign' must be set; "
        "got 'subscribe' and 'assign'"
    ) in problems
    options = subscribe_spec().parse({"subscribe_pattern": "t.*", "first": 1}, connector="test")
    assert options.subscribe_pattern == "t.*" and options.subscribe is None


def test_a_refused_value_still_counts_as_given_for_a_group() -> None:
    problems = problems_of(subscribe_spec(), {"assign": "{not json", "first": 1})
    assert len(problems) == 1 and problems[0].startswith("invalid value '{not json'")


def test_at_most_one_requires_at_least_one_and_rule_all_reported_at_once() -> None:
    problems = problems_of(
        subscribe_spec(),
        {
            "subscribe": "a",
            "startingTimestamp": 5,
            "startingOffsets": "earliest",
            "maxTriggerDelay": "5 seconds",
            "password": "hunter22",
            "first": 11,
        },
    )
    assert problems == [
        "at most one of 'startingTimestamp', 'startingOffsets' may be set; got "
        "'startingTimestamp' and 'startingOffsets': give one starting point",
        "option 'maxTriggerDelay' requires option 'minOffsetsPerTrigger' to be set too",
        "option 'password' requires option 'username' to be set too",
        "option 'first' must not be after 'last'",
    ]


def test_a_default_does_not_set_an_option_for_a_rule() -> None:
    problems = problems_of(subscribe_spec(), {"subscribe": "a"})
    assert problems == ["at least one of 'first', 'last' must be set; got none"]


def test_a_rule_is_skipped_when_its_options_were_refused() -> None:
    problems = problems_of(subscribe_spec(), {"subscribe": "a", "first": "x"})
    assert problems == ["invalid value 'x' for option 'first': expected an integer, got 'x'"]


def test_requires_several_names_the_missing_ones_and_rule_may_raise() -> None:
    def ordered(options: mb.Options) -> bool:
        if options.low > options.high:
            raise ValueError(f"low ({options.low}) is above high ({options.high})")
        return True

    spec = OptionSpec(
        Option(name="ssl", type="bool", doc="Use TLS."),
        Option(name="cert", doc="Certificate file."),
        Option(name="key", doc="Key file."),
        Option(name="low", type="int", default=0, doc="Low."),
        Option(name="high", type="int", default=9, doc="High."),
        rules=(mb.Requires("ssl", "cert", "key"), mb.Rule(ordered, "unused", names=("low",))),
    )
    assert problems_of(spec, {"ssl": True, "cert": "c", "low": 10}) == [
        "option 'ssl' requires options 'cert' and 'key' to be set too; missing 'key'",
        "low (10) is above high (9)",
    ]
    assert spec.extend(Option(name="other", doc="x")).rules == spec.rules


def test_a_rule_naming_an_undeclared_option_is_refused() -> None:
    with pytest.raises(ValueError, match="undeclared options: subscrbe"):
        OptionSpec(
            Option(name="subscribe", doc="a"),
            Option(name="assign", doc="b"),
            rules=(mb.ExactlyOneOf("subscrbe", "assign"),),
        )


def test_the_template_refuses_an_empty_path_through_its_validator() -> None:
    from microbatch_example.jsonl import JsonLinesSink

    assert JsonLinesSink.options["path"].validate is not None
    assert problems_of(JsonLinesSink.options, {"path": "  "}, "example-jsonl") == [
        "invalid value '  ' for option 'path': must not be empty"
    ]


def test_the_rate_source_checks_whole_seconds_while_parsing() -> None:
    from microbatch_rate.rate import RateSource

    problems = problems_of(RateSource.options, {"rampUpTime": "1500ms", "rowsPerSecond": 0}, "rate")
    assert problems == [
        "invalid value '1500ms' for option 'rampUpTime': must be a whole number of seconds, "
        "such as '5 seconds'",
        "invalid value 0 for option 'rowsPerSecond': must be at least 1",
    ]


# -- 3. defaults are parsed like values --------------------------------------------------------
def test_defaults_are_converted_like_values() -> None:
    spec = OptionSpec(
        Option(name="pollInterval", type="duration", default="30 seconds", doc="How often."),
        Option(name="suffixes", type="list", default=".tmp, .part", doc="Skipped suffixes."),
        Option(name="retries", type="int", default="3", doc="Attempts."),
        Option(name="verbose", type="bool", default="true", doc="Talk."),
        Option(name="mode", default="failfast", choices=("PERMISSIVE", "FAILFAST"), doc="Mode."),
    )
    assert spec["pollInterval"].default == timedelta(seconds=30)
    options = spec.parse({}, connector="test")
    assert options.poll_interval == timedelta(seconds=30)
    assert options.suffixes == (".tmp", ".part")
    assert options.retries == 3 and options.verbose is True and options.mode == "FAILFAST"


@pytest.mark.parametrize(
    ("option", "text"),
    [
        (
            dict(type="duration", default="30 secnds"),
            "default '30 secnds' is invalid",
        ),
        (dict(type="int", default=0, minimum=1), "option 'poll': default 0 is invalid: must be at"),
        (dict(default="fast", choices=("slow",)), "default 'fast' is invalid: must be one of slow"),
        (dict(type="int", default=3, validate=_even), "default 3 is invalid: must be even, got 3"),
        (dict(secret=True, default=5, validate=lambda v: "bad"), "option 'poll': default is inv"),
    ],
)
def test_a_bad_default_is_refused_when_declared(option: dict[str, Any], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        Option(name="poll", doc="d", **option)


# -- 4. every option has a doc -----------------------------------------------------------------
class UndocumentedSink(mb.Sink):
    format_name = "undocumented-test"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)
    options = OptionSpec(
        Option(name="path", doc="Where."), Option(name="colour"), Option(name="size", doc=" ")
    )

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        raise AssertionError("never registered, never started")


def test_registration_refuses_an_option_without_a_doc(refusal: Callable[[type], str]) -> None:
    message = refusal(UndocumentedSink)  # and the sink is not registered
    assert "connector 'undocumented-test' (sink, UndocumentedSink)" in message
    assert "options without a doc: 'colour', 'size'" in message


def test_a_plugin_with_an_undocumented_option_is_a_recorded_failure() -> None:
    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
            registry.add_sink(UndocumentedSink)

    registry = ConnectorRegistry()
    registry.register_plugin(Plugin(), "undocumented", distribution="dist-u", version="1")
    [failure] = registry.failures
    assert failure.distribution == "dist-u" and "'colour'" in failure.error


def test_every_installed_connector_still_registers() -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    assert registry.failures == []
    formats = {info.format_name for info in registry.connectors()}
    assert {"rate", "memory", "console", "json", "socket", "foreachBatch"} <= formats
    assert {"example-counter", "example-jsonl"} <= formats


# -- 5. typed access ---------------------------------------------------------------------------
def test_get_takes_any_spelling_and_a_default() -> None:
    spec = OptionSpec(
        Option(name="subscribe", type="list", doc="Topics."),
        Option(name="maxOffsetsPerTrigger", type="int", doc="Rows per batch."),
    )
    options = spec.parse({"subscribe": "a,b"}, connector="test")
    assert options.get("Subscribe") == ("a", "b") == options.subscribe == options["SUBSCRIBE"]
    assert options.get("max_offsets_per_trigger") is None
    assert options.get("nope", 7) == 7


# -- 6. exact secret rules ---------------------------------------------------------------------
@functools.cache
def kafka_spec() -> OptionSpec:
    """Declared options plus ``kafka.*`` passthrough keys (built on first use)."""
    return OptionSpec(
        Option(name="bootstrapServers", doc="Brokers."),
        Option(name="url", doc="A URL."),
        Option(name="urls", type="list", default=(), doc="URLs."),
        prefixes=("kafka.",),
    )


SECRET_KEYS = [
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "schema.registry.api.key",
    "apikey",
    "basic.auth.user.info",
    "sasl.oauthbearer.client.credentials.client.secret",
    "private.key",
    "fs.s3a.access.key",
    "fs.s3a.secret.key",
    "aws_session_token",
    "clientSecret",
    "passwd",
]
PLAIN_KEYS = [
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "ssl.keystore.location",
    "ssl.truststore.location",
    "ssl.keystore.type",
    "ssl.key.type",
    "ssl.endpoint.identification.algorithm",
    "group.id",
    "keystore",
    "monkey.business",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_known_secret_keys_are_secret(key: str) -> None:
    options = kafka_spec().parse({f"kafka.{key}": "s3cr3t-value"}, connector="kafka")
    assert options.redacted()[key] == REDACTED
    assert "s3cr3t-value" not in repr(options)
    assert options.secret_values() == ["s3cr3t-value"]


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_that_merely_contain_key_are_shown(key: str) -> None:
    value = "org.apache.kafka.common.serialization.StringDeserializer"
    options = kafka_spec().parse({f"kafka.{key}": value}, connector="kafka")
    assert options.redacted()[key] == repr(value)
    assert options.secret_values() == []


def test_a_connector_adds_exact_secret_keys_of_its_client() -> None:
    spec = OptionSpec(prefixes=("client.",), secret_keys=("custom.thing",))
    options = spec.parse({"client.Custom.Thing": "s3cr3t", "client.custom": "x"}, connector="c")
    assert options.redacted() == {"Custom.Thing": REDACTED, "custom": "'x'"}
    assert spec.extend().secret_keys == ("custom.thing",)


def test_urls_with_credentials_show_user_and_hide_the_password() -> None:
    options = kafka_spec().parse(
        {
            "url": "postgresql://alice:pa%40ss@db.example.com:5432/app?sslmode=require",
            "urls": "https://bob:hunter22@a.example.com/x, https://nobody@b.example.com/",
            "bootstrapServers": "broker:9092",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.schema.registry.url": "jdbc:mysql://carol:t0ps3cret@reg:8081/db",
        },
        connector="kafka",
    )
    shown = options.redacted()
    assert shown["url"] == "'postgresql://alice:***@db.example.com:5432/app?sslmode=require'"
    assert shown["urls"] == "('https://bob:***@a.example.com/x', 'https://nobody@b.example.com/')"
    assert shown["schema.registry.url"] == "'jdbc:mysql://carol:***@reg:8081/db'"
    assert shown["bootstrapServers"] == "'broker:9092'"
    text = repr(options)
    for secret in ("pa%40ss", "pa@ss", "hunter22", "t0ps3cret"):
        assert secret not in text
    assert set(options.secret_values()) == {"pa%40ss", "pa@ss", "hunter22", "t0ps3cret"}
    error = "could not connect: password pa@ss rejected for bob (hunter22)"
    cleaned = scrub(error, options.secret_values())
    assert cleaned == f"could not connect: password {REDACTED} rejected for bob ({REDACTED})"


def test_an_option_error_never_shows_a_url_password() -> None:
    spec = kafka_spec().extend(
        Option(name="endpoint", validate=lambda v: f"{v} is not reachable", doc="Endpoint."),
        Option(name="port", type="int", doc="Port."),
    )
    problems = problems_of(
        spec,
        {"endpoint": "https://u:hunter22@h.example.com/", "port": "https://u:s3cr3t!@h/"},
        "kafka",
    )
    text = "\n".join(problems)
    assert "hunter22" not in text and "s3cr3t!" not in text
    assert "invalid value 'https://u:***@h/' for option 'port'" in text
    assert "https://u:" in text


def test_the_checkpoint_identity_keeps_the_url_user_but_not_its_password() -> None:
    class TableSource(mb.Source):
        format_name = "table-test"
        options = OptionSpec(
            Option(name="url", identity=True, doc="Database URL."),
            Option(name="tables", type="list", identity=True, doc="Tables."),
        )

    raw = {"url": "jdbc:postgresql://alice:Tr0ub4dor@db/app", "tables": "a,b"}
    options = TableSource.options.parse(raw, connector="table-test")
    assert TableSource.identity(options) == {
        "format": "table-test",
        "url": "jdbc:postgresql://alice:***@db/app",
        "tables": ["a", "b"],
    }


class UrlWriter(mb.BatchWriter):
    """Fails its first batch with an error that quotes the password of its ``url``."""

    def __init__(self, context: mb.WriteContext, url: str) -> None:
        super().__init__(context)
        self.url = url

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        password = self.url.split(":")[2].split("@")[0]
        raise ConnectionError(f"login refused (password {password!r})")


class UrlSink(mb.Sink):
    """Fails its first batch with an error that quotes the password of its ``url``."""

    format_name = "url-sink-test"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)
    options = OptionSpec(Option(name="url", required=True, doc="Database URL."))

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        return UrlWriter(context, self.opts.url)


def test_a_query_shows_the_url_user_and_never_its_password(capsys: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="microbatch")
    with mb.Session() as session:

        class Plugin:
            @mb.hookimpl
            def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
                registry.add_sink(UrlSink)

        session.registry.register_plugin(Plugin(), "url-test")
        assert session.registry.failures == []
        query = (
            session.read_stream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .write_stream.format("url-sink-test")
            .option("url", "postgresql://alice:Tr0ub4dor@db.example.com/app")
            .start()
        )
        with pytest.raises(mb.StreamingQueryException) as caught:
            query.await_termination(timeout=20)
        query.explain(extended=True)
    explained = capsys.readouterr().out
    assert "option url='postgresql://alice:***@db.example.com/app'" in explained
    shown = [explained, str(caught.value), repr(caught.value.cause), str(query.status)]
    shown += [str(query.recent_progress), caplog.text]
    assert not [text for text in shown if "Tr0ub4dor" in text]
    assert "login refused (password" in str(caught.value) and REDACTED in str(caught.value)

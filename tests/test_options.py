from __future__ import annotations

from datetime import timedelta

import pytest

from microbatch.errors import OptionError
from microbatch.options import REDACTED, Option, OptionSpec, scrub

SPEC = OptionSpec(
    Option(name="rowsPerSecond", type="int", default=1, minimum=1, doc="rows each second"),
    Option(name="rampUpTime", type="duration", default=timedelta(0), doc="ramp"),
    Option(name="includeTimestamp", type="bool", default=False, doc="add a timestamp"),
    Option(name="mode", choices=("PERMISSIVE", "FAILFAST"), default="PERMISSIVE", doc="m"),
    Option(name="host", required=True, doc="Host to connect to"),
    Option(name="password", secret=True, doc="secret"),
    Option(name="topics", type="list", default=(), doc="topics"),
    prefixes=("kafka.",),
)


def test_names_accept_camel_snake_and_any_case() -> None:
    opts = SPEC.parse(
        {
            "rows_per_second": "5",
            "RAMPUPTIME": "2 seconds",
            "includetimestamp": "true",
            "host": "h",
        },
        connector="rate",
    )
    assert opts["rowsPerSecond"] == 5
    assert opts.rows_per_second == 5
    assert opts["ramp_up_time"] == timedelta(seconds=2)
    assert opts.include_timestamp is True
    assert opts.is_set("rowsPerSecond") and not opts.is_set("password")


def test_defaults_choices_and_lists() -> None:
    opts = SPEC.parse({"host": "h", "mode": "failfast", "topics": "a, b"}, connector="x")
    assert opts.rows_per_second == 1
    assert opts.mode == "FAILFAST"
    assert opts.topics == ("a", "b")


def test_every_problem_is_reported_at_once_with_did_you_mean() -> None:
    with pytest.raises(OptionError) as caught:
        SPEC.parse(
            {"rowsPerSecnd": 3, "includeTimestamp": "yes", "mode": "lenient"}, connector="rate"
        )
    message = str(caught.value)
    assert "Invalid options for 'rate'" in message
    assert "unknown option 'rowsPerSecnd' (did you mean 'rowsPerSecond'?)" in message
    assert "invalid value 'yes' for option 'includeTimestamp': must be 'true' or 'false'" in message
    assert "option 'mode': must be one of PERMISSIVE, FAILFAST" in message
    assert "missing required option 'host'" in message
    assert len(caught.value.problems) == 4


def test_wrong_type_and_range() -> None:
    with pytest.raises(OptionError, match="'rowsPerSecond': expected an integer, got 'ten'"):
        SPEC.parse({"host": "h", "rowsPerSecond": "ten"}, connector="rate")
    with pytest.raises(OptionError, match="'rowsPerSecond': must be at least 1"):
        SPEC.parse({"host": "h", "rowsPerSecond": 0}, connector="rate")
    with pytest.raises(OptionError, match="expected an integer, got a boolean"):
        SPEC.parse({"host": "h", "rowsPerSecond": True}, connector="rate")


def test_secrets_never_shown() -> None:
    opts = SPEC.parse(
        {"host": "h", "password": "hunter22", "kafka.sasl.jaas.config": "user pw=s3cr3t"},
        connector="kafka",
    )
    assert "hunter22" not in repr(opts)
    assert "s3cr3t" not in repr(opts)
    assert opts.redacted()["password"] == REDACTED
    assert opts.passthrough == {"sasl.jaas.config": "user pw=s3cr3t"}
    assert (
        scrub("failed login with hunter22", opts.secret_values()) == f"failed login with {REDACTED}"
    )
    with pytest.raises(OptionError) as caught:
        SPEC.parse({"host": "h", "password": ["hunter22"]}, connector="kafka")
    assert "hunter22" not in str(caught.value)


def test_passthrough_of_each_prefix() -> None:
    spec = OptionSpec(prefixes=("storage.", "delta."))
    opts = spec.parse(
        {"storage.AWS_REGION": "eu", "Delta.enableChangeDataFeed": "true", "storage.x": "1"},
        connector="delta",
    )
    assert opts.under("storage.") == {"AWS_REGION": "eu", "x": "1"}
    assert opts.under("delta.") == {"enableChangeDataFeed": "true"}
    assert opts.under("other.") == {}
    assert opts.passthrough == {"AWS_REGION": "eu", "enableChangeDataFeed": "true", "x": "1"}


def test_declaring_an_option_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        OptionSpec(Option(name="a_b"), Option(name="aB"))


def test_each_setting_of_a_secret_mapping_is_a_secret() -> None:
    spec = OptionSpec(Option(name="clientSettings", type="object", secret=True, doc="settings"))
    opts = spec.parse(
        {"clientSettings": {"endpoint": "http://h/tok3n", "retries": "10", "tls": "true"}},
        connector="x",
    )
    texts = opts.secret_values()
    assert "http://h/tok3n" in texts
    assert "10" not in texts and "true" not in texts
    assert scrub("GET http://h/tok3n failed", texts) == f"GET {REDACTED} failed"

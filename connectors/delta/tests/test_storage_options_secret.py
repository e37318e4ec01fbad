"""Storage option values never reach a query's repr, its errors or its logs.

delta-rs prints the endpoint URL in its connection errors, so an endpoint carrying a token in
its path is a storage option value that does reach an error: the query must redact it.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest

import microbatch as mb
from microbatch_delta._sink_options import SINK_OPTIONS
from microbatch_delta._source_options import SOURCE_OPTIONS

TOKEN = "zq7-storage-token-41"
KEY = "zq7-secret-key-58"


def storage_options() -> dict[str, str]:
    """Options for an S3 endpoint that refuses connections at once (no retries)."""
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:1/{TOKEN}",
        "AWS_ACCESS_KEY_ID": "AKIDTEST",
        "AWS_SECRET_ACCESS_KEY": KEY,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "max_retries": "0",
    }


def shown_failure(error: BaseException) -> str:
    return str(error) + repr(error) + "".join(traceback.format_exception(error))


def test_a_sink_storage_option_value_stays_out_of_errors_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = mb.Session()
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 3).load()
    writer = (
        frame.write_stream.format("delta")
        .option("storageOptions", storage_options())
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as raised:
        writer.start("s3://bucket/table")
    shown = shown_failure(raised.value)
    assert "Connection refused" in shown and "redacted" in shown  # the endpoint failed
    assert TOKEN not in shown and KEY not in shown
    assert TOKEN not in caplog.text and KEY not in caplog.text


def test_a_source_storage_option_value_stays_out_of_errors_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = mb.Session()
    reader = session.read_stream.format("delta").option("storageOptions", storage_options())
    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as raised:
        reader.load("s3://bucket/table")  # the source reads the table's schema here
    shown = shown_failure(raised.value)
    assert "Connection refused" in shown and "redacted" in shown
    assert TOKEN not in shown and KEY not in shown
    assert TOKEN not in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize("spec", [SINK_OPTIONS, SOURCE_OPTIONS], ids=["sink", "source"])
def test_storage_option_values_are_secrets_of_the_parsed_options(spec: mb.OptionSpec) -> None:
    raw = {"path": "s3://bucket/table", "storageOptions": storage_options()}
    opts = spec.parse(raw, connector="delta")
    shown = repr(opts) + str(opts.redacted())
    assert TOKEN not in shown and KEY not in shown
    assert f"http://127.0.0.1:1/{TOKEN}" in opts.secret_values()
    assert KEY in opts.secret_values() and "us-east-1" in opts.secret_values()
    assert "true" not in opts.secret_values() and "0" not in opts.secret_values()  # flags

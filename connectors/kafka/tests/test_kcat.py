"""An independent client on both ends: ``kcat`` (librdkafka's command-line client).

- Records that ``kcat -P`` produces (keys, values, several headers, into several partitions,
  binary content included) are read by the ``kafka`` source with the same keys, values,
  headers, partitions, offsets and timestamps as ``kcat -C -J`` sees them.
- Records that the ``kafka`` sink writes, at least once and with ``exactlyOnce=true``, are read
  back by ``kcat -C -J`` (under ``isolation.level=read_committed``) with the same content.

``kcat`` comes from the Debian package of that name (CI installs it). Without it these tests
are skipped, as tests without their service are, or fail under
``MICROBATCH_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import murmur2

import microbatch as mb
from microbatch_memory import MemoryStream
from microbatch_testkit.services import ENV_REQUIRE, KafkaService, require_services

Header = tuple[str, bytes | None]
# Everything compared about one record: key, value, headers (None: the record has none).
Content = tuple[bytes | None, bytes | None, tuple[Header, ...] | None]


# -- kcat ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kcat() -> str:
    """The path of ``kcat``; skipped without it (a failure under MICROBATCH_REQUIRE_SERVICES=1)."""
    path = shutil.which("kcat")
    if path is None:
        message = (
            "kcat is not on PATH: the Kafka connector's independent-client tests need it "
            "(Debian/Ubuntu: apt-get install kcat; .ci/run installs it)"
        )
        if require_services():
            pytest.fail(
                f"{message} ({ENV_REQUIRE}=1 makes a missing service a failure)", pytrace=False
            )
        pytest.skip(message)
    return path


def run_kcat(kcat: str, *arguments: str, stdin: bytes = b"", timeout: float = 60.0) -> bytes:
    """``kcat arguments...``'s standard output; a non-zero exit fails with its error output."""
    result = subprocess.run(
        [kcat, *arguments], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise AssertionError(
            f"kcat {' '.join(arguments)} exited with {result.returncode}: "
            f"{result.stderr.decode(errors='replace')}"
        )
    return result.stdout


def kcat_view(kcat: str, bootstrap: str, topic: str, *extra: str) -> list[dict[str, Any]]:
    """Every record of ``topic`` as ``kcat -C -e -J`` prints it, keys and payloads as bytes.

    kcat writes the bytes of keys, payloads and header values into its JSON strings as they
    are (control characters escaped), so the output is decoded with ``surrogateescape`` and the
    strings encoded back the same way: binary content survives exactly.
    """
    out = run_kcat(kcat, "-b", bootstrap, "-t", topic, "-C", "-e", "-q", "-J", *extra)
    records = []
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        record["key"] = _raw(record["key"])
        record["payload"] = _raw(record["payload"])
        flat = record.get("headers")
        record["headers"] = (
            None
            if flat is None
            else tuple((flat[i], _raw(flat[i + 1])) for i in range(0, len(flat), 2))
        )
        records.append(record)
    return records


def _raw(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- kcat produces, the source reads ------------------------------------------------------------
def produce_with_kcat(kcat: str, bootstrap: str, topic: str, folder: Path) -> dict[Content, int]:
    """Records into the 3 partitions of ``topic``; returns each record's content -> partition.

    kcat gives each invocation's records the same headers, so several invocations vary them.
    """
    expected: dict[Content, int] = {}
    base = ["-b", bootstrap, "-t", topic, "-P", "-K", "\t"]

    # Partition 0: three headers, one name twice (order and repeats are kept).
    pairs = [("h1", "a"), ("h2", "b"), ("h1", "c ünï")]
    headers0 = tuple((name, value.encode()) for name, value in pairs)
    lines = [(b"k1", b"v1"), (b"k2", "value with spaces, ünïcödé".encode()), (b"k3", b"{}")]
    options = [arg for name, value in pairs for arg in ("-H", f"{name}={value}")]
    run_kcat(
        kcat,
        *base,
        "-p",
        "0",
        *options,
        stdin=b"".join(k + b"\t" + v + b"\n" for k, v in lines),
    )
    expected.update({(k, v, headers0): 0 for k, v in lines})

    # Partition 1: -Z sends an empty key or value as null; a header without "=" has a null
    # value, one with "=" and nothing after it an empty value.
    headers1: tuple[Header, ...] = (("no-value", None), ("empty", b""))
    run_kcat(kcat, *base, "-p", "1", "-Z", "-H", "no-value", "-H", "empty=", stdin=b"k4\t\n\tv5\n")
    expected[(b"k4", None, headers1)] = 1
    expected[(None, b"v5", headers1)] = 1

    # Keyed records placed by kcat with Java's partitioner (murmur2), so into every partition.
    headers_keyed: tuple[Header, ...] = (("origin", b"kcat"),)
    keyed = [(f"key-{i}".encode(), f"keyed value {i}".encode()) for i in range(12)]
    run_kcat(
        kcat,
        *base,
        "-X",
        "partitioner=murmur2_random",
        "-H",
        "origin=kcat",
        stdin=b"".join(k + b"\t" + v + b"\n" for k, v in keyed),
    )
    expected.update({(k, v, headers_keyed): murmur2(k, 3) for k, v in keyed})
    assert {murmur2(k, 3) for k, _ in keyed} == {0, 1, 2}  # the keys cover every partition

    # Partition 2: binary values (NUL, 0xff, newlines), one per file, a binary key, no header.
    binary_key = b"bin\xfe\x01"
    for index, value in enumerate([b"a\x00\xff\nb\x01", bytes(range(256)), b"\n\n"]):
        path = folder / f"value-{index}.bin"
        path.write_bytes(value)
        run_kcat(
            kcat,
            "-b",
            bootstrap,
            "-t",
            topic,
            "-P",
            "-p",
            "2",
            "-k",
            binary_key.decode("utf-8", "surrogateescape"),
            str(path),
        )
        expected[(binary_key, value, None)] = 2
    return expected


def read_with_source(bootstrap: str, topic: str, how: str, folder: Path) -> list[dict[str, Any]]:
    """Every record of ``topic`` through the ``kafka`` source with ``includeHeaders=true``."""
    session = mb.Session()
    reader: Any = session.read if how == "batch" else session.read_stream
    reader = (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    if how == "batch":
        table = reader.load()
    else:
        query = (
            reader.load()
            .write_stream.format("memory")
            .query_name("kcat_records")
            .option("checkpointLocation", str(folder / "checkpoint"))
            .trigger(available_now=True)
            .start()
        )
        try:
            assert query.await_termination(60), "the available-now query did not end in 60 s"
        finally:
            query.stop()
        table = session.table("kcat_records")
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    milliseconds = table.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
    rows = table.drop_columns(["timestamp"]).to_pylist()
    for row, ms in zip(rows, milliseconds.to_pylist(), strict=True):
        row["timestamp_ms"] = ms
        if row["headers"] is not None:
            row["headers"] = tuple((h["key"], h["value"]) for h in row["headers"])
    return rows


@pytest.mark.parametrize("how", ["stream", "batch"])
def test_records_kcat_produces_are_read_by_the_source_as_kcat_sees_them(
    kcat: str, kafka_service: KafkaService, make_kafka_topic: Any, tmp_path: Path, how: str
) -> None:
    bootstrap = kafka_service.bootstrap_servers
    topic = make_kafka_topic(3)
    began = now_ms()
    expected = produce_with_kcat(kcat, bootstrap, topic, tmp_path)
    ended = now_ms()

    rows = read_with_source(bootstrap, topic, how, tmp_path)

    # What was given to kcat, where it was sent.
    got = {(r["key"], r["value"], r["headers"]): r["partition"] for r in rows}
    assert len(rows) == len(expected) == len(got)
    assert got == expected
    # kcat cannot set a timestamp: each is kcat's CreateTime, taken during the produce calls.
    assert {r["timestampType"] for r in rows} == {0}
    assert all(began <= r["timestamp_ms"] <= ended for r in rows), (began, ended, rows)
    assert {r["topic"] for r in rows} == {topic}

    # Record by record, as kcat's own consumer sees the same topic: offsets and timestamps too.
    view = kcat_view(kcat, bootstrap, topic)
    assert {v["tstype"] for v in view} == {"create"}
    by_position = {(v["partition"], v["offset"]): v for v in view}
    assert sorted(by_position) == sorted((r["partition"], r["offset"]) for r in rows)
    for row in rows:
        seen = by_position[(row["partition"], row["offset"])]
        assert (row["key"], row["value"], row["headers"], row["timestamp_ms"]) == (
            seen["key"],
            seen["payload"],
            seen["headers"],
            seen["ts"],
        ), row


# -- the sink writes, kcat reads ------------------------------------------------------------------
SINK_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("value", pa.binary()),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
    ]
)


def sink_rows(batch: int, count: int) -> list[dict[str, Any]]:
    """Rows of one batch: string keys (some null), binary values, varied headers."""
    rows = []
    for i in range(count):
        n = batch * count + i
        headers: list[dict[str, Any]] | None
        if n % 4 == 0:
            headers = None
        elif n % 4 == 1:
            headers = [{"key": "seq", "value": str(n).encode()}]
        elif n % 4 == 2:
            headers = [
                {"key": "h", "value": b"first"},
                {"key": "h", "value": b"second \x00\xff"},
                {"key": "null", "value": None},
            ]
        else:
            headers = [{"key": "ünï", "value": "cödé".encode()}, {"key": "empty", "value": b""}]
        rows.append(
            {
                "key": None if n % 5 == 4 else f"key-{n}",
                "value": f"value {n} ".encode() + bytes([n % 256, 0, 255]) + b"\n",
                "headers": headers,
            }
        )
    return rows


def expected_content(row: dict[str, Any]) -> Content:
    headers = row["headers"]
    return (
        None if row["key"] is None else row["key"].encode(),
        row["value"],
        tuple((h["key"], h["value"]) for h in headers) if headers else None,
    )


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_records_the_sink_writes_are_read_back_by_kcat(
    kcat: str,
    kafka_service: KafkaService,
    make_kafka_topic: Any,
    tmp_path: Path,
    exactly_once: bool,
) -> None:
    bootstrap = kafka_service.bootstrap_servers
    topic = make_kafka_topic(3)
    session = mb.Session()
    stream = MemoryStream(SINK_SCHEMA)
    batches = [sink_rows(batch, 20) for batch in range(3)]
    began = now_ms()
    query = (
        stream.to_frame(session)
        .write_stream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        for rows in batches:  # one batch (one transaction with exactlyOnce) each
            stream.add_data(rows)
            assert query.process_all_available(60), "the sink did not write the batch in 60 s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    ended = now_ms()

    view = kcat_view(kcat, bootstrap, topic, "-X", "isolation.level=read_committed")
    expected = [expected_content(row) for rows in batches for row in rows]
    got = [(v["key"], v["payload"], v["headers"]) for v in view]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert {v["tstype"] for v in view} == {"create"}
    assert all(began <= v["ts"] <= ended for v in view)
    # Keyed records land where the Java clients put them (murmur2); within a partition, the
    # batches' order is kept.
    for v in view:
        if v["key"] is not None:
            assert v["partition"] == murmur2(v["key"], 3), v
    for partition in range(3):
        here = sorted((v["offset"], v["payload"]) for v in view if v["partition"] == partition)
        values = [value for _, value in here]
        assert values == [content[1] for content in expected if content[1] in set(values)]

    # Transactions leave a commit marker after each batch in each partition written: offsets
    # with gaps. Without them the offsets are 0, 1, 2... in every partition.
    offsets = {p: sorted(v["offset"] for v in view if v["partition"] == p) for p in range(3)}
    contiguous = all(found == list(range(len(found))) for found in offsets.values())
    assert contiguous is not exactly_once, offsets

"""Crash tests with real processes: SIGKILL at each batch phase, restart, check the output.

Three pipelines read a 3-partition topic of 240 records, 30 per batch (8 batches), with the
available-now trigger (``scripts/kafka_crash_pipeline.py``). Each is killed at every phase in
turn, one batch after the other (batch 1 at the first phase, batch 2 at the next...), each
run restarting from the checkpoint the killed one left, then run to completion:

- Kafka -> parquet: the table holds every input record exactly once (same topic, partition,
  offset, key and value);
- Kafka -> Kafka with ``exactlyOnce=true``: a ``read_committed`` reader of the output topic
  (up to the last stable offset) sees every input record exactly once; ``mid_sink`` kills
  inside the Kafka transaction (records produced, not committed), and once more just after
  Kafka committed it (the sink's ``commit`` not returned);
- Kafka -> Kafka at-least-once: nothing lost, nothing that is not an input record;
  ``mid_sink`` kills at the first ``flush()`` of the batch (records handed to the client,
  delivery not confirmed).

Elsewhere ``mid_sink`` is the testkit's "after the first part was written", as
``sink_write_done``.

After each kill the tests check what the killed run left visible, which proves that the process
died where it was meant to and that the run before recovered from its own kill.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch_testkit import crash

SCRIPT = Path(__file__).parent / "scripts" / "kafka_crash_pipeline.py"
sys.path.insert(0, str(SCRIPT.parent))
import kafka_crash_pipeline as pipeline_script  # noqa: E402

PARQUET_KILLS = [(phase, "") for phase in crash.PHASES]
EOS_KILLS = [
    ("offsets_written", ""),
    ("mid_sink", "txn-open"),
    ("mid_sink", "txn-done"),
    ("sink_write_done", ""),
    ("sink_committed", ""),
    ("batch_committed", ""),
]
ALO_KILLS = [
    ("offsets_written", ""),
    ("mid_sink", "before-flush"),
    ("sink_write_done", ""),
    ("sink_committed", ""),
    ("batch_committed", ""),
]
"""Where each pipeline is killed, one kill per batch from batch 1 on: (phase, crash point in
the Kafka client, see ``scripts/kafka_crash_pipeline.py``)."""
PARTITIONS, LIMIT = 3, 30
PER_BATCH = LIMIT // PARTITIONS  # equal backlogs: Spark's shares are exactly 10 per partition
PER_PARTITION = PER_BATCH * (max(map(len, (PARQUET_KILLS, EOS_KILLS, ALO_KILLS))) + 2)
COMMITTED_PHASES = ("sink_committed", "batch_committed")
"""Phases after the sink's commit: the killed batch is in the output already."""

Origin = tuple[str, int, int]
"""(topic, partition, offset) of an input record."""


def produce_input(bootstrap: str, topic: str) -> dict[Origin, tuple[bytes, bytes]]:
    """PER_PARTITION records into each partition; ``{origin: (key, value)}``."""
    from confluent_kafka import Producer

    written: dict[Origin, tuple[bytes, bytes]] = {}
    failed: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            origin = (message.topic(), message.partition(), message.offset())
            written[origin] = (message.key(), message.value())

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for index in range(PER_PARTITION):
            producer.produce(
                topic,
                key=f"k{partition}-{index}".encode(),
                value=f"value {partition}-{index} {uuid.uuid4().hex}".encode(),
                partition=partition,
                on_delivery=delivered,
            )
    assert producer.flush(30) == 0 and not failed, failed
    assert len(written) == PARTITIONS * PER_PARTITION
    return written


def end_offsets(bootstrap: str, topic: str, *, committed: bool) -> dict[int, int]:
    """Per partition: the last stable offset (``committed``) or the high watermark."""
    return pipeline_script.end_offsets(bootstrap, topic, PARTITIONS, committed=committed)


def read_topic(
    bootstrap: str, topic: str, *, committed: bool = True
) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` as ``(key, value)``, read from the beginning with
    ``read_committed`` (up to the last stable offset) or ``read_uncommitted``."""
    return pipeline_script.read_topic(bootstrap, topic, PARTITIONS, committed=committed)


def read_parquet(output: Path) -> list[tuple[Origin, tuple[bytes, bytes]]]:
    """Every row of the parquet sink (through its manifest) as ``(origin, (key, value))``."""
    if not output.exists():
        return []
    table = mb.Session().read.format("parquet").load(str(output))
    names = ("topic", "partition", "offset", "key", "value")
    columns = [table.column(name).to_pylist() for name in names]
    return [((t, p, o), (k, v)) for t, p, o, k, v in zip(*columns, strict=True)]


def first_batches(written: dict[Origin, tuple[bytes, bytes]], batches: int) -> set[Origin]:
    """The origins of the records in batches ``0 .. batches - 1``."""
    return {origin for origin in written if origin[2] < batches * PER_BATCH}


def from_topic(records: list[tuple[bytes, bytes]]) -> list[tuple[Origin, bytes]]:
    """Output records (key ``"topic/partition/offset"``) as ``(origin, value)``."""
    found = []
    for key, value in records:
        topic, partition, offset = key.decode().rsplit("/", 2)
        found.append(((topic, int(partition), int(offset)), value))
    return found


def assert_exactly_once(
    found: list[tuple[Origin, bytes]], written: dict[Origin, tuple[bytes, bytes]]
) -> None:
    counts = Counter(origin for origin, _ in found)
    doubled = sorted(origin for origin, count in counts.items() if count > 1)
    lost = sorted(set(written) - set(counts))
    bad = [(o, v) for o, v in found if o not in written or written[o][1] != v]
    assert not lost, f"{len(lost)} records lost, e.g. {lost[:5]}"
    assert not doubled, f"{len(doubled)} records written more than once, e.g. {doubled[:5]}"
    assert not bad, f"{len(bad)} records match no input record, e.g. {bad[:3]}"


@pytest.fixture
def pipeline(
    kafka_service: Any, make_kafka_topic: Callable[..., str], tmp_path: Path
) -> dict[str, Any]:
    """An input topic with its records written, a checkpoint folder and an output topic."""
    bootstrap = kafka_service.bootstrap_servers
    source = make_kafka_topic(PARTITIONS)
    return {
        "bootstrap": bootstrap,
        "source": source,
        "written": produce_input(bootstrap, source),
        "output_topic": make_kafka_topic(PARTITIONS),
        "checkpoint": tmp_path / "checkpoint",
        "folder": tmp_path / "out",
    }


def args_for(pipeline: dict[str, Any], sink: str, at: str = "") -> list[str]:
    output = pipeline["folder"] if sink == "parquet" else pipeline["output_topic"]
    args = [sink, pipeline["bootstrap"], pipeline["source"], output, pipeline["checkpoint"]]
    return [*map(str, args), str(LIMIT), *([at] if at else [])]


def kill_in_turn(
    pipeline: dict[str, Any],
    sink: str,
    kills: list[tuple[str, str]],
    check_killed: Callable[[str, str, int], None],
) -> None:
    """Kill the pipeline at ``kills[i]`` (phase, crash point in the client) of batch
    ``i + 1``, each run restarting from the checkpoint the last one left, calling
    ``check_killed(phase, at, batch)`` after each kill; then run it to completion."""
    for index, (phase, at) in enumerate(kills):
        batch = index + 1
        killed = crash.run_until_crash(
            SCRIPT, phase, batch, args=args_for(pipeline, sink, at), timeout=180
        )
        assert f"at {phase}:{batch}" in killed.stderr
        check_killed(phase, at, batch)
    crash.run_to_completion(SCRIPT, args=args_for(pipeline, sink), timeout=180)


def test_kafka_to_parquet_is_exactly_once_after_sigkills(pipeline: dict[str, Any]) -> None:
    written, output = pipeline["written"], pipeline["folder"]

    def check_killed(phase: str, at: str, batch: int) -> None:
        batches = batch + (1 if phase in COMMITTED_PHASES else 0)
        found = sorted(origin for origin, _ in read_parquet(output))
        assert found == sorted(first_batches(written, batches)), f"killed at {phase}:{batch}"

    kill_in_turn(pipeline, "parquet", PARQUET_KILLS, check_killed)

    rows = read_parquet(output)
    assert all(key == written[origin][0] for origin, (key, _) in rows if origin in written)
    assert_exactly_once([(origin, value) for origin, (_, value) in rows], written)


def test_kafka_to_kafka_exactly_once_after_sigkills(pipeline: dict[str, Any]) -> None:
    bootstrap, topic, written = pipeline["bootstrap"], pipeline["output_topic"], pipeline["written"]

    def check_killed(phase: str, at: str, batch: int) -> None:
        where = f"killed at {phase}:{batch} {at}"
        committed = phase in COMMITTED_PHASES or at == "txn-done"
        visible = sorted(origin for origin, _ in from_topic(read_topic(bootstrap, topic)))
        assert visible == sorted(first_batches(written, batch + (1 if committed else 0))), where
        stable = end_offsets(bootstrap, topic, committed=True)
        high = end_offsets(bootstrap, topic, committed=False)
        if at == "txn-open":  # the killed writer's transaction is open: it holds readers back
            assert stable != high, f"{where}: no open transaction, LSO {stable} = {high}"
        else:
            assert stable == high, f"{where}: a transaction is open, LSO {stable} < {high}"

    kill_in_turn(pipeline, "eos", EOS_KILLS, check_killed)

    assert_exactly_once(from_topic(read_topic(bootstrap, topic)), written)
    stable = end_offsets(bootstrap, topic, committed=True)
    assert stable == end_offsets(bootstrap, topic, committed=False), "a transaction is open"
    # the transaction killed open was aborted: read_uncommitted readers see its records
    uncommitted = from_topic(read_topic(bootstrap, topic, committed=False))
    assert len(uncommitted) >= len(written) + LIMIT, "the killed transaction left nothing"


def test_kafka_to_kafka_at_least_once_loses_nothing_after_sigkills(
    pipeline: dict[str, Any],
) -> None:
    bootstrap, topic, written = pipeline["bootstrap"], pipeline["output_topic"], pipeline["written"]

    def check_killed(phase: str, at: str, batch: int) -> None:
        where = f"killed at {phase}:{batch} {at}"
        visible = {origin for origin, _ in from_topic(read_topic(bootstrap, topic))}
        before, through = first_batches(written, batch), first_batches(written, batch + 1)
        if phase == "offsets_written":
            assert visible == before, where
        elif phase in COMMITTED_PHASES:
            assert visible == through, where
        elif at == "before-flush":  # handed to the client: some may have been delivered
            assert before <= visible <= through, where
        else:  # killed after the first part of the batch was delivered
            assert before < visible <= through, where

    kill_in_turn(pipeline, "alo", ALO_KILLS, check_killed)

    found = from_topic(read_topic(bootstrap, topic))
    assert set(written) <= {origin for origin, _ in found}, "records lost"
    bad = [(o, v) for o, v in found if o not in written or written[o][1] != v]
    assert not bad, f"{len(bad)} records match no input record, e.g. {bad[:3]}"

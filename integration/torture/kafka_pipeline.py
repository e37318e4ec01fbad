"""One Kafka pipeline of the torture run, run in a child process and killed at random.

Usage: python kafka_pipeline.py KIND MODE WORKDIR

KIND is ``kafka-parquet`` (a Kafka topic -> the parquet file sink, every source column),
``kafka-kafka-eos`` (-> a Kafka topic with ``exactlyOnce=true``) or ``kafka-kafka-alo`` (-> a
Kafka topic, at-least-once). The broker's address and the topics are in
``WORKDIR/KIND/kafka.json``, written by ``run_torture.py``. Into a topic, each record's key is
its origin ``"<topic>/<partition>/<offset>"`` and its value the input value. The source reads
``read_committed`` (the input holds aborted transactions), from the earliest offsets,
``maxOffsetsPerTrigger`` records per batch.

MODE is ``stream`` (default trigger, run until killed; prints ``READY`` once started) or
``drain`` (available-now, then exit 0). The testkit's crash hook is armed. Into a topic,
``MICROBATCH_TORTURE_TXN_KILL`` moves the ``mid_sink`` crash point into the Kafka client:
``open`` just before ``commit_transaction()`` (records produced, transaction open), ``done``
just after it returned, ``flush`` at the batch's first ``flush()`` (records handed to the
client, delivery not confirmed). Unset, ``mid_sink`` is "after the first part was written".
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_testkit import crash

DRAIN_TIMEOUT = 300.0
MAX_OFFSETS_PER_TRIGGER = 25
TXN_KILL_VAR = "MICROBATCH_TORTURE_TXN_KILL"


class BatchTracker:
    """The id of the batch the query runs (the producer does not know it)."""

    current = -1

    @mb.hookimpl
    def microbatch_batch_phase(self, query_id: str, batch_id: int, phase: str) -> None:
        if phase == "offsets_written":
            BatchTracker.current = batch_id


def kill_inside_client(when: str) -> None:
    """Call ``crash_point("mid_sink", batch)`` in every producer where ``when`` says."""
    import confluent_kafka

    class CrashingProducer(confluent_kafka.Producer):  # type: ignore[misc]
        def flush(self, *args: Any) -> Any:
            if when == "flush":
                crash.crash_point("mid_sink", BatchTracker.current)
            return super().flush(*args)

        def commit_transaction(self, *args: Any) -> Any:
            if when == "open":  # every record at the broker, in the open transaction
                super().flush(30)
                crash.crash_point("mid_sink", BatchTracker.current)
            result = super().commit_transaction(*args)
            if when == "done":
                crash.crash_point("mid_sink", BatchTracker.current)
            return result

    confluent_kafka.Producer = CrashingProducer  # type: ignore[misc]


def build(session: mb.Session, kind: str, base: Path, setup: dict[str, str], drain: bool) -> Any:
    """Start the query of pipeline ``kind``; return it."""
    bootstrap = setup["bootstrap"]
    frame = (
        session.read_stream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", setup["input"])
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
        .load()
    )
    if kind == "kafka-parquet":
        writer = frame.write_stream.format("parquet").option("path", str(base / "out"))
    else:
        origin = pc.binary_join_element_wise(
            pc.field("topic"),
            pc.field("partition").cast(pa.string()),
            pc.field("offset").cast(pa.string()),
            "/",
        )
        writer = (
            frame.select(key=origin, value=pc.field("value"))
            .write_stream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", setup["output"])
            .option("exactlyOnce", kind == "kafka-kafka-eos")
        )
    writer = writer.option("checkpointLocation", str(base / "checkpoint"))
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start()


def main(kind: str, mode: str, workdir: str) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    base = Path(workdir) / kind
    setup = json.loads((base / "kafka.json").read_text())
    when = os.environ.get(TXN_KILL_VAR, "")
    in_client = kind != "kafka-parquet" and when in ("open", "done", "flush")
    if in_client:
        kill_inside_client(when)
    session = mb.Session()
    crash.arm(session, mid_sink_in_script=in_client)
    session.registry.plugin_manager.register(BatchTracker(), name="torture-batch-tracker")
    query = build(session, kind, base, setup, drain=mode == "drain")
    if mode == "stream":
        print("READY", flush=True)
        query.await_termination()
        sys.stderr.write("TORTURE: a streaming query ended on its own\n")
    elif not query.await_termination(DRAIN_TIMEOUT):
        sys.stderr.write(f"TORTURE: the drain did not finish in {DRAIN_TIMEOUT} s\n")
        return 3
    error = query.exception()
    if error is not None:
        sys.stderr.write("TORTURE: the query failed\n")
        traceback.print_exception(error, file=sys.stderr)
        return 1
    return 0 if mode == "drain" else 2


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] not in ("stream", "drain"):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:4]))

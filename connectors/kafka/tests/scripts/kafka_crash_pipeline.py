"""A crash-test pipeline: a Kafka topic -> the parquet sink or a Kafka topic, available-now.

Usage: python kafka_crash_pipeline.py SINK BOOTSTRAP INPUT_TOPIC OUTPUT CHECKPOINT LIMIT [AT]

SINK is ``parquet`` (OUTPUT is a folder; every source column is written), ``eos`` (OUTPUT is a
topic, ``exactlyOnce=true``) or ``alo`` (OUTPUT is a topic, the default at-least-once mode).
Into a topic the record's key is its origin, ``"<topic>/<partition>/<offset>"``, and its value
the input value. The source reads the input topic from the earliest offsets,
``maxOffsetsPerTrigger=LIMIT`` records per batch, with the available-now trigger.

The testkit's crash hook is armed (``MICROBATCH_CRASH_AT``). ``AT`` moves the ``mid_sink``
crash point into the Kafka client: ``txn-open`` / ``txn-done`` just before
``commit_transaction()`` (the batch's records are produced, the transaction is open) or just
after it returned (committed in Kafka, the sink's ``commit`` has not returned);
``before-flush`` at the first ``flush()`` of the batch (records handed to the client, their
delivery not confirmed).
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_testkit import crash


class BatchTracker:
    """Remembers the batch the query is running (the crash point inside the transaction
    needs its id; the producer does not know it)."""

    current = -1

    @mb.hookimpl
    def microbatch_batch_phase(self, query_id: str, batch_id: int, phase: str) -> None:
        if phase == "offsets_written":
            BatchTracker.current = batch_id


def kill_inside_client(at: str) -> None:
    """Make every producer call ``crash_point("mid_sink", batch)`` where ``at`` says."""
    import confluent_kafka

    base = confluent_kafka.Producer

    class CrashingProducer(base):  # type: ignore[misc, valid-type]
        def flush(self, *args: Any) -> Any:
            if at == "before-flush":
                crash.crash_point("mid_sink", BatchTracker.current)
            return super().flush(*args)

        def commit_transaction(self, *args: Any) -> Any:
            if at == "txn-open":  # every record at the broker, in the open transaction
                super().flush(30)
                crash.crash_point("mid_sink", BatchTracker.current)
            result = super().commit_transaction(*args)
            if at == "txn-done":
                crash.crash_point("mid_sink", BatchTracker.current)
            return result

    confluent_kafka.Producer = CrashingProducer  # type: ignore[misc]


def main(
    sink: str, bootstrap: str, topic: str, output: str, checkpoint: str, limit: str, at: str = ""
) -> None:
    if at:
        kill_inside_client(at)
    session = mb.Session()
    crash.arm(session, mid_sink_in_script=bool(at))
    session.registry.plugin_manager.register(BatchTracker(), name="batch-tracker")
    frame = (
        session.read_stream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", int(limit))
        .load()
    )
    if sink == "parquet":
        writer = frame.write_stream.format("parquet").option("path", output)
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
            .option("topic", output)
            .option("exactlyOnce", sink == "eos")
        )
    query = writer.option("checkpointLocation", checkpoint).trigger(available_now=True).start()
    query.await_termination(60)
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    if query.is_active:
        raise SystemExit("the available-now query did not finish in 60 s")


if __name__ == "__main__":
    main(*sys.argv[1:])

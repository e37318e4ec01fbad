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
from pathlib import Path
from typing import Any

import microbatch as mb
from microbatch_testkit import crash

# the connector's crash-test pipeline, which these extend with a streaming mode
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "connectors/kafka/tests/scripts"))
from kafka_crash_pipeline import kill_inside_client, start_query
from pipeline import finish

MAX_OFFSETS_PER_TRIGGER = 25
TXN_KILL_VAR = "MICROBATCH_TORTURE_TXN_KILL"
SINKS = {"kafka-parquet": "parquet", "kafka-kafka-eos": "eos", "kafka-kafka-alo": "alo"}
"""The sink of the connector's crash-test pipeline that each kind runs."""
IN_CLIENT = {"open": "txn-open", "done": "txn-done", "flush": "before-flush"}
"""``MICROBATCH_TORTURE_TXN_KILL`` -> where the crash-test pipeline kills in the client."""


def build(session: mb.Session, kind: str, base: Path, setup: dict[str, str], drain: bool) -> Any:
    """Start the query of pipeline ``kind``; return it."""
    output = str(base / "out") if kind == "kafka-parquet" else setup["output"]
    return start_query(
        session,
        SINKS[kind],
        setup["bootstrap"],
        setup["input"],
        output,
        str(base / "checkpoint"),
        MAX_OFFSETS_PER_TRIGGER,
        drain=drain,
        source_options={"kafka.isolation.level": "read_committed"},
    )


def main(kind: str, mode: str, workdir: str) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    base = Path(workdir) / kind
    setup = json.loads((base / "kafka.json").read_text())
    when = os.environ.get(TXN_KILL_VAR, "")
    in_client = kind != "kafka-parquet" and when in IN_CLIENT
    if in_client:
        kill_inside_client(IN_CLIENT[when])
    session = mb.Session()
    crash.arm(session, mid_sink_in_script=in_client)
    query = build(session, kind, base, setup, drain=mode == "drain")
    return finish(query, mode)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] not in ("stream", "drain"):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:4]))

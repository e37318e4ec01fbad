"""The sink's ``kafka.*`` settings are checked by the Kafka client when the query starts: an
unknown or invalid one is an ``OptionError`` naming the ``kafka.`` option, before any batch,
and the check asks no broker and leaves no client behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from microbatch import OptionError, WriteContext
from microbatch_kafka.sink import KafkaSink

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import run_into_kafka

NOWHERE = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
SCHEMA = pa.schema([("value", pa.string())])


def _threads() -> list[str]:
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
        except OSError:
            pass
    return names


def _start(**options: str) -> None:
    parsed = KafkaSink.options.parse({**NOWHERE, **options}, connector="kafka")
    KafkaSink(parsed).stream_writer(WriteContext(schema=SCHEMA, query_id="q")).stop()


@pytest.mark.parametrize("exactly_once", [False, True])
@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("kafka.no.such.prop", "1", 'No such configuration property: "no.such.prop"'),
        ("kafka.Linger.Ms", "soon", "Invalid value"),  # librdkafka names its alias
        ("kafka.compression.type", "zzz", 'Invalid value "zzz"'),
    ],
)
def test_a_setting_the_client_refuses_is_an_option_error_at_start(
    option: str, value: str, said: str, exactly_once: bool
) -> None:
    extra = {"exactlyOnce": "true"} if exactly_once else {}
    with pytest.raises(OptionError) as raised:
        _start(**{option: value}, **extra)
    text = str(raised.value)
    assert f"Kafka option 'kafka.{option[6:].lower()}'" in text and said in text, text


def test_a_secret_in_a_refused_setting_is_not_shown() -> None:
    with pytest.raises(OptionError) as raised:
        _start(
            **{"kafka.sasl.password": "Hunter2Secret", "kafka.security.protocol": "Hunter2Secret"}
        )
    assert "Hunter2Secret" not in str(raised.value)
    assert "'kafka.security.protocol'" in str(raised.value)


_THREAD_CHECK = """
import gc
import sys
import time
sys.path.insert(0, sys.argv[1])
import test_sink_options as t
t._start(**{"kafka.linger.ms": "5"})  # the first client loads what stays loaded
before = sorted(t._threads())
t._start(**{"kafka.linger.ms": "5", "kafka.acks": "all"})
t._start(**{"kafka.linger.ms": "5", "exactlyOnce": "true"})
deadline = time.monotonic() + 30  # librdkafka's threads end after close(), later under load
while sorted(t._threads()) != before and time.monotonic() < deadline:
    gc.collect()  # a client held in a reference cycle ends its threads when it is collected
    time.sleep(0.05)
after = sorted(t._threads())
print(before == after, before, after)
"""


def test_the_check_asks_no_broker_and_leaves_no_thread() -> None:
    # in a process of its own: other tests' clients may start or end threads at any time
    done = subprocess.run(
        [sys.executable, "-c", _THREAD_CHECK, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True"), done.stdout


def test_start_refuses_it_before_any_batch(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=re.escape("'kafka.no.such.prop'")):
        run_into_kafka(
            [pa.table({"value": ["a"]})], {**NOWHERE, "kafka.no.such.prop": "1"}, str(tmp_path)
        )

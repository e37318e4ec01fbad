"""``exactlyOnce=true`` against a real broker: a replayed batch is written once for
read_committed consumers, a second writer of the query fences the first, a lost batch marker
is detected and handled as documented, and an empty batch commits."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from microbatch import (
    PartContext,
    RetriableError,
    SinkError,
    StateStore,
    StreamWriter,
    WriteContext,
)
from microbatch.errors import cause_chain
from microbatch_kafka._transactions import STATE_FILE
from microbatch_kafka.sink import KafkaSink

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, run_into_kafka

SCHEMA = pa.schema([("value", pa.string())])


class Query:
    """Writers of one query (one id, one state folder), as its runs make them."""

    def __init__(self, kafka: Any, topic: str, state: StateStore, **options: str) -> None:
        self.kafka = kafka
        self.topic = topic
        self.state = state
        self.id = f"eos-{uuid.uuid4().hex[:12]}"
        self.writers: list[StreamWriter] = []
        self.options = {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "topic": topic,
            "exactlyOnce": "true",
            **options,
        }

    @property
    def group(self) -> str:
        return f"microbatch-{self.id}-batches"

    def writer(self, last_committed: int | None = None, **options: str) -> StreamWriter:
        parsed = KafkaSink.options.parse({**self.options, **options}, connector="kafka")
        context = WriteContext(
            schema=SCHEMA,
            query_id=self.id,
            state=self.state,
            last_committed_batch_id=last_committed,
        )
        writer = KafkaSink(parsed).stream_writer(context)
        self.writers.append(writer)
        return writer

    def commit(self, writer: StreamWriter, batch_id: int, values: list[str]) -> None:
        table = pa.table({"value": values}, schema=SCHEMA)
        reader = pa.RecordBatchReader.from_batches(SCHEMA, table.to_batches())
        message = writer.part_writer().write(reader, PartContext(batch_id, 0, 1, self.id))
        writer.commit([message], batch_id)

    def committed_values(self) -> list[str]:
        return [r["value"].decode() for r in read_records(self.kafka, self.topic)]

    def marker(self) -> int:
        consumer = Consumer(self.kafka.client_config(**{"group.id": self.group}))
        try:
            return consumer.committed([TopicPartition(self.topic, 0)], timeout=10)[0].offset
        finally:
            consumer.close()

    def delete_marker_group(self) -> None:
        """What Kafka does offsets.retention.minutes after the group's last commit."""
        futures = self.kafka.admin().delete_consumer_groups([self.group], request_timeout=10)
        futures[self.group].result()

    def commit_killed_before_kafka_commits(self, batch_id: int, values: list[str]) -> None:
        """Commit in a forked child that is SIGKILLed at ``commit_transaction``: its records
        and marker are sent, its transaction is left open (a real crash)."""
        pid = os.fork()
        if pid == 0:
            try:
                writer = self.writer(last_committed=batch_id - 1 if batch_id else None)
                transactions = writer._ensure()  # type: ignore[attr-defined]
                real_call = transactions._call

                def dying(call: Any, what: str) -> Any:
                    if what == "commit_transaction":
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real_call(call, what)

                transactions._call = dying
                self.commit(writer, batch_id, values)
            finally:
                os._exit(3)  # reached only when the kill did not happen
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


@pytest.fixture
def query(tmp_path: Path, kafka_service: Any, make_kafka_topic: Any) -> Iterator[Query]:
    made = Query(kafka_service, make_kafka_topic(2), StateStore(str(tmp_path / "state")))
    yield made
    for writer in made.writers:  # as the engine does at the end of every run
        writer.stop()


def test_a_replayed_batch_is_not_written_twice(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(2)
    checkpoint = tmp_path / "cp"
    options = {
        "kafka.bootstrap.servers": kafka_service.bootstrap_servers,
        "topic": topic,
        "exactlyOnce": "true",
    }
    batches = [pa.table({"value": [f"{b}-{i}" for i in range(5)]}) for b in range(2)]
    assert run_into_kafka(batches, options, str(checkpoint)).exception() is None
    # the sink committed batch 1 but the commit log lost it: the next run replays batch 1
    (checkpoint / "commits" / "1").unlink()
    more = [*batches, pa.table({"value": ["2-0"]})]
    assert run_into_kafka(more, options, str(checkpoint)).exception() is None
    expected = sorted(v for table in more for v in table.column("value").to_pylist())
    seen = [r["value"].decode() for r in read_records(kafka_service, topic)]
    assert sorted(seen) == expected
    # not even sent again: read_uncommitted readers see each record once too
    uncommitted = read_records(kafka_service, topic, isolation="read_uncommitted")
    assert sorted(r["value"].decode() for r in uncommitted) == expected


def test_a_second_writer_of_the_query_fences_the_first(query: Query) -> None:
    first = query.writer()
    query.commit(first, 0, ["a"])
    second = query.writer(last_committed=0)
    query.commit(second, 1, ["b"])
    with pytest.raises(SinkError, match=r"fenced .*is this query running twice") as raised:
        query.commit(first, 2, ["zombie"])
    assert f"transactional.id 'microbatch-{query.id}'" in str(raised.value)
    assert "is this query running twice?" in str(raised.value)
    first.stop()
    first.stop()
    query.commit(second, 2, ["c"])
    assert sorted(query.committed_values()) == ["a", "b", "c"]
    second.stop()


def test_an_empty_batch_commits_its_marker(query: Query) -> None:
    writer = query.writer()
    writer.commit([], 0)
    assert query.marker() == 1
    query.commit(writer, 1, [])
    assert query.marker() == 2
    query.commit(writer, 2, ["x"])
    writer.commit([], 0)  # a replay of an applied batch: skipped, the marker stays
    assert query.marker() == 3
    assert query.committed_values() == ["x"]


def test_a_lost_marker_after_a_committed_batch_is_recovered_from_the_state(
    query: Query, caplog: pytest.LogCaptureFixture
) -> None:
    writer = query.writer()
    query.commit(writer, 0, ["a"])
    query.commit(writer, 1, ["b"])
    writer.stop()
    query.delete_marker_group()
    assert query.marker() < 0
    again = query.writer(last_committed=0)
    with caplog.at_level(logging.WARNING, logger="microbatch.kafka.sink"):
        query.commit(again, 1, ["b"])  # replayed after the loss: still applied once
    assert "is missing (expired after offsets.retention.minutes" in caplog.text
    assert "batch 1 was committed last" in caplog.text
    query.commit(again, 2, ["c"])
    assert sorted(query.committed_values()) == ["a", "b", "c"]
    assert query.marker() == 3


def test_the_first_batch_killed_inside_its_commit_is_written_once(query: Query) -> None:
    query.commit_killed_before_kafka_commits(0, ["a", "b"])
    writer = query.writer()
    query.commit(writer, 0, ["a", "b"])  # no marker yet: it never committed
    assert sorted(query.committed_values()) == ["a", "b"]


@pytest.mark.parametrize("policy", ["fail", "rewrite", "skip"])
def test_a_lost_marker_of_a_batch_being_committed_is_reported(query: Query, policy: str) -> None:
    first = query.writer()
    query.commit(first, 0, ["a"])
    first.stop()
    query.commit_killed_before_kafka_commits(1, ["b"])
    query.delete_marker_group()  # as if the query stayed down beyond the retention
    writer = query.writer(last_committed=0, exactlyOnceUnknownBatch=policy)
    if policy == "fail":
        with pytest.raises(SinkError) as raised:
            query.commit(writer, 1, ["b"])
        text = str(raised.value)
        assert "Batch 1 was being committed to Kafka when the query stopped" in text
        assert f"group '{query.group}'" in text and "offsets.retention.minutes" in text
        assert "exactlyOnceUnknownBatch=rewrite" in text and "exactlyOnceUnknownBatch=skip" in text
        assert query.committed_values() == ["a"]
        return
    query.commit(writer, 1, ["b"])
    expected = ["a", "b"] if policy == "rewrite" else ["a"]
    assert sorted(query.committed_values()) == expected
    query.commit(writer, 2, ["c"])
    assert sorted(query.committed_values()) == [*expected, "c"]


def test_a_killed_commit_is_settled_by_the_next_writer(query: Query) -> None:
    first = query.writer()
    query.commit(first, 0, ["a"])
    query.commit_killed_before_kafka_commits(1, ["b"])
    assert query.committed_values() == ["a"]  # the open transaction is invisible
    writer = query.writer(last_committed=0)
    query.commit(writer, 1, ["b"])
    assert sorted(query.committed_values()) == ["a", "b"]
    first.stop()


UNSETTLED_TIMEOUT = "5 seconds"  # a stable read of the marker waits that long, then 3 s more


@contextlib.contextmanager
def _unsettled_commit(query: Query, batch_id: int) -> Iterator[None]:
    """A commit of the marker of ``batch_id`` to the query's group that stays pending: a
    stable read of the group waits for it, as for a commit a broker left hanging. Made by
    another transactional writer whose transaction stays open (aborted on the way out)."""
    producer = Producer(
        query.kafka.client_config(
            **{
                "transactional.id": f"unsettled-{uuid.uuid4().hex[:8]}",
                "transaction.timeout.ms": 300_000,
            }
        )
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    group = Consumer(query.kafka.client_config(**{"group.id": query.group}))
    try:
        marker = TopicPartition(query.topic, 0, batch_id + 1)
        producer.send_offsets_to_transaction([marker], group.consumer_group_metadata(), 30)
        yield
    finally:
        producer.abort_transaction(30)
        group.close()


def test_a_marker_commit_that_never_settles_is_resolved_from_the_state(
    query: Query, caplog: pytest.LogCaptureFixture
) -> None:
    """Batch 2 landed and its marker's commit hangs: the restarted writer, whose stable read
    of the marker never answers, takes batch 2 as applied from its record and goes on."""
    writer = query.writer()
    query.commit(writer, 0, ["a"])
    query.commit(writer, 1, ["b"])
    writer.stop()
    with _unsettled_commit(query, 2):
        landed = Producer(query.kafka.client_config())
        landed.produce(query.topic, b"c")
        assert landed.flush(30) == 0
        query.state.write(STATE_FILE, {"batch": 2, "phase": "committed", "at": time.time()})
        again = query.writer(last_committed=2, exactlyOnceTimeout=UNSETTLED_TIMEOUT)
        with caplog.at_level(logging.WARNING, logger="microbatch.kafka.sink"):
            query.commit(again, 2, ["c"])  # replayed: applied already
            query.commit(again, 3, ["d"])
    assert "did not settle within 5 s" in caplog.text
    assert "The settled batch marker says batch 1; batches up to 2 are applied" in caplog.text
    assert sorted(query.committed_values()) == ["a", "b", "c", "d"]


def test_a_marker_commit_that_never_settles_after_the_last_batch_is_not_this_writers(
    query: Query, caplog: pytest.LogCaptureFixture
) -> None:
    writer = query.writer()
    query.commit(writer, 0, ["a"])
    writer.stop()
    with _unsettled_commit(query, 0):
        again = query.writer(last_committed=0, exactlyOnceTimeout=UNSETTLED_TIMEOUT)
        with caplog.at_level(logging.WARNING, logger="microbatch.kafka.sink"):
            query.commit(again, 0, ["a"])  # replayed: applied already
            query.commit(again, 1, ["b"])
    assert "The settled batch marker says batch 0; batches up to 0 are applied" in caplog.text
    assert sorted(query.committed_values()) == ["a", "b"]


@pytest.mark.parametrize("failing_call", ["flush", "commit_transaction"])
def test_a_marker_commit_that_never_settles_after_a_failed_attempt(
    query: Query, failing_call: str
) -> None:
    """A batch's attempt fails, then its retry meets a marker commit that does not settle.
    Failed before its commit_transaction() (its flush): the batch did not land, and is
    written. Failed in it without an answer: the batch may be in the topic (here it is
    not), so exactlyOnceUnknownBatch (fail) decides rather than write it again."""
    writer = query.writer(exactlyOnceTimeout=UNSETTLED_TIMEOUT)
    query.commit(writer, 0, ["a"])
    transactions = writer._ensure()  # type: ignore[attr-defined]
    real_call = transactions._call
    failures = [failing_call]

    def failing(call: Any, what: str) -> Any:
        if what in failures:
            failures.remove(what)
            if what == "flush":
                raise SinkError(f"{what} failed") from RetriableError(f"{what} failed")

            def unanswered() -> None:  # whether the commit landed is not known
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

            return real_call(unanswered, what)
        return real_call(call, what)

    transactions._call = failing
    with _unsettled_commit(query, 1):
        with pytest.raises(SinkError, match=f"{failing_call} failed"):
            query.commit(writer, 1, ["b"])
        if failing_call == "flush":
            query.commit(writer, 1, ["b"])  # the engine's retry
        else:
            with pytest.raises(SinkError, match="A commit of batch 1 to Kafka may have been sent"):
                query.commit(writer, 1, ["b"])
    expected = ["a", "b"] if failing_call == "flush" else ["a"]
    assert sorted(query.committed_values()) == expected


def test_a_marker_commit_that_never_settles_for_a_batch_being_committed_is_reported(
    query: Query,
) -> None:
    """After a restart, a batch recorded as being committed may be the one whose marker
    commit hangs: exactlyOnceUnknownBatch (fail) decides."""
    writer = query.writer()
    query.commit(writer, 0, ["a"])
    writer.stop()
    with _unsettled_commit(query, 1):
        record = {"batch": 1, "phase": "committing", "previous": 0, "at": time.time()}
        query.state.write(STATE_FILE, record)
        again = query.writer(last_committed=0, exactlyOnceTimeout=UNSETTLED_TIMEOUT)
        with pytest.raises(SinkError) as raised:
            query.commit(again, 1, ["b"])
    text = str(raised.value)
    assert "A commit of batch 1 to Kafka may have been sent (by an earlier run" in text
    assert f"a transactional commit to group '{query.group}' did not settle" in text
    assert "exactlyOnceUnknownBatch=rewrite" in text
    assert query.committed_values() == ["a"]


def test_a_marker_ahead_of_the_checkpoint_is_refused(query: Query) -> None:
    writer = query.writer()
    for batch_id in range(3):
        query.commit(writer, batch_id, [str(batch_id)])
    restored = query.writer(last_committed=0)  # an older copy of the checkpoint
    with pytest.raises(SinkError, match="this checkpoint committed only up to batch 0"):
        query.commit(restored, 1, ["1"])


def test_a_missing_marker_topic_is_a_clear_error(query: Query) -> None:
    writer = query.writer(exactlyOnceMarkerTopic=f"absent-{uuid.uuid4().hex[:8]}")
    with pytest.raises(SinkError, match=r"exactly-once marker topic 'absent-.*' does not exist"):
        query.commit(writer, 0, ["a"])


def test_a_running_query_without_batches_commits_its_marker_again(query: Query) -> None:
    writer = query.writer()
    transactions = writer._ensure()  # type: ignore[attr-defined]
    transactions._refresh_seconds = 0.4  # a day in production
    query.commit(writer, 0, ["a"])
    query.delete_marker_group()  # as retention would, were it not refreshed
    deadline = time.monotonic() + 30
    while query.marker() != 1:
        assert time.monotonic() < deadline, "the marker was not committed again"
        time.sleep(0.1)
    query.commit(writer, 0, ["a"])  # still known as applied
    assert query.committed_values() == ["a"]


def test_a_retry_after_several_batches_of_a_restarted_run_goes_on(query: Query) -> None:
    """A restarted run (last committed batch 0) that commits batches 1-3, then drops its
    producer after a retriable failure: the retry reads the marker (3) again, which is its
    own work, not batches 'this checkpoint never committed'."""
    first = query.writer()
    query.commit(first, 0, ["0"])
    first.stop()
    writer = query.writer(last_committed=0)
    for batch_id in (1, 2, 3):
        query.commit(writer, batch_id, [str(batch_id)])
    writer._ensure()._drop()  # type: ignore[attr-defined]  # what every retriable failure does
    query.commit(writer, 4, ["4"])  # the engine's retry of batch 4
    query.commit(writer, 3, ["3"])  # and a replay is still skipped
    assert sorted(query.committed_values()) == ["0", "1", "2", "3", "4"]


def test_a_transaction_longer_than_its_timeout_says_so_and_is_retried_once(
    query: Query,
) -> None:
    """The broker aborts a transaction older than transaction.timeout.ms by bumping the
    producer's epoch, which the producer sees as being fenced. The clock is moved and the
    epoch bumped by hand (a real fence), rather than waiting for the broker's abort."""
    from confluent_kafka import Producer

    writer = query.writer(**{"kafka.transaction.timeout.ms": "10000"})
    transactions = writer._ensure()  # type: ignore[attr-defined]
    query.commit(writer, 0, ["a"])
    now = [time.monotonic()]
    transactions._clock = lambda: now[0]
    real_call = transactions._call

    def slow_batch(call: Any, what: str) -> Any:
        if what == "send_offsets_to_transaction":  # the batch took 30 s: the broker aborts it
            now[0] += 30.0
            bump = Producer(
                query.kafka.client_config(**{"transactional.id": f"microbatch-{query.id}"})
            )
            bump.init_transactions(10)
            bump.close()
        return real_call(call, what)

    transactions._call = slow_batch
    for attempt in (1, 2):
        with pytest.raises(SinkError) as raised:
            query.commit(writer, 1, ["b"])
        text = str(raised.value)
        assert "running twice" not in text, text
        assert "ran 30.0 s, longer than 'kafka.transaction.timeout.ms' (10000 ms)" in text, text
        retriable = any(isinstance(link, RetriableError) for link in cause_chain(raised.value))
        assert retriable == (attempt == 1), text  # the same batch again: it would not end
    transactions._call = real_call
    query.commit(writer, 1, ["b"])
    assert sorted(query.committed_values()) == ["a", "b"]


def test_the_default_transaction_timeout_is_the_brokers_longest() -> None:
    from microbatch_kafka._transactions import transactional_config

    assert transactional_config({}, "t")["transaction.timeout.ms"] == 900_000
    assert (
        transactional_config({"transaction.timeout.ms": "5000"}, "t")["transaction.timeout.ms"]
        == "5000"
    )


def test_a_fenced_writer_stays_fenced_and_never_fences_the_live_one(query: Query) -> None:
    """The zombie learns it is fenced in its idle refresh (which only logs): its next batch
    must fail as fenced, not make a new producer whose init_transactions() fences the live
    writer and writes a batch the live writer owns."""
    first = query.writer()
    query.commit(first, 0, ["a"])
    second = query.writer(last_committed=0)
    query.commit(second, 1, ["b"])  # fences first
    zombie = first._ensure()  # type: ignore[attr-defined]
    zombie._clock = lambda: time.monotonic() + 3600  # idle for an hour: not a timeout
    zombie.refresh()  # the idle refresh is refused (and only logged)
    with pytest.raises(SinkError, match=r"is this query running twice\?"):
        query.commit(first, 2, ["zombie"])
    query.commit(second, 2, ["c"])  # the live writer was not fenced
    assert sorted(query.committed_values()) == ["a", "b", "c"]


def _hanging_producer(
    what: str, *, landed: bool, hung: threading.Event, finish_late: bool = False
) -> type:
    """A producer class whose first ``what`` call hangs as librdkafka's can after a broker
    restart (confluentinc/librdkafka#5456): before it reaches the client, or after the
    client did its work (``landed``). It sets ``hung`` and stays until the process ends or
    ``hung`` is cleared; then it returns (doing the call only then with ``finish_late``)."""
    from confluent_kafka import Producer

    calls: list[str] = []

    def hanging(self: Any, *args: Any) -> Any:
        real = getattr(Producer, what)
        if calls:
            return real(self, *args)
        calls.append(what)
        if landed:
            real(self, *args)
        hung.set()
        while hung.is_set():
            time.sleep(0.05)
        return real(self, *args) if finish_late else None

    return type("HangingProducer", (Producer,), {what: hanging})


def _retired_since(before: list[Any]) -> list[Any]:
    """The producers of this process set aside since ``before`` was taken."""
    from microbatch_kafka import _transactions

    return [e for e in _transactions._RETIRED if e[0] == os.getpid() and e not in before]


@pytest.mark.parametrize(
    ("what", "landed"),
    [
        ("init_transactions", True),
        ("send_offsets_to_transaction", False),
        ("commit_transaction", False),
        ("commit_transaction", True),
    ],
)
def test_a_call_that_hangs_is_abandoned_and_its_batch_retried_once(
    query: Query, monkeypatch: pytest.MonkeyPatch, what: str, landed: bool
) -> None:
    """A transactional call that outlives exactlyOnceTimeout (plus a grace) fails the batch
    as retriable; the retry's new producer fences the stuck one and finds from the marker
    whether the batch landed: every batch is there once. The stuck producer is kept (never
    closed while its call is inside) and closed by a later producer once the call returned."""
    from microbatch_kafka import _transactions

    before = list(_transactions._RETIRED)
    hung = threading.Event()
    producer = _hanging_producer(what, landed=landed, hung=hung)
    monkeypatch.setattr(_transactions, "Producer", producer)
    writer = query.writer(exactlyOnceTimeout="5 seconds")
    try:
        started = time.monotonic()
        with pytest.raises(SinkError, match=f"Kafka {what} did not return within 10 s") as raised:
            query.commit(writer, 0, ["a"])
        assert hung.is_set() and time.monotonic() - started < 40
        assert any(isinstance(link, RetriableError) for link in cause_chain(raised.value))
        query.commit(writer, 0, ["a"])  # the engine's retry of the batch
        query.commit(writer, 1, ["b"])
        stuck = _retired_since(before)
        assert len(stuck) == 1 and stuck[0][2] is not None and stuck[0][2].is_alive(), stuck
    finally:
        hung.clear()  # the abandoned call returns
    assert sorted(query.committed_values()) == ["a", "b"]
    stuck[0][2].join(10)
    query.commit(query.writer(last_committed=1), 2, ["c"])  # a new producer closes it now
    assert _retired_since(before) == []
    assert sorted(query.committed_values()) == ["a", "b", "c"]


def test_an_abandoned_init_that_completes_late_fences_once_and_is_retried(
    query: Query, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An abandoned init_transactions() that gets its producer id after its successor
    started fences the successor: that fence is retried (once), not taken for a second
    writer of the query."""
    from microbatch_kafka import _transactions

    hung = threading.Event()
    producer = _hanging_producer("init_transactions", landed=False, hung=hung, finish_late=True)
    monkeypatch.setattr(_transactions, "Producer", producer)
    writer = query.writer(exactlyOnceTimeout="5 seconds")
    before = list(_transactions._RETIRED)
    with pytest.raises(SinkError, match="init_transactions did not return"):
        query.commit(writer, 0, ["a"])
    query.commit(writer, 0, ["a"])  # the retry's producer starts
    (late,) = _retired_since(before)
    hung.clear()  # the abandoned init_transactions() completes now, bumping the epoch
    late[2].join(30)
    with pytest.raises(SinkError, match="most likely by this writer's own") as raised:
        query.commit(writer, 1, ["b"])
    assert any(isinstance(link, RetriableError) for link in cause_chain(raised.value))
    query.commit(writer, 1, ["b"])
    assert sorted(query.committed_values()) == ["a", "b"]


def test_a_process_killed_after_its_hung_commit_was_abandoned_is_written_once(
    query: Query, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit_transaction landed, then hung past its deadline: the batch failed as retriable
    while the call stays stuck inside the client, and the process is SIGKILLed then. The
    restarted query's retry of that batch finds it applied: written once."""
    from microbatch_kafka import _transactions

    first = query.writer()
    query.commit(first, 0, ["a"])
    first.stop()
    ready, tell = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready)
            hung = threading.Event()
            producer = _hanging_producer("commit_transaction", landed=True, hung=hung)
            monkeypatch.setattr(_transactions, "Producer", producer)
            writer = query.writer(last_committed=0, exactlyOnceTimeout="5 seconds")
            try:
                query.commit(writer, 1, ["b"])
            except SinkError as error:
                if "did not return within" in str(error) and hung.is_set():
                    os.write(tell, b"A")  # abandoned, and the call still hangs
                    time.sleep(60)
        finally:
            os._exit(3)
    os.close(tell)
    try:
        readable, _, _ = select.select([ready], [], [], 60)
        told = os.read(ready, 1) if readable else b""
    finally:
        os.close(ready)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    assert told == b"A", "the child's hung commit was not abandoned in time"
    assert os.WIFSIGNALED(status), status
    writer = query.writer(last_committed=0)  # the restarted query retries batch 1
    query.commit(writer, 1, ["b"])
    query.commit(writer, 2, ["c"])
    assert sorted(query.committed_values()) == ["a", "b", "c"]

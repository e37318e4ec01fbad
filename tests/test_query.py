"""The engine and the query API, driven through the public API with the simplest connectors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import (
    CheckpointError,
    CheckpointInUseError,
    CorruptCheckpointError,
    OptionError,
    StreamingQueryException,
    UnknownFormatError,
    UnsupportedOperationError,
)
from microbatch_memory import MemoryStream
from microbatch_testkit._engine import wait_until

SCHEMA = pa.schema([("value", pa.int64())])


def rate(session: Any, rows: int = 10) -> Any:
    return session.read_stream.format("rate-micro-batch").option("rowsPerBatch", rows).load()


def test_readme_example_memory_sink_and_progress(session: Any, tmp_path: Path) -> None:
    stream = MemoryStream(SCHEMA)
    query = (
        stream.to_frame(session)
        .filter(mb.col("value") >= 10)
        .write_stream.format("memory")
        .query_name("big")
        .trigger(processing_time="100 milliseconds")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    stream.add_data([5, 10, 20])
    query.process_all_available()
    stream.add_data([30, 1])
    query.process_all_available()
    assert session.table("big").column("value").to_pylist() == [10, 20, 30]
    progress = query.last_progress
    assert progress["batchId"] == 1
    assert progress["numInputRows"] == 2
    assert progress["sink"]["numOutputRows"] == 1
    assert progress["sources"][0]["endOffset"] == {"offset": 2}
    assert set(progress["durationMs"]) >= {
        "latestOffset",
        "walCommit",
        "addBatch",
        "triggerExecution",
    }
    assert progress.batch_id == 1 and json.loads(progress.json)["id"] == query.id
    assert [p["batchId"] for p in query.recent_progress if p["numInputRows"]] == [0, 1]
    query.stop()
    assert not query.is_active and query.exception() is None
    assert query.status["message"] == "Stopped"


def test_restart_keeps_id_new_run_id_and_continues_batch_ids(session: Any, tmp_path: Path) -> None:
    stream = MemoryStream(SCHEMA)
    location = str(tmp_path / "cp")

    def start() -> Any:
        return (
            stream.to_frame(session)
            .write_stream.format("memory")
            .query_name("restart")
            .option("checkpointLocation", location)
            .start()
        )

    first = start()
    stream.add_data([1])
    first.process_all_available()
    first.stop()
    stream.add_data([2])
    second = start()
    second.process_all_available()
    second.stop()
    assert second.id == first.id and second.run_id != first.run_id
    assert second.last_progress["batchId"] == 1
    assert session.table("restart").column("value").to_pylist() == [1, 2]


def test_uncommitted_batch_is_rerun_with_same_id_and_offsets(session: Any, tmp_path: Path) -> None:
    seen: list[tuple[int, list[int]]] = []
    location = tmp_path / "cp"

    def collect(batch: pa.Table, batch_id: int) -> None:
        seen.append((batch_id, sorted(batch.column("value").to_pylist())))

    def run(**trigger: bool) -> None:
        (
            rate(session, 3)
            .write_stream.foreach_batch(collect)
            .option("checkpointLocation", str(location))
            .trigger(**trigger)
            .start()
            .await_termination()
        )

    run(available_now=True)
    run(available_now=True)
    assert seen == [(0, [0, 1, 2]), (1, [3, 4, 5])]
    (location / "commits" / "1").unlink()  # as if the process died before committing batch 1
    run(once=True)
    assert seen[-1] == (1, [3, 4, 5])
    assert (location / "commits" / "1").exists()


def test_available_now_runs_limited_batches_then_stops(session: Any, tmp_path: Path) -> None:
    stream = MemoryStream(SCHEMA)
    for value in range(4):
        stream.add_data([value])
    batches: list[int] = []
    query = (
        stream.to_frame(session)
        .write_stream.foreach_batch(lambda table, batch_id: batches.append(table.num_rows))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=10) is True
    assert not query.is_active
    assert sum(batches) == 4


def test_once_runs_a_single_batch(session: Any) -> None:
    batches: list[int] = []
    query = (
        rate(session, 5)
        .write_stream.foreach_batch(lambda table, batch_id: batches.append(batch_id))
        .trigger(once=True)
        .start()
    )
    query.await_termination()
    assert batches == [0]


def test_default_trigger_wakes_on_new_data(session: Any) -> None:
    stream = MemoryStream(SCHEMA)
    arrived = threading.Event()
    query = (
        stream.to_frame(session)
        .write_stream.foreach_batch(lambda table, batch_id: arrived.set())
        .start()
    )
    stream.add_data([1])
    assert arrived.wait(5)
    query.stop()


def test_failing_batch_stops_the_query_and_raises_its_cause(session: Any, tmp_path: Path) -> None:
    def explode(table: pa.Table, batch_id: int) -> None:
        raise RuntimeError(f"cannot write batch {batch_id}")

    query = (
        rate(session)
        .write_stream.foreach_batch(explode)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    with pytest.raises(StreamingQueryException) as caught:
        query.await_termination(timeout=10)
    assert isinstance(caught.value.cause, RuntimeError)
    assert "cannot write batch 0" in str(caught.value)
    assert f"Query [id = {query.id}, run_id = {query.run_id}]" in str(caught.value)
    assert query.exception() is caught.value
    assert not query.is_active
    assert not (tmp_path / "cp" / "commits" / "0").exists()
    assert (tmp_path / "cp" / "offsets" / "0").exists()
    with pytest.raises(StreamingQueryException):
        query.process_all_available()


def test_listeners_hear_start_progress_and_termination(session: Any) -> None:
    events: list[str] = []

    class Listener(mb.StreamingQueryListener):
        def on_query_started(self, event: Any) -> None:
            events.append("started")

        def on_query_progress(self, progress: Any) -> None:
            events.append(f"progress {progress['batchId']}")

        def on_query_terminated(self, event: Any) -> None:
            events.append(f"terminated {event.exception}")

    session.streams.add_listener(Listener())
    query = rate(session).write_stream.format("noop").trigger(once=True).start()
    query.await_termination()
    session.streams.await_any_termination(timeout=5)
    assert events == ["started", "progress 0", "terminated None"]


def test_query_manager(session: Any) -> None:
    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.format("memory").query_name("m").start()
    assert session.streams.active == [query]
    assert session.streams.get(query.id) is query
    assert session.streams.await_any_termination(timeout=0.05) is False
    with pytest.raises(Exception, match="already active"):
        stream.to_frame(session).write_stream.format("memory").query_name("m").start()
    query.stop()
    assert session.streams.await_any_termination(timeout=1) is True
    assert session.streams.get(query.id) is None and session.streams.active == []
    session.streams.reset_terminated()
    assert session.streams.await_any_termination(timeout=0.05) is False


def test_unknown_format_lists_installed_ones(session: Any) -> None:
    with pytest.raises(UnknownFormatError) as caught:
        session.read_stream.format("rtae").load()
    message = str(caught.value)
    assert "Did you mean 'rate'?" in message and "rate-micro-batch" in message


def test_a_first_party_format_not_installed_names_its_distribution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MICROBATCH_BLOCK_PLUGINS", "jdbc")
    with (
        mb.Session() as session,
        pytest.raises(UnknownFormatError, match="pip install microbatch-jdbc"),
    ):
        session.read_stream.format("jdbc").load()


def test_unknown_option_and_wrong_type_fail_at_load(session: Any) -> None:
    with pytest.raises(
        OptionError, match=r"unknown option 'rowsPerBatc' \(did you mean 'rowsPerBatch'\?\)"
    ):
        session.read_stream.format("rate-micro-batch").option("rowsPerBatc", 5).load()
    with pytest.raises(OptionError, match="'rowsPerBatch': expected an integer"):
        session.read_stream.format("rate-micro-batch").option("rowsPerBatch", "many").load()
    with pytest.raises(OptionError, match="unknown option 'numRow'"):
        rate(session).write_stream.format("console").option("numRow", 3).start()


def test_sink_that_needs_a_checkpoint_refuses_to_start_without_one(
    session: Any, register: Callable[..., None]
) -> None:
    class DurableSink(mb.Sink):
        format_name = "durable-test"
        capabilities = mb.SinkCapabilities(guarantee=mb.Guarantee.EXACTLY_ONCE)

        def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
            raise AssertionError("the query must not start")

    register(session, "durable", DurableSink)
    with pytest.raises(CheckpointError, match="needs a checkpoint"):
        rate(session).write_stream.format("durable-test").start()


def test_unsupported_output_mode_and_partitioning_are_refused(
    session: Any, register: Callable[..., None]
) -> None:
    class AppendOnlySink(mb.Sink):
        format_name = "append-only-test"
        capabilities = mb.SinkCapabilities(needs_checkpoint=False)

        def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
            raise AssertionError("the query must not start")

    register(session, "append-only", AppendOnlySink)
    writer = rate(session).write_stream.format("append-only-test")
    with pytest.raises(UnsupportedOperationError, match=r"complete\. This output mode is not"):
        writer.output_mode("complete").start()
    with pytest.raises(UnsupportedOperationError, match="does not support partitioning"):
        writer.output_mode("append").partition_by("value").start()
    with pytest.raises(mb.ConfigurationError, match="Invalid streaming output mode: bogus"):
        writer.output_mode("bogus")
    assert session.streams.active == []


def test_second_query_on_a_held_checkpoint_is_refused_without_damage(
    session: Any, tmp_path: Path
) -> None:
    location = tmp_path / "cp"
    stream = MemoryStream(SCHEMA)
    first = (
        stream.to_frame(session)
        .write_stream.format("memory")
        .query_name("a")
        .option("checkpointLocation", str(location))
        .start()
    )
    stream.add_data([1])
    first.process_all_available()
    before = sorted(str(p.relative_to(location)) for p in location.rglob("*"))
    with pytest.raises(CheckpointInUseError, match="is in use"):
        stream.to_frame(session).write_stream.format("memory").query_name("b").option(
            "checkpointLocation", str(location)
        ).start()
    assert sorted(str(p.relative_to(location)) for p in location.rglob("*")) == before
    first.stop()


def test_corrupted_checkpoint_file_gives_one_clear_error(session: Any, tmp_path: Path) -> None:
    location = tmp_path / "cp"
    query = (
        rate(session)
        .write_stream.format("noop")
        .option("checkpointLocation", str(location))
        .trigger(once=True)
        .start()
    )
    query.await_termination()
    (location / "offsets" / "0").write_text("{not json")
    snapshot = {p: p.read_bytes() for p in location.rglob("*") if p.is_file()}
    with pytest.raises(
        CorruptCheckpointError, match=r"offsets/0 is not a valid entry \(it is not valid JSON\)"
    ):
        rate(session).write_stream.format("noop").option(
            "checkpointLocation", str(location)
        ).start()
    assert {p: p.read_bytes() for p in location.rglob("*") if p.is_file()} == snapshot


def test_temporary_checkpoint_is_removed_after_a_clean_stop(session: Any) -> None:
    query = rate(session).write_stream.format("noop").trigger(once=True).start()
    query.await_termination()
    temporary = [p for p in Path("/tmp").glob("microbatch-temporary-*") if query.id in str(p)]
    assert temporary == []


def test_memory_checkpoint_works(session: Any) -> None:
    location = f"memory://cp/{time.time_ns()}"
    for _ in range(2):
        query = (
            rate(session, 2)
            .write_stream.format("memory")
            .query_name("mem")
            .option("checkpointLocation", location)
            .trigger(once=True)
            .start()
        )
        query.await_termination()
    assert session.table("mem").column("value").to_pylist() == [0, 1, 2, 3]


def test_batch_read_returns_a_table(session: Any) -> None:
    table = session.read.format("rate-micro-batch").option("rowsPerBatch", 4).load()
    assert table.num_rows == 4 and table.schema.names == ["timestamp", "value"]


def test_explain_prints_source_transforms_and_sink(session: Any, capsys: Any) -> None:
    query = (
        rate(session)
        .filter(mb.col("value") > 3)
        .write_stream.format("noop")
        .trigger(once=True)
        .start()
    )
    query.await_termination()
    query.explain()
    out = capsys.readouterr().out
    assert "Source: " in out and "(value > 3)" in out and "Sink: " in out


@dataclass(frozen=True)
class NumberSplit(mb.Split):
    n: int


class LeakyReader(mb.StreamReader, mb.SplitReader):
    """Counts up one row per batch; fails reading batch ``fail_at`` with the password shown."""

    def __init__(self, password: str, fail_at: int) -> None:
        self.password = password
        self.fail_at = fail_at

    def initial_offset(self) -> dict[str, int]:
        return {"n": 0}

    def latest_offset(self, start: dict[str, int], limit: mb.ReadLimit) -> dict[str, int]:
        return {"n": start["n"] + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[NumberSplit]:
        return [NumberSplit(end["n"])]

    def read(self, split: mb.Split) -> Any:
        assert isinstance(split, NumberSplit)
        if split.n == self.fail_at:
            raise ConnectionError(f"login refused for password {self.password}")
        yield pa.record_batch([pa.array([split.n], pa.int64())], schema=SCHEMA)


class LeakySource(mb.Source):
    """A source that cannot replay and fails with its password in the message."""

    format_name = "leaky-test"
    capabilities = mb.SourceCapabilities(replayable=False)
    options = mb.OptionSpec(
        mb.Option(name="password", secret=True, required=True, doc="the password"),
        mb.Option(name="failAt", type="int", default=-1, doc="fail when reading this batch"),
    )

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        return LeakyReader(self.opts.password, self.opts.fail_at)


@pytest.fixture
def leaky(session: Any, register: Callable[..., None]) -> Any:
    register(session, "leaky", LeakySource)
    return session


def test_non_replayable_source_warns_of_no_exactly_once(leaky: Any, caplog: Any) -> None:
    frame = leaky.read_stream.format("leaky-test").option("password", "pw-123").load()
    with caplog.at_level("WARNING", logger="microbatch"):
        query = frame.write_stream.format("noop").trigger(once=True).start()
        query.await_termination()
    assert "is not replayable" in caplog.text and "no exactly-once guarantee" in caplog.text


def test_secrets_never_reach_errors_progress_or_logs(leaky: Any, caplog: Any, capsys: Any) -> None:
    frame = leaky.read_stream.format("leaky-test").options(password="pw-123", failAt=3).load()
    with caplog.at_level("DEBUG", logger="microbatch"):
        query = frame.write_stream.format("noop").start()
        with pytest.raises(StreamingQueryException) as caught:
            query.await_termination(timeout=10)
    query.explain(extended=True)
    shown = [
        str(caught.value),
        caplog.text,
        capsys.readouterr().out,
        json.dumps(query.recent_progress, default=str),
        query.status["message"],
    ]
    assert "login refused for password" in str(caught.value)
    assert all("pw-123" not in text for text in shown)


class CountingReader(LeakyReader):
    """Counts ``latest_offset`` calls; never has new data."""

    def latest_offset(self, start: dict[str, int], limit: mb.ReadLimit) -> dict[str, int]:
        CountingSource.calls += 1
        return start


class CountingSource(LeakySource):
    """A source that never has new data; refuses to start (to log in) when ``failAt`` is 0."""

    format_name = "counting-test"
    calls = 0

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        if self.opts.fail_at == 0:
            raise ConnectionError(f"cannot log in with {self.opts.password}")
        return CountingReader(self.opts.password, self.opts.fail_at)


@pytest.fixture
def counting(session: Any, register: Callable[..., None]) -> Any:
    register(session, "counting", CountingSource)
    CountingSource.calls = 0
    return session


def test_processing_time_is_honoured_while_idle(counting: Any) -> None:
    frame = counting.read_stream.format("counting-test").option("password", "pw-123").load()
    query = frame.write_stream.format("noop").trigger(processing_time="1 hour").start()
    wait_until(lambda: CountingSource.calls > 0, 10, "the first trigger", query)
    time.sleep(0.3)  # the default trigger would have polled ~30 times meanwhile
    query.stop()
    assert CountingSource.calls == 1


def test_start_time_errors_carry_no_secret(counting: Any) -> None:
    frame = counting.read_stream.format("counting-test").options(password="pw-123", failAt=0)
    with pytest.raises(ConnectionError) as caught:
        frame.load().write_stream.format("noop").start()
    assert "cannot log in with" in str(caught.value) and "pw-123" not in str(caught.value)
    assert counting.streams.active == []


def test_waiting_on_the_query_thread_is_refused(session: Any) -> None:
    errors: list[BaseException] = []
    holder: list[Any] = []

    def inside(table: pa.Table, batch_id: int) -> None:
        try:
            holder[0].process_all_available()
        except mb.ConfigurationError as error:
            errors.append(error)

    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.foreach_batch(inside).start()
    holder.append(query)
    stream.add_data([1])
    query.process_all_available()
    query.stop()
    assert "called on the query's own thread" in str(errors[0])


def test_a_terminated_query_is_no_longer_active_when_await_returns(session: Any) -> None:
    class SlowListener(mb.StreamingQueryListener):
        def on_query_terminated(self, event: Any) -> None:
            time.sleep(0.2)

    session.streams.add_listener(SlowListener())
    for _ in range(2):  # the same name again right after termination
        query = rate(session).write_stream.format("memory").query_name("again")
        running = query.trigger(once=True).start()
        running.await_termination()
        assert session.streams.active == []

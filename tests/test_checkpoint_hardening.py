"""Checkpoint hardening: recorded source/sink identity, log entries that must agree, temporary
files of killed writes, and ``stop(timeout=...)``."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import errors
from microbatch._checkpoint import BatchEntry, Checkpoint, SourceRange
from microbatch._cli import main
from microbatch.errors import CheckpointMismatchError, CorruptCheckpointError
from microbatch.options import Option, OptionSpec
from microbatch.state import StateStore

pytest.importorskip("microbatch_file")


def run(
    session: mb.Session,
    source: Path | str,
    sink: Path | str,
    checkpoint: Path,
    fmt: str = "parquet",
) -> None:
    """One available-now run of json files -> a file sink; raises what start() raises."""
    query = (
        session.read_stream.format("json")
        .schema("id bigint")
        .load(str(source))
        .write_stream.format(fmt)
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start(str(sink))
    )
    query.await_termination()


def first_run(
    session: mb.Session,
    tmp_path: Path,
    write_rows: Callable[..., None],
    ids: range,
    folder: str = "in",
) -> tuple[Path, Path]:
    """Writes ``ids`` to ``a.json`` in ``tmp_path / folder`` and runs the query on it once into
    ``tmp_path / "out"`` with the checkpoint ``tmp_path / "cp"``; returns (checkpoint, out)."""
    write_rows(tmp_path / folder, "a.json", ids)
    checkpoint, out = tmp_path / "cp", tmp_path / "out"
    run(session, tmp_path / folder, out, checkpoint)
    return checkpoint, out


def output_ids(session: mb.Session, sink: Path, fmt: str = "parquet") -> list[int]:
    table = session.read.format(fmt).schema("id bigint").load(str(sink))
    return sorted(table.column("id").to_pylist())


def entry(batch_id: int) -> BatchEntry:
    return BatchEntry(
        batch_id, (SourceRange({"offset": batch_id}, {"offset": batch_id + 1}),), 1000 + batch_id
    )


def metadata(checkpoint: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((checkpoint / "metadata").read_text())
    return value


# -- item 4: the source's and sink's identity ------------------------------------------------
def test_a_renamed_input_folder_is_refused_instead_of_read_again(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    checkpoint, out = first_run(session, tmp_path, write_rows, range(50))
    assert output_ids(session, out) == list(range(50))
    (tmp_path / "in").rename(tmp_path / "renamed")
    with pytest.raises(CheckpointMismatchError) as caught:
        run(session, tmp_path / "renamed", out, checkpoint)
    message = str(caught.value)
    assert "another source" in message and str(tmp_path / "renamed") in message
    assert "forget-identity" in message
    assert output_ids(session, out) == list(range(50))  # nothing read twice
    assert not (checkpoint / "lock").exists()


def test_another_sink_format_or_path_is_refused(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    checkpoint, out = first_run(session, tmp_path, write_rows, range(10))
    write_rows(tmp_path / "in", "b.json", range(10, 20))
    with pytest.raises(CheckpointMismatchError, match="format was 'parquet', is now 'json'"):
        run(session, tmp_path / "in", out, checkpoint, fmt="json")
    with pytest.raises(CheckpointMismatchError, match="another sink: path was"):
        run(session, tmp_path / "in", tmp_path / "elsewhere", checkpoint)
    assert not list(out.rglob("*.json"))
    run(session, tmp_path / "in", out, checkpoint)  # the unchanged query goes on
    assert output_ids(session, out) == list(range(20))


def test_other_spellings_of_the_same_paths_are_the_same_identity(
    session: mb.Session,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write_rows: Callable[..., None],
) -> None:
    write_rows(tmp_path / "in", "a.json", range(5))
    run(session, tmp_path / "in", tmp_path / "out", tmp_path / "cp")
    monkeypatch.chdir(tmp_path)
    write_rows(tmp_path / "in", "b.json", range(5, 9))
    run(session, "in/", f"file://{tmp_path}/out/.", tmp_path / "cp")
    assert output_ids(session, tmp_path / "out") == list(range(9))


def test_a_checkpoint_without_identity_records_it_on_its_next_start(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    checkpoint, out = first_run(session, tmp_path, write_rows, range(5))
    old = metadata(checkpoint)
    del old["identity"]  # as written before identities were recorded
    (checkpoint / "metadata").write_text(json.dumps(old))
    write_rows(tmp_path / "in", "b.json", range(5, 8))
    run(session, tmp_path / "in", out, checkpoint)
    assert output_ids(session, out) == list(range(8))
    recorded = metadata(checkpoint)
    assert recorded["id"] == old["id"]
    assert recorded["identity"]["source"] == {"format": "json", "path": str(tmp_path / "in")}
    assert recorded["identity"]["sink"] == {"format": "parquet", "path": str(out)}
    (tmp_path / "other").mkdir()
    with pytest.raises(CheckpointMismatchError):
        run(session, tmp_path / "other", out, checkpoint)


def test_older_metadata_still_refuses_another_sink_format(tmp_path: Path) -> None:
    """Metadata written before identities: only the sink's format name can be compared."""
    old = Checkpoint(str(tmp_path / "cp"))
    old.open(source="json", sink="parquet")
    old.write_offsets(entry(0))
    json_sink = {"source": {"format": "json"}, "sink": {"format": "json", "path": "/o"}}
    with pytest.raises(CheckpointMismatchError, match="format was 'parquet', is now 'json'"):
        Checkpoint(str(tmp_path / "cp")).open(source="json", sink="json", identity=json_sink)
    assert Checkpoint(str(tmp_path / "cp")).forget_identity(("sink",)) == ["sink"]
    opened = Checkpoint(str(tmp_path / "cp")).open(source="json", sink="json", identity=json_sink)
    assert opened["sink"] == "json" and opened["identity"] == json_sink


def test_forget_identity_moves_a_query_on_purpose(
    session: mb.Session,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    write_rows: Callable[..., None],
) -> None:
    checkpoint, out = first_run(session, tmp_path, write_rows, range(10), folder="old")
    write_rows(tmp_path / "new", "b.json", range(10, 15))
    with pytest.raises(CheckpointMismatchError):
        run(session, tmp_path / "new", out, checkpoint)
    assert main(["checkpoint", "forget-identity", str(checkpoint), "--source"]) == 0
    assert "Forgot the source identity" in capsys.readouterr().out
    assert "source" not in metadata(checkpoint)["identity"]
    run(session, tmp_path / "new", out, checkpoint)
    assert output_ids(session, out) == list(range(15))
    assert metadata(checkpoint)["identity"]["source"]["path"] == str(tmp_path / "new")
    assert metadata(checkpoint)["identity"]["sink"]["path"] == str(out)


def test_forget_identity_is_refused_while_a_query_runs(
    session: mb.Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = tmp_path / "cp"
    Checkpoint(str(checkpoint)).open(source="rate", sink="memory", identity={"source": {}})
    (checkpoint / "lock").write_text(
        json.dumps({"runId": "r", "pid": os.getppid(), "host": os.uname().nodename})
    )
    assert main(["checkpoint", "forget-identity", str(checkpoint)]) == 1
    assert "is in use by process" in capsys.readouterr().err
    assert main(["checkpoint", "forget-identity", str(tmp_path / "none")]) == 1


def test_options_declared_as_identity_make_the_connector_identity(tmp_path: Path) -> None:
    class TopicSource(mb.Source):
        """A connector that names its identity options (``topic``) next to others (``rate``)."""

        format_name = "topic-test"
        options = OptionSpec(
            Option(name="topic", required=True, identity=True),
            Option(name="rate", type="int", default=1),
            Option(name="password", secret=True, identity=True),
        )

    def identity(**raw: Any) -> dict[str, Any]:
        return TopicSource.identity(TopicSource.options.parse(raw, connector="topic-test"))

    assert identity(topic="a", rate=5, password="hunter2") == {"format": "topic-test", "topic": "a"}
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    sink = {"format": "memory"}
    checkpoint.open(
        source="topic-test", sink="memory", identity={"source": identity(topic="a"), "sink": sink}
    )
    checkpoint.write_offsets(entry(0))
    checkpoint.open(  # another rate is the same stream
        source="topic-test",
        sink="memory",
        identity={"source": identity(topic="a", rate=9), "sink": sink},
    )
    with pytest.raises(CheckpointMismatchError, match="topic was 'a', is now 'b'"):
        checkpoint.open(
            source="topic-test",
            sink="memory",
            identity={"source": identity(topic="b"), "sink": sink},
        )


# -- item 5: log entries that must agree -----------------------------------------------------
@pytest.fixture
def logged(tmp_path: Path) -> Checkpoint:
    """A checkpoint with batches 0 and 1 committed and batch 2 planned."""
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    for batch_id in range(3):
        checkpoint.write_offsets(entry(batch_id))
        if batch_id < 2:
            checkpoint.write_commit(batch_id, 10)
    return checkpoint


def reopened(checkpoint: Checkpoint) -> Checkpoint:
    return Checkpoint(checkpoint.url)


def test_consistent_logs_are_accepted(logged: Checkpoint) -> None:
    assert reopened(logged).latest_offsets() == entry(2)
    assert reopened(logged).last_committed_batch_id() == 1


def test_an_offset_entry_holding_another_batch_id_is_refused(logged: Checkpoint) -> None:
    path = Path(logged.url) / "offsets" / "2"
    path.write_text(json.dumps(entry(1).to_json()))  # offsets/2 says it is batch 1
    with pytest.raises(CorruptCheckpointError, match=r"offsets/2 holds batchId 1, not 2"):
        reopened(logged).latest_offsets()


def test_an_older_offset_entry_holding_another_batch_id_is_refused(logged: Checkpoint) -> None:
    (Path(logged.url) / "offsets" / "0").write_text(json.dumps(entry(7).to_json()))
    with pytest.raises(CorruptCheckpointError, match=r"offsets/0 holds batchId 7"):
        reopened(logged).latest_offsets()


@pytest.mark.parametrize("value", [True, "2", -1, 2.5, None])
def test_an_offset_entry_with_a_bad_batch_id_is_refused(logged: Checkpoint, value: Any) -> None:
    bad = {**entry(2).to_json(), "batchId": value}
    (Path(logged.url) / "offsets" / "2").write_text(json.dumps(bad))
    with pytest.raises(CorruptCheckpointError, match=r"offsets/2"):
        reopened(logged).latest_offsets()


def test_a_log_file_not_named_by_its_batch_id_is_refused(logged: Checkpoint) -> None:
    os.replace(Path(logged.url) / "offsets" / "2", Path(logged.url) / "offsets" / "002")
    with pytest.raises(CorruptCheckpointError, match=r"offsets/002 is not named by its batch"):
        reopened(logged).latest_offsets()


def test_a_commit_entry_holding_another_batch_id_is_refused(logged: Checkpoint) -> None:
    (Path(logged.url) / "commits" / "1").write_text(json.dumps({"batchId": 0}))
    with pytest.raises(CorruptCheckpointError, match=r"commits/1 holds batchId 0, not 1"):
        reopened(logged).latest_offsets()


def test_a_commit_entry_ahead_of_the_offset_log_is_refused(logged: Checkpoint) -> None:
    (Path(logged.url) / "commits" / "3").write_text(json.dumps({"batchId": 3}))
    with pytest.raises(CorruptCheckpointError, match=r"commits/3 records a batch that has no"):
        reopened(logged).latest_offsets()


def test_a_commit_entry_without_offsets_is_refused(tmp_path: Path) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    checkpoint.write_commit(0, 1)
    with pytest.raises(CorruptCheckpointError, match=r"commits/0 records a batch"):
        reopened(checkpoint).latest_offsets()


def test_a_missing_commit_before_the_newest_batch_is_refused(logged: Checkpoint) -> None:
    (Path(logged.url) / "commits" / "1").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"no commits/1"):
        reopened(logged).latest_offsets()


def test_a_gap_anywhere_in_the_offset_log_is_refused(logged: Checkpoint) -> None:
    checkpoint = reopened(logged)
    checkpoint.write_commit(2, 1)
    checkpoint.write_offsets(entry(3))
    (Path(logged.url) / "offsets" / "1").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"lacks offsets/1 before offsets/2"):
        reopened(logged).latest_offsets()


def test_commit_entries_older_than_the_offset_log_are_left_overs_of_retention(
    tmp_path: Path,
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"), retain=2)
    checkpoint.open(source="rate", sink="memory")
    for batch_id in range(6):
        checkpoint.write_offsets(entry(batch_id))
        checkpoint.write_commit(batch_id, 1)
    oldest = min(int(name) for name in checkpoint.offsets.names())
    checkpoint.commits.write(str(oldest - 1), {"batchId": oldest - 1})  # a killed purge
    assert reopened(checkpoint).latest_offsets() == entry(5)


def test_a_query_refuses_a_renamed_offset_entry_and_writes_nothing(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    """The reported case: an offsets/N entry holding another batch id was re-applied under
    that id (40 rows out of 30)."""
    checkpoint, out = tmp_path / "cp", tmp_path / "out"
    for index in range(3):
        write_rows(tmp_path / "in", f"{index}.json", range(index * 10, index * 10 + 10))
        run(session, tmp_path / "in", out, checkpoint)
    assert output_ids(session, out) == list(range(30))
    offsets = checkpoint / "offsets"
    damaged = {**json.loads((offsets / "2").read_text()), "batchId": 5}
    (offsets / "3").write_text(json.dumps(damaged))
    with pytest.raises(CorruptCheckpointError, match=r"offsets/3 holds batchId 5, not 3"):
        run(session, tmp_path / "in", out, checkpoint)
    assert output_ids(session, out) == list(range(30))


@pytest.mark.parametrize("version", [True, False, 0, -5, "1", 1.0, None])
def test_format_versions_other_than_positive_integers_are_refused(
    tmp_path: Path, version: Any
) -> None:
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.open(source="rate", sink="memory")
    stored = metadata(tmp_path / "cp")
    (tmp_path / "cp" / "metadata").write_text(json.dumps({**stored, "version": version}))
    with pytest.raises(CorruptCheckpointError, match=r"metadata has format version"):
        Checkpoint(str(tmp_path / "cp")).open(source="rate", sink="memory")


def test_the_sink_is_told_the_last_committed_batch_id(
    session: mb.Session,
    tmp_path: Path,
    write_rows: Callable[..., None],
    register: Callable[..., None],
    file_by_file: Callable[..., Any],
) -> None:
    seen: list[int | None] = []

    class RecordingWriter(mb.BatchWriter):
        def add_batch(self, table: pa.Table, batch_id: int) -> None:
            pass

    class RecordingSink(mb.Sink):
        format_name = "recording-test"

        def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
            seen.append(context.last_committed_batch_id)
            return RecordingWriter(context)

    register(session, "recording", RecordingSink)
    write_rows(tmp_path / "in", "a.json", range(3))
    for _ in range(2):
        file_by_file(session, "recording-test").start().await_termination()
        write_rows(tmp_path / "in", f"{len(seen)}.json", range(2))
        write_rows(tmp_path / "in", f"{len(seen)}b.json", range(2))
    assert seen == [None, 0]
    assert mb.WriteContext(schema=pa.schema([])).last_committed_batch_id is None


# -- item 8: temporary files of killed writes ------------------------------------------------
def test_state_store_sweeps_only_its_own_temporary_files(tmp_path: Path) -> None:
    for url in (str(tmp_path / "store"), f"memory://sweep/{uuid.uuid4().hex}"):
        store = StateStore(url)
        store.write("0", {"a": 1})
        killed = [f".0.{uuid.uuid4().hex}.tmp", f".metadata.{uuid.uuid4().hex}.tmp"]
        kept = [".keep", ".0.notahexname.tmp", ".lock.takeover-0123456789abcdef-1", "1.tmp"]
        for name in killed + kept:
            with store.fs.open(store.location(name), "wb") as handle:
                handle.write(b"{")
        assert store.sweep_temporary() == 2
        assert sorted(store.names(hidden=True)) == sorted(["0", *kept])
        assert store.read("0") == {"a": 1}


def test_a_start_sweeps_temporary_files_from_every_checkpoint_folder(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    checkpoint, out = first_run(session, tmp_path, write_rows, range(4))
    folders = [p for p in [checkpoint, *checkpoint.rglob("*")] if p.is_dir()]
    assert {"offsets", "commits", "sources"} <= {p.name for p in folders}
    left = []
    for folder in folders:
        name = folder / f".0.{uuid.uuid4().hex}.tmp"
        name.write_text("{")
        left.append(name)
    (checkpoint / ".keep").write_text("")
    write_rows(tmp_path / "in", "b.json", range(4, 6))
    run(session, tmp_path / "in", out, checkpoint)
    assert [path for path in left if path.exists()] == []
    assert (checkpoint / ".keep").exists()
    assert output_ids(session, out) == list(range(6))


# -- item 8: stop(timeout=...) ---------------------------------------------------------------
def start_a_held_batch(
    session: mb.Session, checkpoint: Path
) -> tuple[mb.StreamingQuery, threading.Event]:
    """Start a rate query whose first batch runs until the returned event is set (or 10 s)."""
    entered, release = threading.Event(), threading.Event()

    def slow(batch: pa.Table, batch_id: int) -> None:
        entered.set()
        release.wait(10)

    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 3)
        .load()
        .write_stream.foreach_batch(slow)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    assert entered.wait(5)
    return query, release


def test_stop_with_a_timeout_raises_while_a_batch_runs_and_the_stop_stands(
    session: mb.Session, tmp_path: Path
) -> None:
    query, release = start_a_held_batch(session, tmp_path / "cp")
    with pytest.raises(errors.QueryStopTimeoutError, match=r"did not stop within 0\.2 s") as caught:
        query.stop(timeout=0.2)
    assert isinstance(caught.value, TimeoutError) and caught.value.query_id == query.id
    assert query.is_active
    release.set()
    query.stop(timeout=5)
    assert not query.is_active and query.exception() is None
    assert (tmp_path / "cp" / "commits" / "0").exists()  # the running batch completed
    with pytest.raises(mb.ConfigurationError, match="timeout must be positive"):
        query.stop(timeout=0)


def test_the_session_stop_timeout_applies_to_a_stop_without_one(
    session: mb.Session, tmp_path: Path
) -> None:
    session.conf.set("stopTimeout", "200 milliseconds")
    query, release = start_a_held_batch(session, tmp_path / "cp")
    try:
        with pytest.raises(errors.QueryStopTimeoutError, match=r"did not stop within 0\.2 s"):
            query.stop()
        assert query.is_active
    finally:
        release.set()
    query.stop(timeout=5)  # a timeout given to stop() wins
    assert not query.is_active and query.exception() is None


def test_stop_with_a_timeout_returns_when_the_query_stops_in_time(session: mb.Session) -> None:
    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 2)
        .load()
        .write_stream.format("noop")
        .trigger(processing_time="50 milliseconds")
        .start()
    )
    query.stop(timeout=5)
    assert not query.is_active


def test_identity_is_recorded_only_by_a_start_that_succeeds(tmp_path: Path) -> None:
    """A start refused after the checkpoint was opened records nothing of its identity."""
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    first = {"source": {"format": "rate"}, "sink": {"format": "memory"}}
    checkpoint.open(source="rate", sink="memory")  # metadata of an older release
    checkpoint.write_offsets(entry(0))
    checkpoint.open(source="rate", sink="memory", identity=first)
    assert "identity" not in metadata(tmp_path / "cp")
    checkpoint.record_metadata()
    assert metadata(tmp_path / "cp")["identity"] == first


def test_before_any_batch_a_corrected_start_records_the_new_identity(tmp_path: Path) -> None:
    """Nothing was read or written yet: a first start that failed may be fixed freely."""
    wrong = {"source": {"format": "json", "path": "/wrong"}, "sink": {"format": "memory"}}
    right = {"source": {"format": "json", "path": "/right"}, "sink": {"format": "memory"}}
    Checkpoint(str(tmp_path / "cp")).open(source="json", sink="memory", identity=wrong)
    checkpoint = Checkpoint(str(tmp_path / "cp"))
    assert checkpoint.open(source="json", sink="memory", identity=right)["identity"] == right
    checkpoint.record_metadata()
    checkpoint.write_offsets(entry(0))
    with pytest.raises(CheckpointMismatchError, match="path was '/right', is now '/wrong'"):
        Checkpoint(str(tmp_path / "cp")).open(source="json", sink="memory", identity=wrong)

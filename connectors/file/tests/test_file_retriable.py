"""Transient filesystem errors become ``RetriableError``: the engine re-runs the batch.

The filesystems here fail on purpose (a connection reset the first times a file is opened),
standing in for a remote store whose network drops; everything else is real (files, the
engine, the checkpoint, the sink's manifest).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pyarrow as pa
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

import microbatch as mb
from microbatch.errors import RetriableError, StreamingQueryException
from microbatch_file._retriable import TRANSIENT_ERROR_NAMES, is_transient
from microbatch_file.manifest import Manifest


class FlakyLocalFileSystem(LocalFileSystem):
    """Local files whose opening for reading fails with the queued errors first."""

    protocol = ("flakyfile",)
    failures: ClassVar[list[BaseException]] = []

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "r" in mode and self.failures:
            raise self.failures.pop(0)
        return super()._open(path, mode, *args, **kwargs)


class FlakyMemoryFileSystem(MemoryFileSystem):
    """memory:// files whose opening for writing (and whose listing, with ``listing``) fails
    with the queued errors first."""

    protocol = ("flakymemory",)
    failures: ClassVar[list[BaseException]] = []
    listing: ClassVar[list[BaseException]] = []

    def find(self, *args: Any, **kwargs: Any) -> Any:
        if self.listing:
            raise self.listing.pop(0)
        return super().find(*args, **kwargs)

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path).removeprefix("flakymemory://")
        stripped: str = super()._strip_protocol(text)
        return stripped

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and self.failures:
            raise self.failures.pop(0)
        return super()._open(path, mode, *args, **kwargs)


fsspec.register_implementation("flakyfile", FlakyLocalFileSystem, clobber=True)
fsspec.register_implementation("flakymemory", FlakyMemoryFileSystem, clobber=True)


@pytest.fixture(autouse=True)
def _no_queued_failures() -> Any:
    yield
    FlakyLocalFileSystem.failures.clear()
    FlakyMemoryFileSystem.failures.clear()
    FlakyMemoryFileSystem.listing.clear()


def _session() -> mb.Session:
    session = mb.Session()
    session.conf.set("batchRetryBackoff", "10 milliseconds")
    return session


def _input(folder: Path, count: int, *, files: int = 1) -> None:
    """``count`` rows (ids 0, 1, ...) in ``files`` files."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        ids = range(index, count, files)
        (folder / f"f{index}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def _flaky_input_into_memory(session: mb.Session, tmp_path: Path, name: str) -> mb.StreamingQuery:
    """An available-now query from ``in`` (through the flaky local file system) to memory."""
    return (
        session.read_stream.format("json")
        .schema("id BIGINT")
        .load(f"flakyfile://{tmp_path / 'in'}")
        .write_stream.format("memory")
        .query_name(name)
        .trigger(available_now=True)
        .start()
    )


def _stopped_by(query: mb.StreamingQuery, match: str) -> StreamingQueryException:
    """The error that stopped ``query``, after checking that waiting for it raises ``match``."""
    with pytest.raises(StreamingQueryException, match=match):
        query.await_termination(timeout=60)
    error = query.exception()
    assert error is not None
    return error


# -- which errors ----------------------------------------------------------------------------
def test_connection_and_timeout_errors_are_transient_others_are_not() -> None:
    for error in (
        ConnectionResetError("reset by peer"),
        ConnectionRefusedError(),
        BrokenPipeError(),
        TimeoutError("read timed out"),
        TimeoutError("timed out"),
    ):
        assert is_transient(error), error
    wrapped = OSError("read failed")
    wrapped.__cause__ = ConnectionResetError("reset")
    assert is_transient(wrapped)
    for error in (FileNotFoundError("gone"), PermissionError("no"), ValueError("bad"), OSError()):
        assert not is_transient(error), error


@pytest.mark.parametrize("qualified", sorted(TRANSIENT_ERROR_NAMES))
def test_client_library_errors_are_known_by_name(qualified: str) -> None:
    module, name = qualified.rsplit(".", 1)
    client_error = type(name, (Exception,), {"__module__": module})
    subclass = type("Special" + name, (client_error,), {"__module__": "elsewhere"})
    assert is_transient(client_error("down")) and is_transient(subclass("down"))


# -- through the engine ----------------------------------------------------------------------
def test_a_source_read_that_fails_transiently_is_retried_and_rows_arrive_once(
    tmp_path: Path,
) -> None:
    _input(tmp_path / "in", 3)
    FlakyLocalFileSystem.failures.extend(
        [ConnectionResetError("connection reset by peer"), TimeoutError("read timed out")]
    )
    out = tmp_path / "out"
    query = (
        _session()
        .read_stream.format("json")
        .schema("id BIGINT")
        .load(f"flakyfile://{tmp_path / 'in'}")
        .write_stream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start(str(out))
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None
    assert not FlakyLocalFileSystem.failures, "the queued failures were not hit"
    assert query.last_progress.get("batchRetries") == 2
    table = mb.Session().read.format("parquet").load(str(out))
    assert sorted(table.column("id").to_pylist()) == [0, 1, 2]


def test_a_permanent_read_error_stops_the_query_with_its_cause(tmp_path: Path) -> None:
    _input(tmp_path / "in", 1)
    FlakyLocalFileSystem.failures.append(PermissionError("permission denied"))
    query = _flaky_input_into_memory(_session(), tmp_path, "permanent")
    error = _stopped_by(query, "permission denied")
    assert isinstance(error.cause, PermissionError)
    assert query.last_progress is None, "a batch ran although its read failed"


def test_too_many_transient_failures_stop_the_query(tmp_path: Path) -> None:
    _input(tmp_path / "in", 1)
    FlakyLocalFileSystem.failures.extend(ConnectionResetError("reset") for _ in range(10))
    session = _session()
    session.conf.set("maxBatchRetries", 1)
    query = _flaky_input_into_memory(session, tmp_path, "exhausted")
    error = _stopped_by(query, "failed with a transient error")
    assert isinstance(error.cause, RetriableError)
    assert "maxBatchRetries is 1" in " ".join(getattr(error.cause, "__notes__", []))
    assert isinstance(error.cause.__cause__, ConnectionResetError)


def test_a_part_write_that_fails_transiently_is_retried_and_committed_once(
    tmp_path: Path,
) -> None:
    _input(tmp_path / "in", 4, files=2)
    FlakyMemoryFileSystem.failures.append(ConnectionResetError("connection reset by peer"))
    out = f"flakymemory://retry-{uuid.uuid4().hex}/out"
    query = (
        _session()
        .read_stream.format("json")
        .schema("id BIGINT")
        .load(str(tmp_path / "in"))
        .write_stream.format("json")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start(out)
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None
    assert not FlakyMemoryFileSystem.failures, "the queued failure was not hit"
    assert query.last_progress.get("batchRetries") == 1
    fs, root = fsspec.core.url_to_fs(out)
    entries = Manifest(fs, root).entries()
    assert [entry["batchId"] for entry in entries] == [0]
    ids = []
    for file in entries[0]["files"]:
        with fs.open(f"{root}/{file['path']}", "rb") as handle:
            ids += [json.loads(line)["id"] for line in handle.read().decode().splitlines()]
    assert sorted(ids) == [0, 1, 2, 3]
    assert len(fs.find(root)) == len(entries[0]["files"]) + 1  # no file of the failed attempt


def test_retriable_errors_name_the_file(tmp_path: Path) -> None:
    from file_connector_helpers import open_reader, read_range

    from microbatch_file.sources import JsonFileSource

    _input(tmp_path / "in", 1)
    reader = open_reader(
        JsonFileSource,
        {"path": f"flakyfile://{tmp_path / 'in'}"},
        schema=pa.schema([("id", pa.int64())]),
    )
    start = reader.initial_offset()
    end = reader.latest_offset(start, reader.default_read_limit())
    FlakyLocalFileSystem.failures.append(ConnectionResetError("connection reset by peer"))
    with pytest.raises(RetriableError, match=r"Reading file file:.*f0\.json of batch 0") as caught:
        read_range(reader, start, end)
    assert isinstance(caught.value.__cause__, ConnectionResetError)


def test_a_listing_that_fails_transiently_is_retriable_and_the_next_one_takes_the_files() -> None:
    from file_connector_helpers import open_reader, read_range

    from microbatch_file.sources import JsonFileSource

    root = f"/listing-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{root}/a.json", b'{"id": 1}\n')
    reader = open_reader(
        JsonFileSource, {"path": f"flakymemory://{root}"}, schema=pa.schema([("id", pa.int64())])
    )
    start = reader.initial_offset()
    fs.pipe(f"{root}/b.json", b'{"id": 2}\n')
    FlakyMemoryFileSystem.listing.append(TimeoutError("list timed out"))
    with pytest.raises(RetriableError, match=rf"Listing flakymemory://{root} failed") as caught:
        reader.latest_offset(start, reader.default_read_limit())
    assert isinstance(caught.value.__cause__, TimeoutError)
    end = reader.latest_offset(start, reader.default_read_limit())  # what the engine does
    assert sorted(
        b["id"] for batch in read_range(reader, start, end) for b in batch.to_pylist()
    ) == [1, 2]


def test_a_commit_that_fails_transiently_is_retriable_and_the_retry_commits_once() -> None:
    from microbatch_file.sinks import JsonFileSink

    schema = pa.schema([("id", pa.int64())])
    out = f"flakymemory://commit-{uuid.uuid4().hex}/out"
    options = JsonFileSink.options.parse({"path": out}, connector="json")
    writer = JsonFileSink(options).stream_writer(mb.WriteContext(schema=schema, query_id="q"))
    part = mb.PartContext(batch_id=0, part_index=0, num_parts=1, query_id="q")
    rows = pa.RecordBatchReader.from_batches(schema, [pa.record_batch({"id": [1, 2]}, schema)])
    message = writer.part_writer().write(rows, part)
    FlakyMemoryFileSystem.failures.append(ConnectionResetError("connection reset by peer"))
    with pytest.raises(RetriableError, match="committing batch 0 failed") as caught:
        writer.commit([message], 0)
    assert isinstance(caught.value.__cause__, ConnectionResetError)
    fs, root = fsspec.core.url_to_fs(out)
    assert Manifest(fs, root).entries() == []
    writer.commit([message], 0)  # the engine's retry (its part was written again: the same rows)
    writer.commit([message], 0)  # and a replay after that: a no-op
    [entry] = Manifest(fs, root).entries()
    assert [file["rows"] for file in entry["files"]] == [2]

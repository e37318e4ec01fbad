from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, ReadMaxRows
from microbatch.errors import OptionError, SourceError, UnsupportedOperationError
from microbatch_socket import SocketSource, SocketStreamReader

DEADLINE = 10.0


class LineServer:
    """A real TCP server on 127.0.0.1 that accepts one client and sends what it is told."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.client: socket.socket | None = None

    def accept(self) -> None:
        self.listener.settimeout(DEADLINE)
        self.client, _ = self.listener.accept()

    def send(self, data: bytes) -> None:
        assert self.client is not None
        self.client.sendall(data)

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()

    def close(self) -> None:
        self.close_client()
        self.listener.close()


@pytest.fixture
def line_server() -> Iterator[LineServer]:
    server = LineServer()
    yield server
    server.close()


def make_source(port: int, **options: Any) -> SocketSource:
    raw = {"host": "127.0.0.1", "port": port, **options}
    parsed = SocketSource.options.parse(raw, connector="socket")
    return SocketSource(parsed)


def open_source(
    server: LineServer, wake: Callable[[], None] = lambda: None, **options: Any
) -> SocketStreamReader:
    """The stream reader of one run, connected to ``server``."""
    source = make_source(server.port, **options)
    reader = source.stream_reader(ReadContext(schema=source.schema(), wake=wake))
    server.accept()
    return reader


@pytest.fixture
def sources() -> Iterator[list[SocketStreamReader]]:
    opened: list[SocketStreamReader] = []
    yield opened
    for source in opened:
        source.stop()


@pytest.fixture
def source(line_server: LineServer, sources: list[SocketStreamReader]) -> SocketStreamReader:
    """A stream reader with the default options, connected to ``line_server``; stopped after
    the test."""
    reader = open_source(line_server)
    sources.append(reader)
    return reader


def wait_for_offset(
    source: SocketStreamReader, start: dict[str, Any], lines: int
) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while True:
        end = source.latest_offset(start, ReadAllAvailable())
        if end["offset"] >= lines or time.monotonic() > deadline:
            assert end == {"offset": lines}
            return end
        time.sleep(0.005)


def send_lines(
    line_server: LineServer, source: SocketStreamReader, payload: bytes, lines: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Sends ``payload`` to a fresh source; its initial offset and the offset after ``lines``."""
    start = source.initial_offset()
    line_server.send(payload)
    return start, wait_for_offset(source, start, lines)


def read_splits(source: SocketStreamReader, splits: list[Any]) -> list[pa.RecordBatch]:
    split_reader = source.split_reader()
    return [batch for split in splits for batch in split_reader.read(split)]


def read_values(source: SocketStreamReader, start: Any, end: Any) -> list[str]:
    return [
        value
        for batch in read_splits(source, source.partitions(start, end))
        for value in batch.column("value").to_pylist()
    ]


def test_schema_follows_include_timestamp(line_server: LineServer) -> None:
    plain = make_source(line_server.port)
    assert plain.schema() == pa.schema([("value", pa.string())])
    assert plain.describe() == f"SocketSource[host=127.0.0.1, port={line_server.port}]"
    assert not SocketSource.capabilities.replayable
    stamped = make_source(line_server.port, includeTimestamp="true")
    assert stamped.schema() == pa.schema(
        [("value", pa.string()), ("timestamp", pa.timestamp("us", tz="UTC"))]
    )


def test_the_connector_object_does_not_connect(
    line_server: LineServer, sources: list[SocketStreamReader]
) -> None:
    source = make_source(line_server.port)
    source.schema()
    line_server.listener.settimeout(0.2)
    with pytest.raises(TimeoutError):
        line_server.listener.accept()  # nobody connected yet
    reader = source.stream_reader(ReadContext(schema=source.schema()))
    sources.append(reader)
    line_server.accept()
    assert reader.connected


def test_host_and_port_are_required() -> None:
    with pytest.raises(OptionError) as caught:
        SocketSource.options.parse({}, connector="socket")
    assert "missing required option 'host'" in str(caught.value)
    assert "missing required option 'port'" in str(caught.value)


@pytest.mark.parametrize("port", [0, 65536, "http"])
def test_port_must_be_a_tcp_port(port: object) -> None:
    with pytest.raises(OptionError, match="'port'"):
        SocketSource.options.parse({"host": "localhost", "port": port}, connector="socket")


def test_batch_read_is_refused() -> None:
    parsed = SocketSource.options.parse({"host": "localhost", "port": 9}, connector="socket")
    with pytest.raises(UnsupportedOperationError, match="read_stream"):
        SocketSource(parsed, streaming=False)


def test_connection_refused_names_the_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    parsed = SocketSource.options.parse({"host": "127.0.0.1", "port": port}, connector="socket")
    source = SocketSource(parsed)
    with pytest.raises(SourceError, match=f"cannot connect to 127.0.0.1:{port}"):
        source.stream_reader(ReadContext(schema=source.schema()))


def test_lines_become_rows_in_order(
    line_server: LineServer, sources: list[SocketStreamReader]
) -> None:
    woken = threading.Event()
    source = open_source(line_server, wake=woken.set, numPartitions=4)
    sources.append(source)
    start = source.initial_offset()
    assert start == {"offset": 0}
    assert source.latest_offset(start, ReadAllAvailable()) == start
    line_server.send(b"first\nsecond\r\nthi")
    assert woken.wait(DEADLINE)
    end = wait_for_offset(source, start, 2)
    assert [(split.start, split.end) for split in source.partitions(start, end)] == [(0, 2)]
    assert read_values(source, start, end) == ["first", "second"]
    line_server.send(b"rd\n\n")
    later = wait_for_offset(source, end, 4)
    assert read_values(source, end, later) == ["third", ""]


def test_utf8_split_across_packets_and_invalid_bytes(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start = source.initial_offset()
    encoded = "héllo wörld\n".encode()
    line_server.send(encoded[:2])
    time.sleep(0.05)
    line_server.send(encoded[2:] + b"bad \xff byte\n")
    end = wait_for_offset(source, start, 2)
    assert read_values(source, start, end) == ["héllo wörld", "bad \ufffd byte"]


def test_include_timestamp_stamps_the_arrival_time(
    line_server: LineServer, sources: list[SocketStreamReader]
) -> None:
    source = open_source(line_server, includeTimestamp=True)
    sources.append(source)
    start = source.initial_offset()
    before = datetime.now(UTC)
    line_server.send(b"a\nb\n")
    end = wait_for_offset(source, start, 2)
    after = datetime.now(UTC)
    (split,) = source.partitions(start, end)
    (batch,) = read_splits(source, [split])
    assert batch.schema == make_source(line_server.port, includeTimestamp=True).schema()
    assert batch.column("value").to_pylist() == ["a", "b"]
    for stamp in batch.column("timestamp").to_pylist():
        assert before <= stamp <= after


def test_read_limit_caps_the_batch(line_server: LineServer, source: SocketStreamReader) -> None:
    start, _ = send_lines(line_server, source, b"1\n2\n3\n4\n5\n", 5)
    assert source.latest_offset(start, ReadMaxRows(2)) == {"offset": 2}
    assert source.latest_offset({"offset": 4}, ReadMaxRows(2)) == {"offset": 5}


def test_commit_drops_lines_from_memory(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start, end = send_lines(line_server, source, b"a\nb\nc\n", 3)
    assert source.buffered_lines == 3
    source.commit({"offset": 2})
    assert source.buffered_lines == 1
    assert read_values(source, {"offset": 2}, end) == ["c"]
    assert read_values(source, start, {"offset": 2}) == []  # gone: not replayable
    source.commit(end)
    assert source.buffered_lines == 0


def test_many_lines_come_in_bounded_batches(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start = source.initial_offset()
    count = 150_000
    payload = "".join(f"line {index}\n" for index in range(count)).encode()
    sender = threading.Thread(target=line_server.send, args=(payload,))
    sender.start()
    end = wait_for_offset(source, start, count)
    sender.join()
    (split,) = source.partitions(start, end)
    batches = read_splits(source, [split])
    assert [batch.num_rows for batch in batches] == [65_536, 65_536, 18_928]
    values = pa.Table.from_batches(batches).column("value")
    assert values[0].as_py() == "line 0"
    assert values[-1].as_py() == f"line {count - 1}"


def test_server_closing_ends_the_stream_quietly(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start = source.initial_offset()
    line_server.send(b"one\nlast line without newline")
    line_server.close_client()
    end = wait_for_offset(source, start, 2)
    deadline = time.monotonic() + DEADLINE
    while source.connected and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not source.connected
    assert read_values(source, start, end) == ["one", "last line without newline"]
    assert source.latest_offset(end, ReadAllAvailable()) == end
    source.stop()
    source.stop()


def test_stop_closes_the_connection_and_is_idempotent(line_server: LineServer) -> None:
    source = open_source(line_server)
    assert source.connected
    source.stop()
    assert not source.connected
    assert line_server.client is not None
    line_server.client.settimeout(DEADLINE)
    assert line_server.client.recv(10) == b""  # the server sees the connection end
    source.stop()
    reader = [t for t in threading.enumerate() if t.name == f"microbatch-socket-{source.address}"]
    assert reader == []


def test_restart_numbers_new_lines_after_the_checkpoint(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    line_server.send(b"x\ny\n")
    checkpointed = {"offset": 41}
    end = wait_for_offset(source, checkpointed, 43)
    assert read_values(source, checkpointed, end) == ["x", "y"]


def test_replayed_batch_after_restart_is_lost_with_a_warning(
    line_server: LineServer, source: SocketStreamReader, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="microbatch_socket.source"):
        assert read_values(source, {"offset": 3}, {"offset": 5}) == []
    assert "cannot replay lines 4 to 5" in caplog.text
    line_server.send(b"fresh\n")
    end = wait_for_offset(source, {"offset": 5}, 6)
    assert read_values(source, {"offset": 5}, end) == ["fresh"]


@pytest.mark.parametrize("offset", [{"seconds": 1}, {"offset": -1}, {"offset": "2"}, None])
def test_foreign_offsets_are_refused(offset: Any, source: SocketStreamReader) -> None:
    with pytest.raises(SourceError, match="not made by the socket source"):
        source.latest_offset(offset, ReadAllAvailable())


def test_latest_offset_for_progress_is_where_the_lines_end(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start = source.initial_offset()
    assert source.report_latest_offset() is None
    line_server.send(b"1\n2\n3\n4\n5\n")
    wait_for_offset(source, start, 5)
    assert source.latest_offset(start, ReadMaxRows(2)) == {"offset": 2}
    assert source.report_latest_offset() == {"offset": 5}  # held back by the limit


def test_lost_lines_are_counted_in_metrics(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    assert source.metrics() == {}
    assert read_values(source, {"offset": 3}, {"offset": 5}) == []  # replayed after a restart
    assert source.metrics() == {"linesLost": 2}
    line_server.send(b"a\nb\n")
    end = wait_for_offset(source, {"offset": 5}, 7)
    source.commit({"offset": 6})
    assert read_values(source, {"offset": 5}, end) == ["b"]  # "a" was dropped by the commit
    assert source.metrics() == {"linesLost": 3}


def test_splits_carry_their_lines_and_print_short(
    line_server: LineServer, source: SocketStreamReader
) -> None:
    start, end = send_lines(line_server, source, b"x\ny\n", 2)
    (split,) = source.partitions(start, end)
    assert split.lines == ("x", "y")
    assert repr(split) == "SocketSplit(start=0, end=2, 2 lines)"
    assert source.partitions(start, end) == [split]  # a retried batch reads the same lines
    source.commit(end)
    assert (source.buffered_lines, source.lines_received) == (0, 2)
    assert read_splits(source, [split])[0].column("value").to_pylist() == ["x", "y"]


def test_foreign_splits_are_refused(source: SocketStreamReader) -> None:
    with pytest.raises(SourceError, match="not planned by the socket source"):
        list(source.split_reader().read({"start": 0, "end": 1}))  # type: ignore[arg-type]

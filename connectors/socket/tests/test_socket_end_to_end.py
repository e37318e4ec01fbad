from __future__ import annotations

import socket
import time

import pytest

import microbatch as mb
from microbatch.errors import SourceError, UnsupportedOperationError

pytest.importorskip("microbatch_console")

DEADLINE = 20.0


def test_socket_lines_reach_the_console(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener, mb.Session() as session:
        port = listener.getsockname()[1]
        query = (
            session.read_stream.format("socket")
            .options(host="127.0.0.1", port=port)
            .load()
            .write_stream.format("console")
            .start()
        )
        listener.settimeout(DEADLINE)
        server, _ = listener.accept()
        with server:
            server.sendall(b"hello\nworld\n")
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:
                received = sum(progress.numInputRows for progress in query.recent_progress)
                if received >= 2:
                    break
                time.sleep(0.01)
            query.stop()
            assert query.exception() is None
            server.settimeout(DEADLINE)
            assert server.recv(10) == b""  # stopping the query closed the connection
    printed = capsys.readouterr().out
    assert "Batch: 0" in printed
    assert "|hello|\n" in printed
    assert "|world|\n" in printed


def test_refused_connection_fails_the_start() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with mb.Session() as session:
        frame = session.read_stream.format("socket").options(host="127.0.0.1", port=port).load()
        with pytest.raises(SourceError, match=f"127.0.0.1:{port}"):
            frame.write_stream.format("console").start()
        assert session.streams.active == []


def test_batch_read_is_refused() -> None:
    with mb.Session() as session, pytest.raises(UnsupportedOperationError, match="read_stream"):
        session.read.format("socket").options(host="127.0.0.1", port=9).load()


def test_missing_host_fails_at_load() -> None:
    with mb.Session() as session, pytest.raises(mb.OptionError, match="'host'"):
        session.read_stream.format("socket").option("port", 9999).load()

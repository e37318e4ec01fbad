"""``socket`` passes the microbatch-testkit source suite, against a real TCP server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from microbatch import StreamReader
from microbatch_socket import SocketSource, SocketStreamReader
from microbatch_testkit import SourceContract

LINES_PER_PRODUCE = 5


class LineServer:
    """A TCP server on a free local port that keeps every connection it accepts."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.sent = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)

    def wait_for_connections(self, count: int) -> None:
        deadline = time.monotonic() + 5
        while len(self.connections) < count:
            assert time.monotonic() < deadline, f"{count} connections expected in 5 s"
            time.sleep(0.005)

    def send_lines(self, count: int) -> None:
        text = "".join(f"line {self.sent + index} ✓\n" for index in range(count))
        self.sent += count
        for connection in self.connections:
            connection.sendall(text.encode())

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()


class TestSocketSourceContract(SourceContract):
    source_class = SocketSource

    @pytest.fixture(autouse=True)
    def _server(self) -> Iterator[None]:
        self.server = LineServer()
        yield
        self.server.close()

    def make_options(self) -> dict[str, Any]:
        return {"host": "127.0.0.1", "port": self.server.port, "includeTimestamp": True}

    def produce(self, reader: StreamReader) -> None:
        assert isinstance(reader, SocketStreamReader)
        # every reader made so far holds a connection, also one the engine made (not in built)
        readers = {id(item) for item in self.built if isinstance(item, SocketStreamReader)}
        self.server.wait_for_connections(len(readers | {id(reader)}))
        before = reader.lines_received  # not buffered_lines: a running query commits lines
        self.server.send_lines(LINES_PER_PRODUCE)
        deadline = time.monotonic() + 5
        while reader.lines_received < before + LINES_PER_PRODUCE:
            assert time.monotonic() < deadline, "the socket source received nothing in 5 s"
            time.sleep(0.005)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"port": self.server.port}, "missing required option 'host'"),
            ({"host": "127.0.0.1"}, "missing required option 'port'"),
            ({"host": "127.0.0.1", "port": 70000}, "must be at most 65535"),
            ({"host": "127.0.0.1", "port": 9, "includeTimestamp": "yes"}, "'true' or 'false'"),
        ]

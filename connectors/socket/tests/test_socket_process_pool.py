"""The socket source's splits read in another process, from a pickled split reader.

The connection stays with the stream reader in this process; each split carries the lines it
covers, so the worker process reads them with no connection of its own.
"""

from __future__ import annotations

import socket
import time

import pyarrow as pa

from microbatch import ReadAllAvailable, ReadContext
from microbatch_socket import SocketSource
from microbatch_testkit import read_elsewhere

DEADLINE = 10.0


def test_socket_splits_read_in_a_spawned_process() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        options = SocketSource.options.parse(
            {"host": "127.0.0.1", "port": listener.getsockname()[1], "includeTimestamp": True},
            connector="socket",
        )
        source = SocketSource(options)
        reader = source.stream_reader(ReadContext(schema=source.schema()))
        try:
            listener.settimeout(DEADLINE)
            server, _ = listener.accept()
            with server:
                server.sendall("one\ntwo ✓\nthree\n".encode())
                start = reader.initial_offset()
                deadline = time.monotonic() + DEADLINE
                while reader.buffered_lines < 3 and time.monotonic() < deadline:
                    time.sleep(0.005)
                end = reader.latest_offset(start, ReadAllAvailable())
                assert end == {"offset": 3}
                (split,) = reader.partitions(start, end)
                (batches,) = read_elsewhere(reader, start, end)
        finally:
            reader.stop()
    table = pa.Table.from_batches(batches, schema=source.schema())
    assert table.column("value").to_pylist() == ["one", "two ✓", "three"]
    local = pa.Table.from_batches(list(reader.split_reader().read(split)), schema=source.schema())
    assert table.equals(local)

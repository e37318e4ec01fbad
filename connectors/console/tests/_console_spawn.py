"""What a spawned worker process runs for ``test_console_process_pool.py``.

A module of its own (not the test module) so that the worker can import it by name.
"""

from __future__ import annotations

import os
import pickle

import pyarrow as pa


def write_pickled(part_writer: bytes, table: pa.Table, part: bytes) -> tuple[int, bytes]:
    """Unpickle a part writer and a part context, write ``table`` as that part here; return
    this process's id and the pickled commit message."""
    writer = pickle.loads(part_writer)
    data = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    return os.getpid(), pickle.dumps(writer.write(data, pickle.loads(part)))

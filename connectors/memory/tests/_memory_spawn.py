"""What a spawned worker process runs for ``test_memory_process_pool.py``.

A module of its own (not the test module) so that the worker can import it by name.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import pyarrow as pa


def read_pickled(split_reader: bytes, split: bytes) -> tuple[int, list[pa.RecordBatch]]:
    """Unpickle a split reader and a split, read the split here; return this process's id
    and the record batches."""
    reader = pickle.loads(split_reader)
    return os.getpid(), list(reader.read(pickle.loads(split)))


def read_and_write(
    split_reader: bytes, split: bytes, part_writer: bytes, part: bytes, schema: pa.Schema
) -> tuple[int, Any]:
    """Read a split and write it as one part, here, from pickled objects (as an executor
    would); return this process's id and the part writer's commit message."""
    reader = pickle.loads(split_reader)
    writer = pickle.loads(part_writer)
    data = pa.RecordBatchReader.from_batches(schema, reader.read(pickle.loads(split)))
    return os.getpid(), writer.write(data, pickle.loads(part))

"""What a spawned worker process runs for ``test_socket_process_pool.py``.

A module of its own (not the test module) so that the worker can import it by name.
"""

from __future__ import annotations

import os
import pickle

import pyarrow as pa


def read_pickled(split_reader: bytes, split: bytes) -> tuple[int, list[pa.RecordBatch]]:
    """Unpickle a split reader and a split, read the split here; return this process's id
    and the record batches."""
    reader = pickle.loads(split_reader)
    return os.getpid(), list(reader.read(pickle.loads(split)))

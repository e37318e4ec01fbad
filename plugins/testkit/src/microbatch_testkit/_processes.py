"""Reading splits and writing parts in other processes, from pickled objects.

A split may be read, and a part written, on another machine: Spark pickles the reader to its
executors. These helpers do the same in a ``spawn`` process (fresh interpreters,
nothing inherited but what was pickled) and hand the results back as Arrow IPC bytes and
pickles. Failures come back as text naming the step that failed.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa

from microbatch import PartContext, StreamReader, StreamWriter

__all__ = [
    "read_elsewhere",
    "read_splits_elsewhere",
    "write_batch_elsewhere",
    "write_parts_elsewhere",
]

_TIMEOUT = 60.0


class ElsewhereError(AssertionError):
    """A split or part failed in the other process (or could not get there)."""


def _pickled(value: Any, what: str) -> bytes:
    try:
        return pickle.dumps(value)
    except Exception as error:
        raise ElsewhereError(
            f"{what} cannot be pickled ({type(error).__name__}: {error}): {value!r}"
        ) from None


def _ipc(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as stream:
        for batch in batches:
            stream.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _batch_bytes(batch: pa.RecordBatch) -> bytes:
    return _ipc([batch], batch.schema)


def _from_ipc(data: bytes) -> pa.RecordBatchReader:
    return pa.ipc.open_stream(pa.py_buffer(data))


def _failed(step: str) -> tuple[str, str]:
    return ("error", f"{step} failed in the other process:\n{traceback.format_exc()}")


def _read_one(blob: bytes) -> tuple[str, Any]:
    """In the other process: unpickle ``(split_reader, split)`` and read the split."""
    try:
        split_reader, split = pickle.loads(blob)
    except Exception:
        return _failed("unpickling the split reader and split (is every class importable?)")
    try:
        batches = [_batch_bytes(batch) for batch in _as_batches(split_reader.read(split))]
    except Exception:
        return _failed(f"read({split!r})")
    return ("ok", batches)


def _as_batches(items: Any) -> Any:
    for item in items:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            yield item


def _write_one(blob: bytes) -> tuple[str, Any]:
    """In the other process: unpickle ``(part_writer, data, part)`` and write the part."""
    try:
        part_writer, data, part = pickle.loads(blob)
    except Exception:
        return _failed("unpickling the part writer (is every class importable?)")
    try:
        message = part_writer.write(_from_ipc(data), part)
    except Exception:
        return _failed(f"write(part {part.part_index} of batch {part.batch_id})")
    try:
        return ("ok", pickle.dumps(message))
    except Exception:
        return _failed(f"pickling the commit message of part {part.part_index}")


def _with_pid(function: Any, blob: bytes) -> tuple[int, Any]:
    return os.getpid(), function(blob)


def _run(function: Any, blobs: list[bytes]) -> list[Any]:
    if not blobs:
        return []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        futures = [pool.submit(_with_pid, function, blob) for blob in blobs]
        results = [future.result(timeout=_TIMEOUT) for future in futures]
    if any(pid == os.getpid() for pid, _ in results):
        raise ElsewhereError("the worker ran in this process, not in another one")
    return [result for _, result in results]


def read_splits_elsewhere(
    split_reader: Any, splits: Sequence[Any], where: str
) -> list[list[pa.RecordBatch]]:
    """Each split read in another process by a pickled copy of ``split_reader``; the batches
    of each split, in split order. ``where`` names the range in failure messages."""
    blobs = [
        _pickled((split_reader, split), f"split {index} of {where} with its split reader")
        for index, split in enumerate(splits)
    ]
    results: list[list[pa.RecordBatch]] = []
    for index, (status, value) in enumerate(_run(_read_one, blobs)):
        if status != "ok":
            raise ElsewhereError(f"split {index} of {where}: {value}")
        results.append([batch for data in value for batch in _from_ipc(data)])
    return results


def write_parts_elsewhere(
    part_writer: Any, schema: pa.Schema, parts: Sequence[Sequence[pa.RecordBatch]], contexts: Any
) -> list[Any]:
    """Each part written in another process by a pickled copy of ``part_writer``; the commit
    messages, unpickled here, in part order."""
    blobs = [
        _pickled((part_writer, _ipc(part, schema), context), f"part {index} with its writer")
        for index, (part, context) in enumerate(zip(parts, contexts, strict=True))
    ]
    messages = []
    for index, (status, value) in enumerate(_run(_write_one, blobs)):
        if status != "ok":
            raise ElsewhereError(f"part {index}: {value}")
        messages.append(pickle.loads(value))
    return messages


def read_elsewhere(reader: StreamReader, start: Any, end: Any) -> list[list[pa.RecordBatch]]:
    """Every split of ``reader.partitions(start, end)`` read in another process by a pickled
    copy of ``reader.split_reader()``: the batches of each split, in split order."""
    where = f"partitions({start!r}, {end!r})"
    return read_splits_elsewhere(reader.split_reader(), reader.partitions(start, end), where)


def write_batch_elsewhere(
    writer: StreamWriter,
    schema: pa.Schema,
    parts: Sequence[Sequence[pa.RecordBatch]],
    batch_id: int,
    query_id: str = "",
) -> list[Any]:
    """Batch ``batch_id``: each part written in another process by a pickled copy of
    ``writer.part_writer()`` (part ``i`` with ``PartContext(batch_id, i, len(parts),
    query_id)``), then the commit messages committed here with ``writer.commit``; returns the
    messages, in part order."""
    contexts = [PartContext(batch_id, index, len(parts), query_id) for index in range(len(parts))]
    messages = write_parts_elsewhere(writer.part_writer(), schema, parts, contexts)
    writer.commit(messages, batch_id)
    return messages

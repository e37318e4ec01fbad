"""The foreach writers that the spawned processes of ``test_foreachbatch_process_pool.py`` (and
of the contract suite) unpickle.

A module of its own (not the test module) so that the worker can import it by name.
"""

from __future__ import annotations

import json
import os
import pickle
import time
import uuid
from pathlib import Path
from typing import IO, Any


class FileRowWriter:
    """A foreach writer that opens one file per partition and epoch in ``open``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.out: IO[str] | None = None
        self.opened: tuple[int, int] | None = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.opened = (partition_id, epoch_id)
        name = f"part-{epoch_id}-{partition_id}.jsonl"
        self.out = (Path(self.folder) / name).open("w", encoding="utf-8")
        return True

    def process(self, row: dict[str, Any]) -> None:
        assert self.out is not None and self.opened is not None
        partition, epoch = self.opened
        record = {"row": row, "partition": partition, "epoch": epoch, "pid": os.getpid()}
        self.out.write(json.dumps(record) + "\n")

    def close(self, error: BaseException | None) -> None:
        if self.out is not None:
            self.out.close()


def append_row(path: str, row: dict[str, Any]) -> None:
    """A foreach function (bound to its file with ``functools.partial``)."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"row": row, "pid": os.getpid()}) + "\n")


class PickledRowWriter:
    """A foreach writer for the contract suite: ``open`` starts a file named after the batch
    (epoch) and partition in ``folder``, ``process`` appends each row to it, pickled, so rows
    written in any process can be read back in order."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.out: IO[bytes] | None = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        name = f"{epoch_id:08d}-{partition_id:08d}-{time.time_ns()}-{uuid.uuid4().hex}.rows"
        self.out = (Path(self.folder) / name).open("wb")
        return True

    def process(self, row: dict[str, Any]) -> None:
        assert self.out is not None, "process() before open()"
        pickle.dump(row, self.out)

    def close(self, error: BaseException | None) -> None:
        if self.out is not None:
            self.out.close()


def record_row(folder: str, row: dict[str, Any]) -> None:
    """A foreach function for the contract suite (bound to ``folder`` with
    ``functools.partial``): appends the row, pickled, to this process's file."""
    with (Path(folder) / f"function-{os.getpid()}.rows").open("ab") as out:
        out.write(pickle.dumps(row))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows pickled into one file by :class:`PickledRowWriter` or :func:`record_row`."""
    rows: list[dict[str, Any]] = []
    with path.open("rb") as source:
        while True:
            try:
                rows.append(pickle.load(source))
            except EOFError:
                return rows

"""New JSON files for the torture run's input folders, each row with an id of its own.

Files land in the watched folder in one of three ways: ``atomic`` (written in a staging folder
beside it, then renamed into place), ``cp`` (the ``cp`` command writes it in place) or
``chunked`` (opened in place and written in a few chunks with pauses, lines cut anywhere).
Every row written is remembered, so a sink can be compared with the input afterwards.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["KINDS", "METHODS", "InputFolder", "Row"]

KINDS = ("a", "b c/é", None)
"""Values of the partition column: a plain one, one that needs escaping, and null."""

METHODS = ("atomic", "cp", "chunked")

Row = tuple[int, int, str, "str | None"]
"""``(id, file, note, kind)``, the columns of one input row."""


@dataclass
class InputFolder:
    """The input folder of one pipeline and every row ever written into it."""

    folder: Path
    staging: Path
    rng: random.Random
    max_rows: int = 40
    in_place: bool = False
    rows: dict[int, Row] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    methods: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METHODS, 0))
    arrived_by: dict[str, str] = field(default_factory=dict)
    _next_file: int = 0
    _next_id: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)

    def _new_file(self) -> tuple[str, bytes, str, float, int]:
        """Draw the next file: name, bytes, how it arrives, and for ``chunked`` the pause
        between chunks and their number."""
        with self._lock:
            index = self._next_file
            self._next_file += 1
            # one file in 25 is empty: it is read and counts no row
            count = 0 if self.rng.random() < 0.04 else self.rng.randint(1, self.max_rows)
            lines = []
            for row in range(count):
                ident = self._next_id
                self._next_id += 1
                record: Row = (ident, index, f"f{index}r{row}", KINDS[ident % len(KINDS)])
                self.rows[ident] = record
                lines.append(
                    json.dumps(
                        {"id": ident, "file": index, "note": record[2], "kind": record[3]},
                        ensure_ascii=False,
                    )
                )
            data = "".join(line + "\n" for line in lines).encode()
            name = self.file_name(index)
            self.contents[name] = data
            method = self.rng.choice(METHODS) if self.in_place else "atomic"
            self.methods[method] += 1
            self.arrived_by[name] = method
            pause = self.rng.uniform(0.02, 0.15)
            chunks = self.rng.randint(2, 6)
        return name, data, method, pause, chunks

    def add(self) -> str:
        """Write one new file into the folder; return its name."""
        name, data, method, pause, chunks = self._new_file()
        target = self.folder / name
        if method == "atomic":
            staged = self.staging / f"{name}.{os.getpid()}.{threading.get_ident()}"
            staged.write_bytes(data)
            os.rename(staged, target)
        elif method == "cp":
            staged = self.staging / name
            staged.write_bytes(data)
            subprocess.run(["cp", str(staged), str(target)], check=True)
            staged.unlink()
        else:
            with target.open("wb") as handle:
                cuts = sorted(self.rng.sample(range(len(data) + 1), k=min(chunks - 1, len(data))))
                start = 0
                for cut in [*cuts, len(data)]:
                    handle.write(data[start:cut])
                    handle.flush()
                    start = cut
                    time.sleep(pause)
        return name

    @staticmethod
    def file_name(index: int) -> str:
        """The name of the ``index``-th file written."""
        return f"ev-{index:05d}.json"

    def add_many(self, count: int) -> None:
        for _ in range(count):
            self.add()

    @property
    def file_count(self) -> int:
        return self._next_file

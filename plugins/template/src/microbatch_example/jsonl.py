"""``example-jsonl``: an exactly-once sink writing one JSON-lines file per batch."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

import microbatch as mb

__all__ = ["JsonLinesSink", "read_jsonl_folder"]


def _encode(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot write a value of type {type(value).__name__} as JSON")


def _not_empty(path: str) -> str | None:
    """The validator of option ``path`` (a module-level function keeps the options picklable)."""
    return None if path.strip() else "must not be empty"


class JsonLinesSink(mb.Sink):
    """Writes batch ``N`` to ``<path>/batch-<N>.jsonl``, one JSON object per row.

    ``write`` stages each part in a hidden file; ``commit`` joins the parts into a hidden file
    and links it to its final name, which fails if the file exists: a replayed batch is
    therefore applied once. Readers should ignore names starting with a dot.
    """

    format_name = "example-jsonl"
    description = "One JSON-lines file per batch, exactly once (example connector)"
    options = mb.OptionSpec(
        mb.Option(
            name="path",
            type="string",
            required=True,
            validate=_not_empty,
            doc="Folder that receives one file batch-<batch id>.jsonl per batch.",
        ),
    )
    output_modes = frozenset({mb.OutputMode.APPEND})
    guarantee = mb.Guarantee.EXACTLY_ONCE

    def __init__(self, context: mb.SinkContext) -> None:
        super().__init__(context)
        self.folder = Path(self.opts.path)
        self.folder.mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"JsonLinesSink[{self.folder}]"

    def batch_file(self, batch_id: int) -> Path:
        """Where batch ``batch_id`` ends up."""
        return self.folder / f"batch-{batch_id:010d}.jsonl"

    def _hidden(self, batch_id: int, suffix: str) -> Path:
        return self.folder / f".batch-{batch_id:010d}.{uuid.uuid4().hex}.{suffix}"

    def write(self, batch_id: int, data: pa.RecordBatchReader) -> str:
        part = self._hidden(batch_id, "part")
        with part.open("w", encoding="utf-8") as out:
            for batch in data:
                for row in batch.to_pylist():
                    out.write(json.dumps(row, default=_encode, ensure_ascii=False) + "\n")
        return part.name

    def commit(self, batch_id: int, messages: list[Any]) -> None:
        parts = [self.folder / name for name in messages]
        target = self.batch_file(batch_id)
        try:
            if target.exists():
                return  # a replayed batch that is already applied
            staged = self._hidden(batch_id, "tmp")
            with staged.open("wb") as out:
                for part in parts:
                    out.write(part.read_bytes())
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(staged, target)  # fails when the batch is already there
            except FileExistsError:
                pass
            finally:
                staged.unlink()
        finally:
            for part in parts:
                part.unlink(missing_ok=True)

    def abort(self, batch_id: int, messages: list[Any]) -> None:
        for name in messages:
            (self.folder / name).unlink(missing_ok=True)


def read_jsonl_folder(folder: str | os.PathLike[str], schema: pa.Schema) -> pa.Table:
    """Every committed batch file in ``folder``, in batch order, as one table of ``schema``.

    Staged files (names starting with a dot) are not read.
    """
    options = pajson.ParseOptions(explicit_schema=schema)
    tables = [
        pajson.read_json(path, parse_options=options)
        for path in sorted(Path(folder).glob("batch-*.jsonl"))
        if path.stat().st_size > 0
    ]
    return pa.concat_tables(tables) if tables else schema.empty_table()

"""``example-jsonl``: an exactly-once sink writing one JSON-lines file per batch."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

import microbatch as mb

__all__ = [
    "JsonLinesPartWriter",
    "JsonLinesSink",
    "JsonLinesWriter",
    "StagedPart",
    "read_jsonl_folder",
]


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
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset({mb.OutputMode.APPEND}), guarantee=mb.Guarantee.EXACTLY_ONCE
    )

    def describe(self) -> str:
        return f"JsonLinesSink[{self.opts.path}]"

    def stream_writer(self, context: mb.WriteContext) -> JsonLinesWriter:
        folder = Path(self.opts.path)
        folder.mkdir(parents=True, exist_ok=True)  # I/O belongs to the writer, not the sink
        return JsonLinesWriter(folder)


@dataclass(frozen=True)
class StagedPart(mb.CommitMessage):
    """The hidden file one part was written to."""

    name: str


def batch_file(folder: Path, batch_id: int) -> Path:
    """Where batch ``batch_id`` ends up."""
    return folder / f"batch-{batch_id:010d}.jsonl"


def _hidden(folder: Path, batch_id: int, suffix: str) -> Path:
    return folder / f".batch-{batch_id:010d}.{uuid.uuid4().hex}.{suffix}"


class JsonLinesPartWriter(mb.PartWriter):
    """Writes one part to a hidden file of the folder (it holds only the folder: it pickles)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> StagedPart:
        staged = _hidden(self.folder, part.batch_id, "part")
        with staged.open("w", encoding="utf-8") as out:
            for batch in data:
                for row in batch.to_pylist():
                    out.write(json.dumps(row, default=_encode, ensure_ascii=False) + "\n")
        return StagedPart(staged.name)


class JsonLinesWriter(mb.StreamWriter):
    """Joins the parts of a batch into its file at commit."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def part_writer(self) -> JsonLinesPartWriter:
        return JsonLinesPartWriter(self.folder)

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        parts = [self.folder / m.name for m in messages if isinstance(m, StagedPart)]
        target = batch_file(self.folder, batch_id)
        try:
            if target.exists():
                return  # a replayed batch that is already applied
            staged = _hidden(self.folder, batch_id, "tmp")
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

    def abort(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        for message in messages:
            if isinstance(message, StagedPart):
                (self.folder / message.name).unlink(missing_ok=True)


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

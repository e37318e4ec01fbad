"""The schema of CSV files (``inferSchema``), from records tokenised as the reader reads them.

Column names come from the header (Spark's rules: an empty or null name becomes ``_c<i>``,
names repeated regardless of case get their position appended) or are ``_c0``, ``_c1``...;
their number is the first record's. With ``inferSchema`` each column takes the first of
BIGINT, DOUBLE, BOOLEAN, DATE (``yyyy-MM-dd`` values only, as Spark infers dates), TIMESTAMP
that reads every one of its values (nulls aside) with the source's options, else STRING;
without it every column is STRING.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ._csv_columns import ColumnConverter
from ._csv_reader import CsvSettings, PieceReader
from ._spark_csv import Record, Tokenizer, stream_records
from ._spark_csv_values import convert

__all__ = ["infer_csv_schema"]

_CANDIDATES = (
    pa.int64(),
    pa.float64(),
    pa.bool_(),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
    pa.string(),
)
_BATCH = 65536


def safe_names(header: list[str | None], null_value: str) -> list[str]:
    """Spark's column names from a header record (case-insensitive)."""
    lowered = [name.lower() for name in header if name is not None]
    repeated = {name for name in lowered if lowered.count(name) > 1}
    names = []
    for index, name in enumerate(header):
        if name is None or name == "" or name == null_value:
            names.append(f"_c{index}")
        elif name.lower() in repeated:
            names.append(f"{name}{index}")
        else:
            names.append(name)
    return names


def _records(
    files: Iterable[Iterator[tuple[bytes, int]]], settings: CsvSettings
) -> Iterator[Iterator[Record]]:
    """Each file's records."""
    for blocks in files:
        if settings.options.multi_line:
            pieces = (data.decode("utf-8", errors="replace") for data, _ in blocks)
            yield stream_records(PieceReader(pieces), settings.options)
            continue
        tokenizer = Tokenizer(settings.options)
        yield (
            record
            for data, first_line in blocks
            for record in tokenizer.records(data.decode("utf-8", errors="replace"), first_line)
        )


class _Columns:
    """The type each column may still have."""

    def __init__(self, settings: CsvSettings, width: int) -> None:
        self.settings = settings
        self.converter = ColumnConverter(settings.options, settings.datetimes)
        self.candidates = [0] * width
        self.seen = [False] * width

    def see(self, rows: list[list[str | None]]) -> None:
        for index, position in enumerate(self.candidates):
            if _CANDIDATES[position] == pa.string():
                continue
            texts = self.converter.nulls(
                pa.array([row[index] if index < len(row) else None for row in rows], pa.string())
            )
            if texts.null_count == len(texts):
                continue
            self.seen[index] = True
            while not self._reads(texts, _CANDIDATES[position]):
                position += 1
            self.candidates[index] = position

    def _reads(self, texts: pa.Array, dtype: pa.DataType) -> bool:
        if dtype == pa.string():
            return True
        if dtype == pa.date32():  # as Spark infers dates: yyyy-MM-dd only
            plain = pc.match_substring_regex(texts, r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
            if not pc.all(plain).as_py():
                return False
        _, todo = self.converter.convert(texts, dtype)
        if todo is None:
            return True
        one = pa.schema([pa.field("v", dtype)])
        parse = self.settings.datetimes.parse_one
        return all(
            convert([text], one, self.settings.options, parse)[1] is None
            for text in texts.filter(todo).to_pylist()
        )

    def types(self) -> list[pa.DataType]:
        """The inferred types (STRING for a column of nulls only)."""
        return [
            _CANDIDATES[position] if seen else pa.string()
            for position, seen in zip(self.candidates, self.seen, strict=True)
        ]


def infer_csv_schema(
    files: Iterable[Iterator[tuple[bytes, int]]],
    settings: CsvSettings,
    *,
    header: bool,
    infer_types: bool,
) -> pa.Schema | None:
    """The schema of the files, each given as blocks of whole lines; None when they hold no
    record."""
    names: list[str] | None = None
    columns: _Columns | None = None
    for records in _records(files, settings):
        first = True
        batch: list[list[str | None]] = []
        for tokens, _, _ in records:
            if first:
                first = False
                if names is None:
                    width = len(tokens)
                    if header:
                        names = safe_names(tokens, settings.options.null_value)
                    else:
                        names = [f"_c{index}" for index in range(width)]
                    columns = _Columns(settings, width)
                if header:
                    continue
            if not infer_types:
                break
            batch.append(tokens)
            if len(batch) >= _BATCH and columns is not None:
                columns.see(batch)
                batch = []
        if batch and columns is not None:
            columns.see(batch)
    if names is None or columns is None:
        return None
    types = columns.types() if infer_types else [pa.string()] * len(names)
    return pa.schema([pa.field(name, dtype) for name, dtype in zip(names, types, strict=True)])

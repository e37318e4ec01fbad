"""Builders for reading: ``session.read_stream`` (a stream) and ``session.read`` (a table)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ._builder import FormatOptionsBuilder
from ._registry import ConnectorInfo
from .connector import ReadAllAvailable, ReadContext, Source, Split, SplitReader, StreamReader
from .errors import ConfigurationError, SchemaError
from .options import Options, redact_error
from .types import as_schema

if TYPE_CHECKING:
    from ._frame import StreamFrame
    from ._session import Session
    from .state import StateStore

__all__ = ["DataReader", "DataStreamReader", "SourceSpec"]


@dataclass(frozen=True)
class SourceSpec:
    """A validated source configuration: the connector object and the schema it gave."""

    info: ConnectorInfo
    options: Options
    source: Source
    schema: pa.Schema

    @property
    def format_name(self) -> str:
        return self.info.format_name

    def stream_reader(
        self,
        *,
        state: StateStore | None = None,
        streaming: bool = True,
        wake: Any = None,
        query_id: str | None = None,
    ) -> StreamReader:
        """A reader for one run of this source."""
        context = ReadContext(
            schema=self.schema,
            state=state,
            wake=wake if wake is not None else _no_wake,
            streaming=streaming,
            query_id=query_id,
            session=self.source.session,
        )
        return self.source.stream_reader(context)


def _no_wake() -> None:
    """The wake callback of readers nobody waits on (batch reads, tests)."""


class _ReaderBase(FormatOptionsBuilder):
    _streaming: bool

    def __init__(self, session: Session) -> None:
        self._session = session
        self._format: str | None = None
        self._options: dict[str, Any] = {}
        self._schema: pa.Schema | None = None

    def schema(self, schema: pa.Schema | str) -> Any:
        """The schema of the data: a ``pyarrow.Schema`` or a DDL string ``"id BIGINT, ..."``."""
        self._schema = as_schema(schema)
        return self

    def _spec(self, path: str | None) -> SourceSpec:
        if self._format is None:
            raise ConfigurationError("No source format given: call .format(name) before .load()")
        info = self._session.registry.find("source", self._format)
        raw = dict(self._options)
        if path is not None:
            if any(key.lower() == "path" for key in raw):
                raise ConfigurationError(
                    "There is a 'path' option set and load() is called with a path: "
                    "give the path only once"
                )
            raw["path"] = path
        cls: Any = info.cls
        options = cls.options.parse(raw, connector=info.format_name)
        del raw  # raw secret values: keep them out of this frame's locals in a traceback
        rule = cls.capabilities.user_schema
        if self._schema is not None and rule == "forbidden":
            raise SchemaError(
                f"Source '{info.format_name}' has a fixed schema and does not accept one from "
                ".schema(...); remove the call"
            )
        inferring = (
            options.schema_inference
            if "schemaInference" in options and options.is_set("schemaInference")
            else self._session.conf.get("schemaInference")
        )
        if self._schema is None and rule == "required" and not inferring:
            raise SchemaError(
                f"Source '{info.format_name}' needs a schema: call .schema(\"col TYPE, ...\") "
                'before .load(), or enable inference with .option("schemaInference", True) '
                'where the source supports it, or session.conf.set("schemaInference", True)'
            )
        source: Source = cls(
            options, user_schema=self._schema, session=self._session, streaming=self._streaming
        )
        # Ask for (or infer) the schema once, now, so that a query started later uses the same
        # one and a source that cannot tell its schema fails here, not at start().
        failure: BaseException | None = None
        try:
            schema = source.schema()
        except BaseException as error:
            failure = redact_error(error, options.secret_values())
            if failure is error:
                raise
        if failure is not None:
            raise failure  # outside the except block: no unredacted __context__
        if not isinstance(schema, pa.Schema):
            raise SchemaError(
                f"Source '{info.format_name}': schema() returned {schema!r}, not a pyarrow.Schema"
            )
        return SourceSpec(info=info, options=options, source=source, schema=schema)


class DataStreamReader(_ReaderBase):
    """``session.read_stream``: configure a source, then :meth:`load` a :class:`StreamFrame`.

    Options are validated by :meth:`load`: an unknown option, a wrong value or a missing
    required one fails here, not later on the query's thread.
    """

    _streaming = True

    def load(self, path: str | None = None) -> StreamFrame:
        from ._frame import StreamFrame

        return StreamFrame(self._session, self._spec(path))


class DataReader(_ReaderBase):
    """``session.read``: configure a source, then :meth:`load` everything it holds now."""

    _streaming = False

    def load(self, path: str | None = None) -> pa.Table:
        """Everything the source holds now, as one ``pyarrow.Table``."""
        spec = self._spec(path)
        try:
            return self._read_all(spec)
        except BaseException as error:
            failure = redact_error(error, spec.options.secret_values())
            if failure is error:
                raise
        raise failure  # outside the except block: no unredacted __context__

    def _read_all(self, spec: SourceSpec) -> pa.Table:
        reader = spec.stream_reader(streaming=False)
        try:
            start = reader.initial_offset()
            end = reader.latest_offset(start, ReadAllAvailable())
            batches: list[pa.RecordBatch] = []
            if end != start:
                threads = self._session.conf.get("maxReadThreads") or os.cpu_count() or 1
                batches = _read_splits(
                    reader.split_reader(), reader.partitions(start, end), threads
                )
            return pa.Table.from_batches(batches, schema=spec.schema)
        finally:
            reader.stop()


def _read_splits(
    split_reader: SplitReader, splits: Sequence[Split], threads: int
) -> list[pa.RecordBatch]:
    """The record batches of ``splits``, in split order, read on up to ``threads`` threads (as
    the engine reads the splits of a streaming batch)."""
    splits = list(splits)
    if min(threads, len(splits)) <= 1:
        parts = [_read_split(split_reader, split) for split in splits]
    else:
        with ThreadPoolExecutor(min(threads, len(splits)), "microbatch-read") as pool:
            parts = list(pool.map(lambda split: _read_split(split_reader, split), splits))
    return [batch for part in parts for batch in part]


def _read_split(split_reader: SplitReader, split: Split) -> list[pa.RecordBatch]:
    """The record batches of one split."""
    batches: list[pa.RecordBatch] = []
    for item in split_reader.read(split):
        batches.extend(item.to_batches() if isinstance(item, pa.Table) else [item])
    return batches

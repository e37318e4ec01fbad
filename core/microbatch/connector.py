"""The connector contract: what a source and a sink implement.

A connector has three layers, as in Spark's Python Data Source API:

- the **connector object** (:class:`Source`, :class:`Sink`): its format name, declared options,
  capabilities and schema. Making one does no I/O; the builders make one per ``load()`` or
  ``start()``.
- the **stream reader / stream writer** (:class:`StreamReader`, :class:`StreamWriter`), made
  once per query run from the connector object. They run on the query's thread: offsets,
  planning, committing. They may hold connections.
- the **split reader / part writer** (:class:`SplitReader`, :class:`PartWriter`): what reads
  one split or writes one part of a batch. They must pickle, and open their own connections
  and files inside ``read``/``write``, because a split may be read in another process or on
  another machine. The engine calls them on worker threads, several at once.

Source lifecycle (one query run)::

    source = SourceClass(options, user_schema=..., session=..., streaming=...)   no I/O
    source.schema()                            once per load(): the schema of every batch
    reader = source.stream_reader(context)     once per run
    reader.initial_offset()                    once, only when the checkpoint has no offsets
    reader.prepare_available_now()             once, only under the available-now trigger
    reader.latest_offset(start, limit)         every trigger; returns ``start`` when nothing is new
    reader.report_latest_offset()              right after; where the data ends (progress only)
    reader.partitions(start, end)              once per batch (again on replay, same offsets)
    reader.split_reader().read(split)          once per split, maybe in parallel, maybe elsewhere
    reader.commit(end)                         after the batch ending at ``end`` is durably written
    reader.stop()                              once at the end of the run; must be idempotent

Sink lifecycle (one query run)::

    sink = SinkClass(options, session=...)     no I/O
    writer = sink.stream_writer(context)       once per run
    writer.part_writer().write(data, part)     once per split, maybe in parallel, maybe elsewhere
    writer.commit(messages, batch_id)          once per batch; makes the batch visible atomically
    writer.abort(messages, batch_id)           instead of commit when a write failed
    writer.stop()                              once at the end of the run; must be idempotent

A replayed batch (a restart after a crash between the offset log and the commit log, or a
retry after a :class:`~microbatch.errors.RetriableError`) calls ``partitions``/``read``/
``write``/``commit`` again with the same batch id and the same offsets. A sink that declares
``Guarantee.EXACTLY_ONCE`` must make that second ``commit`` a no-op.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pyarrow as pa

from ._identity import identity_of
from .errors import UnsupportedOperationError
from .options import Options, OptionSpec

if TYPE_CHECKING:
    from .state import StateStore

__all__ = [
    "BatchWriter",
    "CommitMessage",
    "Guarantee",
    "Offset",
    "OutputMode",
    "PartContext",
    "PartWriter",
    "ReadAllAvailable",
    "ReadContext",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxFiles",
    "ReadMaxRows",
    "Sink",
    "SinkCapabilities",
    "Source",
    "SourceCapabilities",
    "Split",
    "SplitReader",
    "StreamReader",
    "StreamWriter",
    "TableMessage",
    "WriteContext",
]

Offset = dict[str, Any]
"""A source position: a JSON-serialisable dict (nested dicts, lists, str, int, float, bool)."""


class OutputMode(enum.StrEnum):
    """How each batch's rows relate to the sink's contents (Spark's output modes)."""

    APPEND = "append"
    COMPLETE = "complete"
    UPDATE = "update"

    @classmethod
    def parse(cls, value: str | OutputMode) -> OutputMode:
        try:
            return cls(str(value).lower())
        except ValueError:
            from .errors import ConfigurationError

            raise ConfigurationError(
                f"Invalid streaming output mode: {value}. Accepted output modes are "
                "'append', 'complete', 'update'."
            ) from None


class Guarantee(enum.StrEnum):
    """What a sink promises when a batch is replayed after a crash."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True)
class ReadLimit:
    """How much one batch may take. The engine passes one to ``StreamReader.latest_offset``."""


@dataclass(frozen=True)
class ReadAllAvailable(ReadLimit):
    """Take everything available (``once`` trigger, batch reads, sources without limits)."""


@dataclass(frozen=True)
class ReadMaxRows(ReadLimit):
    max_rows: int


@dataclass(frozen=True)
class ReadMaxFiles(ReadLimit):
    max_files: int


@dataclass(frozen=True)
class ReadMaxBytes(ReadLimit):
    max_bytes: int


class Split:
    """One independent piece of a batch's input (Spark's ``InputPartition``).

    Subclass it, as a frozen dataclass of small picklable values (a file and its size, a
    partition and an offset range): the engine hands it to :meth:`SplitReader.read`, maybe in
    another process.
    """


class CommitMessage:
    """What one :meth:`PartWriter.write` tells :meth:`StreamWriter.commit` (Spark's
    ``WriterCommitMessage``). Subclass it as a small picklable dataclass (the files written)."""


@dataclass(frozen=True)
class TableMessage(CommitMessage):
    """The rows of one part, for writers that apply a whole batch at commit."""

    table: pa.Table


@dataclass(frozen=True)
class SourceCapabilities:
    """What a source supports, declared once as the class attribute ``capabilities``."""

    replayable: bool = True
    """True when reading the same split always yields the same rows (needed for
    exactly-once). Sources that cannot replay (socket) set False and the engine warns."""
    available_now: bool = False
    """True when ``prepare_available_now`` pins a target that limited batches then reach."""
    user_schema: Literal["forbidden", "optional", "required"] = "forbidden"
    """Whether ``.schema(...)`` is refused (a fixed schema), optional or required."""
    streaming_only: str = ""
    """Set for a source that cannot be read in batch (``session.read``), to what the user
    should do instead (``"use session.read_stream.format('socket')"``): making the source with
    ``streaming=False`` then raises :class:`~microbatch.errors.UnsupportedOperationError`
    ("The socket source only supports streaming reads: use ...")."""


@dataclass(frozen=True)
class SinkCapabilities:
    """What a sink supports, declared once as the class attribute ``capabilities``."""

    output_modes: frozenset[OutputMode] = frozenset({OutputMode.APPEND})
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE
    needs_checkpoint: bool = True
    """False for debugging sinks (console, memory, foreach_batch): a temporary checkpoint is
    used when the user gives none."""
    partition_by: bool = False
    """True when the sink accepts ``partition_by`` columns."""


@dataclass(frozen=True)
class ReadContext:
    """What a stream reader is given, once per run.

    ``schema`` is the schema :meth:`Source.schema` returned when the stream was loaded.
    ``state`` is the source's private folder in the checkpoint (``None`` for batch reads).
    ``wake`` tells the engine new data has arrived, so that the default trigger does not wait
    for its polling interval (call it from any thread). ``query_id`` is ``None`` for batch reads.
    """

    schema: pa.Schema
    state: StateStore | None = None
    wake: Callable[[], None] = lambda: None
    streaming: bool = True
    query_id: str | None = None
    session: Any = None


@dataclass(frozen=True)
class WriteContext:
    """What a stream writer is given, once per run.

    ``query_id`` is stable across every restart of one checkpoint: an exactly-once sink uses it
    (with the batch id) as its idempotency key. ``schema`` is the schema of the rows the sink
    receives (after transforms); ``state`` the sink's private folder in the checkpoint.
    """

    schema: pa.Schema
    output_mode: OutputMode = OutputMode.APPEND
    query_id: str = ""
    query_name: str | None = None
    partition_by: tuple[str, ...] = ()
    state: StateStore | None = None
    session: Any = None
    checkpoint_is_temporary: bool = False
    """True when the user gave no checkpoint: batch ids then restart at 0 on every start."""
    last_committed_batch_id: int | None = None
    """The newest batch id in the checkpoint's commit log; ``None`` when no batch was ever
    committed. A sink that keeps its own record of committed batches can check it agrees."""
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PartContext:
    """Which part :meth:`PartWriter.write` is writing (Spark's partition id and epoch)."""

    batch_id: int
    part_index: int
    """The index, in ``StreamReader.partitions``'s list, of the split being written."""
    num_parts: int
    query_id: str = ""


class _Connector:
    format_name: ClassVar[str] = ""
    """The name users pass to ``format()``."""
    options: ClassVar[OptionSpec] = OptionSpec()
    """The options this connector accepts; validated before ``__init__`` runs."""
    description: ClassVar[str] = ""
    """One line for ``microbatch connectors``."""

    opts: Options
    """This connector's validated options."""
    session: Any
    """The owning ``Session`` (``None`` in tests that make connectors directly)."""

    def describe(self) -> str:
        """The description shown in progress records (``RateSource[rowsPerSecond=5]``); asked
        once per run, so it must not change while the query runs."""
        return f"{type(self).__name__}"

    @classmethod
    def identity(cls, options: Options) -> dict[str, Any]:
        """What this connector reads or writes with these (validated) options: a JSON-able dict
        recorded in the checkpoint's metadata on the first start and compared on every later
        one. A start whose identity differs is refused with a ``CheckpointMismatchError``,
        since the checkpoint's offsets and commits describe another input or output.

        The default holds ``format`` (the format name), the ``path`` option when declared (as
        an absolute path or URL) and every option declared with ``Option(identity=True)``;
        secret options are never part of it. Override it to add what the options do not say.
        """
        # A source's location is compared as spelt (``in/./`` is another one): sources key the
        # files they have read by path, so another spelling would read them all again.
        return identity_of(
            cls.format_name, cls.options, options, exact_location=issubclass(cls, Source)
        )


class Source(_Connector, ABC):
    """A stream of data addressed by offsets: the connector object of a source.

    Construction does no I/O. Implement :meth:`schema` and :meth:`stream_reader`. A source
    that only streams declares ``SourceCapabilities(streaming_only=...)`` and is refused for
    batch reads here.
    """

    capabilities: ClassVar[SourceCapabilities] = SourceCapabilities()

    def __init__(
        self,
        options: Options,
        *,
        user_schema: pa.Schema | None = None,
        session: Any = None,
        streaming: bool = True,
    ) -> None:
        self.opts = options
        self.user_schema = user_schema
        """The schema given with ``.schema(...)``, if any."""
        self.session = session
        self.streaming = streaming
        """False for ``session.read`` (a batch read)."""
        instead = type(self).capabilities.streaming_only
        if instead and not streaming:
            raise UnsupportedOperationError(
                f"The {self.format_name} source only supports streaming reads: {instead}."
            )

    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of every record batch this source yields.

        Called once per ``load()``. A source that infers its schema may look at its data here
        (and only here); the result is handed to every stream reader in ``ReadContext.schema``.
        """

    @abstractmethod
    def stream_reader(self, context: ReadContext) -> StreamReader:
        """The reader for one query run (or one batch read)."""


class StreamReader(ABC):
    """The query-side half of a source: offsets, planning and cleanup, for one run."""

    def default_read_limit(self) -> ReadLimit:
        """The limit the engine passes to ``latest_offset`` (from options such as
        ``maxFilesPerTrigger``); the ``once`` trigger passes ``ReadAllAvailable`` instead."""
        return ReadAllAvailable()

    @abstractmethod
    def initial_offset(self) -> Offset:
        """Where a new query starts. Called when the checkpoint has no offsets yet.

        The engine records the answer only with the first batch. A source whose initial offset
        depends on when it is asked (the current end of a topic, "now") must keep it in
        ``ReadContext.state`` on the first call and return the kept one afterwards, so that a
        restart before the first batch starts from the same place (the test kit checks it).
        """

    @abstractmethod
    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The end of the next batch, never beyond what ``limit`` allows.

        Return ``start`` itself (an equal dict) when nothing new has arrived: no batch runs.
        Called on every trigger, often (every few milliseconds) while idle: keep it cheap.
        """

    def report_latest_offset(self) -> Offset | None:
        """Where the source's available data ends, for the progress record's
        ``latestOffset`` (Spark's ``reportLatestOffset``); ``None`` when unknown (the default).

        Called right after each :meth:`latest_offset`. It may be beyond the batch's end when a
        read limit holds data back; it never moves the query. Answer from what
        ``latest_offset`` just learnt.
        """
        return None

    @abstractmethod
    def partitions(self, start: Offset, end: Offset) -> Sequence[Split]:
        """The data in ``(start, end]`` as independent :class:`Split` values.

        An empty list is allowed (the batch then has no rows, and the sink still commits it).
        Called once per batch, and again with the same offsets when the batch is replayed; a
        replayable source must then return splits that read the same rows.
        """

    def split_reader(self) -> SplitReader:
        """The picklable object that reads this run's splits (called once per batch).

        The default returns this reader itself when it is also a :class:`SplitReader`.
        """
        return _itself_as(self, SplitReader, "split_reader")

    def commit(self, end: Offset) -> None:
        """Everything up to ``end`` is durably written to the sink; clean up behind it."""
        return None

    def metrics(self) -> dict[str, Any]:
        """Figures for the progress record's ``sources[0]["metrics"]`` (offsets behind latest,
        files held back...). Called after each batch, on the query's thread."""
        return {}

    def prepare_available_now(self) -> None:
        """Pin the current end of the data as the target of an available-now run."""
        return None

    def stop(self) -> None:
        """Release resources. Idempotent; called once per run, also after a failure."""
        return None


class SplitReader(ABC):
    """Reads splits: must pickle, and opens what it needs inside :meth:`read`."""

    @abstractmethod
    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        """The record batches of one split, in the source's schema.

        May run on a worker thread concurrently with other reads, or in another process from
        a pickled copy: keep per-split state local to this call.
        """


class Sink(_Connector, ABC):
    """A two-phase writer: the connector object of a sink.

    Construction does no I/O. Implement :meth:`stream_writer`.
    """

    capabilities: ClassVar[SinkCapabilities] = SinkCapabilities()

    def __init__(self, options: Options, *, session: Any = None) -> None:
        self.opts = options
        self.session = session

    @abstractmethod
    def stream_writer(self, context: WriteContext) -> StreamWriter:
        """The writer for one query run."""


class StreamWriter(ABC):
    """The query-side half of a sink: commits and aborts batches, for one run."""

    def part_writer(self) -> PartWriter:
        """The picklable object that writes this run's parts (called once per batch).

        The default returns this writer itself when it is also a :class:`PartWriter`.
        """
        return _itself_as(self, PartWriter, "part_writer")

    @abstractmethod
    def commit(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        """Make batch ``batch_id`` visible atomically, given the messages of its parts (in
        part order; ``None`` for a part whose writer returned nothing).

        Called again with the same batch id after a crash or a retry; an exactly-once sink
        must detect that the batch is already applied and do nothing.
        """

    def abort(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        """Clean up the parts written for a batch whose write failed (best effort);
        ``messages`` has ``None`` for parts that wrote nothing."""
        return None

    def stop(self) -> None:
        """Release resources. Idempotent; called once per run, also after a failure."""
        return None


class PartWriter(ABC):
    """Writes parts of batches: must pickle, and opens what it needs inside :meth:`write`."""

    @abstractmethod
    def write(self, data: pa.RecordBatchReader, part: PartContext) -> CommitMessage | None:
        """Write one part (one split) of batch ``part.batch_id``; return a small message.

        Nothing written here may become visible to readers before ``StreamWriter.commit``.
        May run on worker threads, or in another process from a pickled copy.
        """


def _itself_as(half: object, kind: type, method: str) -> Any:
    """``half`` itself when it is also a ``kind``: the default ``split_reader()`` of a stream
    reader that also reads its splits, and ``part_writer()`` of a writer that writes its parts."""
    if isinstance(half, kind):
        return half
    raise TypeError(
        f"{type(half).__qualname__} must implement {method}() (or also subclass "
        f"microbatch.{kind.__name__})"
    )


class _TablePartWriter(PartWriter):
    """Gathers a part's rows into a :class:`TableMessage`."""

    def write(self, data: pa.RecordBatchReader, part: PartContext) -> TableMessage:
        return TableMessage(data.read_all())


class BatchWriter(StreamWriter):
    """A writer that takes a whole batch in one call: implement :meth:`add_batch`.

    The parts of a batch are gathered in memory and handed over as one ``pyarrow.Table``, in
    split order, when the engine commits the batch.
    """

    def __init__(self, context: WriteContext) -> None:
        self.context = context

    def part_writer(self) -> PartWriter:
        return _TablePartWriter()

    def commit(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        tables = [message.table for message in messages if isinstance(message, TableMessage)]
        if tables:
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        else:
            table = self.context.schema.empty_table()
        self.add_batch(table, batch_id)

    @abstractmethod
    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        """Apply one batch. Called once per batch, again with the same id after a crash."""

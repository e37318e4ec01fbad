"""The connector contract: what a source and a sink implement.

A connector is a class with a ``format_name``, declared ``options`` and the methods below. The
engine calls them from its own thread; ``Source.read`` and ``Sink.write`` may run on worker
threads, several at once, one split each. Offsets are JSON-serialisable dicts; data is Arrow.

Source lifecycle (one query run)::

    1. __init__(context)                 options are already validated
    2. initial_offset()                  once, only when the checkpoint has no offsets yet
    3. prepare_available_now()           once, only under the available-now trigger
    4. latest_offset(start, limit)       every trigger; returns ``start`` when nothing is new
       report_latest_offset()            right after; where the data ends (progress only)
    5. plan(start, end)                  once per batch (again on replay, with the same offsets)
    6. read(split)                       once per split, maybe in parallel threads
    7. commit(end)                       after the batch ending at ``end`` is durably written
    8. stop()                            once at the end of the run; must be idempotent

Sink lifecycle (one query run)::

    1. __init__(context)
    2. write(batch_id, data)             once per split, maybe in parallel; returns a message
    3. commit(batch_id, messages)        once per batch; makes the batch visible atomically
       abort(batch_id, messages)         instead of commit when a write failed
    4. stop()                            once at the end of the run; must be idempotent

A replayed batch (restart after a crash between the offset log and the commit log) calls
``plan``/``read``/``write``/``commit`` again with the same batch id and the same offsets. A sink
that declares ``Guarantee.EXACTLY_ONCE`` must make that second ``commit`` a no-op.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from ._identity import identity_of
from .options import Options, OptionSpec

if TYPE_CHECKING:
    from .state import StateStore

__all__ = [
    "BatchSink",
    "Guarantee",
    "Offset",
    "OutputMode",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxFiles",
    "ReadMaxRows",
    "Sink",
    "SinkContext",
    "Source",
    "SourceContext",
    "current_part",
    "part_scope",
]

_CURRENT_PART: contextvars.ContextVar[int] = contextvars.ContextVar("microbatch_part", default=0)


def current_part() -> int:
    """Inside ``Sink.write``: the index in ``Source.plan``'s list of the split being written
    (Spark's partition id). 0 outside a write."""
    return _CURRENT_PART.get()


@contextlib.contextmanager
def part_scope(index: int) -> Iterator[None]:
    """Make :func:`current_part` return ``index`` inside the block (the engine wraps each
    ``Sink.write`` in one; tests that call ``write`` directly may too)."""
    token = _CURRENT_PART.set(index)
    try:
        yield
    finally:
        _CURRENT_PART.reset(token)


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
    """How much one batch may take. The engine passes one to ``Source.latest_offset``."""


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


@dataclass
class SourceContext:
    """What a source is given at construction.

    ``state`` is the source's private folder in the checkpoint (``None`` for batch reads and
    queries without a checkpoint). ``wake`` tells the engine new data has arrived, so that the
    default trigger does not wait for its polling interval (call it from any thread).
    """

    options: Options
    schema: pa.Schema | None = None
    state: StateStore | None = None
    wake: Callable[[], None] = lambda: None
    streaming: bool = True
    session: Any = None


@dataclass
class SinkContext:
    """What a sink is given at construction.

    ``schema`` is the schema of the rows the sink will receive (after transforms). ``state`` is
    the sink's private folder in the checkpoint. ``session`` is the owning ``Session`` (the
    memory sink registers its table there).
    """

    options: Options
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
    committed (a new checkpoint). A sink that keeps its own record of committed batches can
    check that it agrees with this."""
    extras: Mapping[str, Any] = field(default_factory=dict)


class _Connector:
    format_name: ClassVar[str] = ""
    """The name users pass to ``format()``."""
    options: ClassVar[OptionSpec] = OptionSpec()
    """The options this connector accepts; validated before ``__init__`` runs."""
    description: ClassVar[str] = ""
    """One line for ``microbatch connectors``."""

    def describe(self) -> str:
        """The description shown in progress records (``RateSource[rowsPerSecond=5]``)."""
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
    """A stream of data addressed by offsets. See the module docstring for the lifecycle."""

    replayable: ClassVar[bool] = True
    """True when ``read`` of the same split always yields the same rows (needed for
    exactly-once). Sources that cannot replay (socket) set False and the engine warns."""
    supports_available_now: ClassVar[bool] = False
    """True when ``prepare_available_now`` pins a target that limited batches then reach."""
    user_schema: ClassVar[str] = "forbidden"
    """``"forbidden"`` (fixed schema), ``"optional"`` or ``"required"``."""

    def __init__(self, context: SourceContext) -> None:
        self.context = context

    @property
    def opts(self) -> Options:
        """This source's validated options."""
        return self.context.options

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of every record batch ``read`` yields."""

    @abstractmethod
    def initial_offset(self) -> Offset:
        """Where a new query starts. Called once, only when the checkpoint has no offsets."""

    def default_read_limit(self) -> ReadLimit:
        """The limit the engine passes to ``latest_offset`` (from options such as
        ``maxFilesPerTrigger``); the ``once`` trigger passes ``ReadAllAvailable`` instead."""
        return ReadAllAvailable()

    @abstractmethod
    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The end of the next batch, never beyond what ``limit`` allows.

        Return ``start`` itself (an equal dict) when nothing new has arrived: no batch runs.
        Called on every trigger, often (every few milliseconds) while idle: keep it cheap.
        """

    def report_latest_offset(self) -> Offset | None:
        """Where the source's available data ends, for the progress record's
        ``latestOffset`` (Spark's ``reportLatestOffset``); ``None`` when unknown (the default).

        Called right after each :meth:`latest_offset`, on the query's thread. It may be beyond
        the batch's end when a read limit holds data back; it never moves the query. Keep it
        cheap: answer from what ``latest_offset`` just learnt.
        """
        return None

    @abstractmethod
    def plan(self, start: Offset, end: Offset) -> list[Any]:
        """The data in ``(start, end]`` as independent splits (small, picklable values).

        An empty list is allowed (the batch then has no rows, and the sink still commits it).
        Called once per batch, and again with the same offsets when the batch is replayed;
        a replayable source must then return splits that read the same rows.
        """

    @abstractmethod
    def read(self, split: Any) -> Iterator[pa.RecordBatch]:
        """The record batches of one split, of schema ``self.schema``.

        May run on a worker thread, concurrently with ``read`` of other splits: keep per-split
        state local to this call.
        """

    def commit(self, end: Offset) -> None:
        """Everything up to ``end`` is durably written to the sink; clean up behind it."""

    def metrics(self) -> dict[str, Any]:
        """Figures for the progress record's ``sources[0]["metrics"]`` (Kafka's offsets behind
        latest, files held back...). Called after each batch, on the query's thread."""
        return {}

    def prepare_available_now(self) -> None:
        """Pin the current end of the data as the target of an available-now run."""

    def stop(self) -> None:
        """Release resources. Idempotent; called once per run, also after a failure."""


class Sink(_Connector, ABC):
    """A two-phase writer. See the module docstring for the lifecycle."""

    output_modes: ClassVar[frozenset[OutputMode]] = frozenset({OutputMode.APPEND})
    guarantee: ClassVar[Guarantee] = Guarantee.AT_LEAST_ONCE
    needs_checkpoint: ClassVar[bool] = True
    """False for debugging sinks (console, memory, foreach_batch): a temporary checkpoint
    is used when the user gives none."""
    supports_partition_by: ClassVar[bool] = False

    def __init__(self, context: SinkContext) -> None:
        self.context = context

    @property
    def opts(self) -> Options:
        """This sink's validated options."""
        return self.context.options

    @abstractmethod
    def write(self, batch_id: int, data: pa.RecordBatchReader) -> Any:
        """Write one part (one split) of batch ``batch_id``; return a small commit message.

        May run on worker threads, several parts of the same batch at once;
        :func:`current_part` tells which split this is. Nothing written here may become visible
        to readers before ``commit``.
        """

    @abstractmethod
    def commit(self, batch_id: int, messages: list[Any]) -> None:
        """Make batch ``batch_id`` visible atomically, given the messages of its writes.

        Called again with the same batch id after a crash; an exactly-once sink must detect
        that the batch is already applied and do nothing.
        """

    def abort(self, batch_id: int, messages: list[Any]) -> None:
        """Clean up the parts written for a batch whose write failed (best effort)."""

    def stop(self) -> None:
        """Release resources. Idempotent; called once per run, also after a failure."""


class BatchSink(Sink):
    """A sink that takes a whole batch in one call: implement :meth:`add_batch`.

    The parts of a batch are gathered in memory and handed over as one ``pyarrow.Table``,
    in split order, when the engine commits the batch.
    """

    def write(self, batch_id: int, data: pa.RecordBatchReader) -> pa.Table:
        return data.read_all()

    def commit(self, batch_id: int, messages: list[Any]) -> None:
        tables = [table for table in messages if table is not None]
        if tables:
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        else:
            table = self.context.schema.empty_table()
        self.add_batch(batch_id, table)

    @abstractmethod
    def add_batch(self, batch_id: int, table: pa.Table) -> None:
        """Apply one batch. Called once per batch, again with the same id after a crash."""

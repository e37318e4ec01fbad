"""The entry point: :class:`Session` owns the connectors, the queries and the memory tables."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ._query import StreamingQueryManager
from ._registry import ConnectorRegistry
from .errors import ConfigurationError
from .options import Option, Options, OptionSpec

if TYPE_CHECKING:
    from ._reader import DataReader, DataStreamReader

__all__ = ["FIXED_PER_CHECKPOINT", "SESSION_OPTIONS", "RuntimeConf", "Session"]

SESSION_OPTIONS = OptionSpec(
    Option(
        name="checkpointLocation",
        doc="Root folder for checkpoints of queries that set none: a query uses "
        "<root>/<query name or id>.",
    ),
    Option(
        name="minBatchesToRetain",
        type="int",
        default=100,
        minimum=1,
        doc="How many recent batches keep their offset and commit log entries.",
    ),
    Option(
        name="pollingDelay",
        type="duration",
        default=timedelta(milliseconds=10),
        doc="How long the default trigger waits before asking an idle source again "
        "(sources that notify new data wake it at once).",
    ),
    Option(
        name="noDataProgressEventInterval",
        type="duration",
        default=timedelta(seconds=10),
        doc="Minimum time between two idle progress records of a query.",
    ),
    Option(
        name="checkpointFsync",
        type="bool",
        default=False,
        doc="fsync checkpoint files and their folder on local disks, so that a power loss "
        "(not only a killed process) keeps every committed batch.",
    ),
    Option(
        name="maxReadThreads",
        type="int",
        minimum=1,
        doc="Threads that read and write the splits of one batch in parallel "
        "(default: the number of CPUs).",
    ),
    Option(
        name="schemaInference",
        type="bool",
        default=False,
        doc="Let sources that can (files) infer a schema when none is given.",
    ),
    Option(
        name="stopTimeout",
        type="duration",
        default=timedelta(0),
        doc="How long query.stop() waits for a running batch before it raises "
        "QueryStopTimeoutError (0: as long as the batch takes). A timeout given to stop() "
        "itself wins.",
    ),
    Option(
        name="maxBatchRetries",
        type="int",
        default=3,
        minimum=0,
        doc="How many times a batch that failed with a RetriableError (a broker restart, a "
        "deadlock, a timeout) is run again, same id and same offsets, before the query stops.",
    ),
    Option(
        name="batchRetryBackoff",
        type="duration",
        default=timedelta(seconds=1),
        doc="The wait before the first retry of a failed batch; it doubles with each further "
        "retry, up to 60 seconds.",
    ),
    Option(
        name="multipleWatermarkPolicy",
        default="min",
        choices=("min", "max"),
        doc="How the global watermark is chosen when a query has several watermarks: min "
        "(the slowest one, so no input's rows are dropped as late before its own watermark "
        "passes them) or max (the fastest one; rows of slower inputs behind it are dropped as "
        "late). Fixed per checkpoint: the value recorded in its offset log wins on restart.",
    ),
    Option(
        name="forceDeleteTempCheckpointLocation",
        type="bool",
        default=False,
        doc="Delete the temporary checkpoint of a query that set none even when it failed.",
    ),
)


FIXED_PER_CHECKPOINT: Mapping[str, Any] = MappingProxyType({"multipleWatermarkPolicy": "min"})
"""Session settings fixed for the lifetime of a checkpoint (as Spark's offset log fixes
``spark.sql.shuffle.partitions`` or ``multipleWatermarkPolicy``), each with the value that a
checkpoint recording none behaves as (one written before the setting was recorded: every
format-1 checkpoint). Every offset-log entry records their values; on restart the recorded
value wins over the session's, and a session value that differs is logged (see
``Checkpoint.fixed_conf``). Only settings of JSON types (string, int, float, bool) qualify."""


def _check_fixed_settings() -> None:
    """Refuse a fixed setting that is not a session option of a JSON type with a valid value
    for checkpoints that recorded none (it is recorded in JSON and compared on restart)."""
    for name, legacy in FIXED_PER_CHECKPOINT.items():
        option = SESSION_OPTIONS[name]
        json_type = option.type in ("string", "int", "float", "bool")
        if not json_type or option.convert(legacy) != legacy:
            raise ValueError(f"fixed setting {name!r}: a {option.type} option, value {legacy!r}")


_check_fixed_settings()


class RuntimeConf:
    """Session settings (``session.conf``), validated on every ``set``.

    Names follow the same rules as connector options: ``checkpointLocation`` and
    ``checkpoint_location`` are the same setting.
    """

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._raw: dict[str, Any] = {}
        self._values: Options = SESSION_OPTIONS.parse({}, connector="session")
        for key, value in (initial or {}).items():
            self.set(key, value)

    def set(self, key: str, value: Any) -> None:
        raw = {**self._raw, key: value}
        self._values = SESSION_OPTIONS.parse(raw, connector="session")
        self._raw = raw

    def get(self, key: str) -> Any:
        return self._values[key]

    def unset(self, key: str) -> None:
        option = SESSION_OPTIONS[key]
        self._raw = {k: v for k, v in self._raw.items() if SESSION_OPTIONS[k] is not option}
        self._values = SESSION_OPTIONS.parse(self._raw, connector="session")

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def fixed_per_checkpoint(self) -> dict[str, Any]:
        """The values of the settings of :data:`FIXED_PER_CHECKPOINT`, by canonical name."""
        return {name: self._values[name] for name in FIXED_PER_CHECKPOINT}


class Session:
    """Reads, queries and memory tables, with the connectors found through entry points.

    ``plugins`` are extra plugin objects (modules or instances with hook implementations) to
    register besides the installed ones; ``load_plugins=False`` skips the entry points.
    """

    def __init__(
        self,
        *,
        conf: Mapping[str, Any] | None = None,
        plugins: Iterable[object] = (),
        load_plugins: bool = True,
    ) -> None:
        self.registry = ConnectorRegistry()
        if load_plugins:
            self.registry.load_entry_points()
        for plugin in plugins:
            self.registry.register_plugin(plugin, getattr(plugin, "__name__", repr(plugin)))
        self.conf = RuntimeConf(conf)
        self.streams = StreamingQueryManager(self.registry)
        self._tables: dict[str, Callable[[], pa.Table]] = {}
        self._tables_lock = threading.Lock()

    @property
    def read_stream(self) -> DataStreamReader:
        """A builder for a streaming source: ``.format(...).option(...).load()``."""
        from ._reader import DataStreamReader

        return DataStreamReader(self)

    @property
    def read(self) -> DataReader:
        """A builder for a one-off read of everything a source holds now (a ``pyarrow.Table``)."""
        from ._reader import DataReader

        return DataReader(self)

    def table(self, name: str) -> pa.Table:
        """The current contents of a memory table (a ``memory`` sink's ``query_name``)."""
        with self._tables_lock:
            provider = self._tables.get(name)
            known = sorted(self._tables)
        if provider is None:
            raise ConfigurationError(
                f"No table named '{name}'. Tables of this session: {', '.join(known) or 'none'} "
                "(a memory sink registers its query_name when its query starts)."
            )
        return provider()

    def register_table(self, name: str, provider: Callable[[], pa.Table]) -> None:
        """Make ``session.table(name)`` return ``provider()`` (used by the memory sink)."""
        with self._tables_lock:
            self._tables[name] = provider

    def unregister_table(self, name: str) -> None:
        with self._tables_lock:
            self._tables.pop(name, None)

    def stop(self) -> None:
        """Stop every active query of this session."""
        for query in self.streams.active:
            query.stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

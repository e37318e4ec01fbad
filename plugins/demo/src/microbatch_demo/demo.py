"""``microbatch demo`` (or ``microbatch-demo``): JSON files stream into a Delta table, live.

A generator drops files of sensor events into a local folder (written under a temporary name,
then renamed, as a well-behaved producer does). A query reads them with the ``json`` file
source, ``maxFilesPerTrigger`` at a time, and appends them to a Delta table partitioned by
``status`` through the exactly-once ``delta`` sink (one Delta commit per batch, carrying the
query id and batch id). When the generator stops, the query catches up; the table is read back
with delta-rs and its history shown, one commit per batch. :func:`start_pipeline` is the part
to copy into your own code.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from microbatch import MicrobatchError, Session, StreamingQuery

from .history import Commit, read_history

__all__ = ["EVENT_SCHEMA", "EventFileWriter", "run_demo", "start_pipeline"]

EVENT_SCHEMA = "device_id STRING, temperature DOUBLE, status STRING, ts TIMESTAMP"
_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_MASK = (1 << 64) - 1


def start_pipeline(
    session: Session, incoming: str, table: str, checkpoint: str, files_per_trigger: int
) -> StreamingQuery:
    """The demo query: JSON files in ``incoming`` -> Delta table at ``table``."""
    return (
        session.read_stream.format("json")
        .schema(EVENT_SCHEMA)
        .option("maxFilesPerTrigger", files_per_trigger)
        .load(incoming)
        .write_stream.format("delta")
        .partition_by("status")
        .option("checkpointLocation", checkpoint)
        .start(table)
    )


def _mix(value: int) -> int:
    """A 64-bit mixing step, so that the events look random yet are the same every run."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


@dataclass
class EventFileWriter:
    """Writes numbered files of JSON sensor events (device_id, temperature, status, ts)."""

    folder: Path
    rows_per_file: int
    files: int = 0
    rows: int = 0

    def write_next(self) -> Path:
        """Write the next file atomically (``.tmp`` first, then renamed) and return its path."""
        first = self.files * self.rows_per_file
        lines = [self._line(row) for row in range(first, first + self.rows_per_file)]
        path = self.folder / f"events-{self.files:05d}.json"
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text("".join(lines), encoding="utf-8")
        os.replace(temporary, path)
        self.files += 1
        self.rows += self.rows_per_file
        return path

    @staticmethod
    def _line(row: int) -> str:
        device, reading, kind = _mix(3 * row), _mix(3 * row + 1), _mix(3 * row + 2) % 100
        spike = reading % 1000 == 0  # one reading in a thousand is out of range
        centi = 9000 + (reading >> 10) % 1000 if spike else 1500 + (reading >> 10) % 3001
        status = "OK" if kind < 80 else "WARNING" if kind < 95 else "ERROR"
        moment = _EPOCH + timedelta(milliseconds=10 * row)
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        return (
            f'{{"device_id": "sensor-{device % 1000}", "temperature": {centi // 100}.'
            f'{centi % 100:02d}, "status": "{status}", "ts": "{stamp}"}}\n'
        )


@dataclass
class _Totals:
    """Totals over a query's progress records."""

    seen: set[int] = field(default_factory=set)
    batches: int = 0
    rows: int = 0
    last_ms: int | None = None
    started: float = field(default_factory=time.monotonic)

    def update(self, query: StreamingQuery) -> None:
        for progress in query.recent_progress:
            if progress["numInputRows"] and progress["batchId"] not in self.seen:
                self.seen.add(progress["batchId"])
                self.batches += 1
                self.rows += progress["numInputRows"]
                self.last_ms = progress["durationMs"].get("triggerExecution")

    def table(self, writer: EventFileWriter, phase: str) -> Table:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        table = Table(title=f"demo: JSON files -> Delta table ({phase})", title_justify="left")
        for column in ("Files written", "Batches", "Rows", "Rows/s", "Last batch"):
            table.add_column(column, justify="right")
        table.add_row(
            f"{writer.files:,}",
            f"{self.batches:,}",
            f"{self.rows:,}",
            f"{self.rows / elapsed:,.0f}",
            "-" if self.last_ms is None else f"{self.last_ms} ms",
        )
        return table


def run_demo(
    out: Console,
    err: Console,
    *,
    seconds: float = 6.0,
    files_per_second: float = 10.0,
    rows_per_file: int = 5_000,
    files_per_trigger: int = 5,
    folder: str | None = None,
) -> int:
    """Run the demo; returns a process exit code."""
    root = Path(folder or tempfile.mkdtemp(prefix="microbatch-demo-"))
    incoming, table, checkpoint = root / "incoming", root / "table", root / "checkpoint"
    incoming.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(incoming, rows_per_file)
    writer.write_next()
    session = Session()
    try:
        query = start_pipeline(
            session, str(incoming), str(table), str(checkpoint), files_per_trigger
        )
    except MicrobatchError as error:
        err.print(f"[red]The demo could not start:[/] {escape(str(error))}", highlight=False)
        return 1
    totals = _Totals()
    stop = threading.Event()
    producer = threading.Thread(
        target=_produce, args=(writer, files_per_second, seconds, stop), daemon=True
    )
    producer.start()
    try:
        with Live(totals.table(writer, "streaming"), console=out, refresh_per_second=8) as live:
            while producer.is_alive() and query.is_active:
                time.sleep(0.1)
                totals.update(query)
                live.update(totals.table(writer, "streaming"))
            if query.is_active:
                query.process_all_available()
            totals.update(query)
            live.update(totals.table(writer, "caught up"))
    except MicrobatchError:
        pass  # reported below from query.exception()
    finally:
        stop.set()
        query.stop()
    if query.exception() is not None:
        err.print(f"[red]The demo query failed:[/] {escape(str(query.exception()))}")
        return 1
    out.print(_summary(str(table), writer, totals))
    out.print(_history(str(table), query.id, checkpoint))
    out.print(
        f"Files: {root}  (inspect the checkpoint: microbatch checkpoint inspect {checkpoint})",
        highlight=False,
        soft_wrap=True,
    )
    return 0


def _produce(
    writer: EventFileWriter, per_second: float, seconds: float, stop: threading.Event
) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        writer.write_next()
        stop.wait(1 / per_second)


def _summary(table: str, writer: EventFileWriter, totals: _Totals) -> Group:
    """Read the table back with delta-rs (an independent reader) and summarise it."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    result = DeltaTable(table).to_pyarrow_table()
    grouped = (
        result.group_by("status")
        .aggregate([("temperature", "count"), ("temperature", "mean"), ("temperature", "max")])
        .sort_by("status")
    )
    by_status = Table(title="Read back from the Delta table (delta-rs)", title_justify="left")
    for column in ("status", "rows", "mean temperature", "max temperature"):
        by_status.add_column(column, justify="right" if column != "status" else "left")
    for row in grouped.to_pylist():
        by_status.add_row(
            row["status"],
            f"{row['temperature_count']:,}",
            f"{row['temperature_mean']:.2f}",
            f"{row['temperature_max']:.2f}",
        )
    devices = pc.count_distinct(result.column("device_id")).as_py()
    check = "every row exactly once" if result.num_rows == writer.rows else "MISMATCH"
    lines = Table(title="Totals", title_justify="left", show_header=False)
    lines.add_column()
    lines.add_column(justify="right")
    lines.add_row("files generated", f"{writer.files:,}")
    lines.add_row("rows generated", f"{writer.rows:,}")
    lines.add_row("rows in the table", f"{result.num_rows:,} ({check})")
    lines.add_row("batches", f"{totals.batches:,}")
    lines.add_row("devices", f"{devices:,}")
    return Group(Text(""), by_status, lines)  # the blank line ends a live display's last frame


HISTORY_ROWS = 12
"""The history shows at most this many commits (the first and the latest ones)."""


def _history(table: str, query_id: str, checkpoint: Path) -> Group:
    """The table's history: one commit per batch, each carrying the query's transaction (the
    batches are those of the checkpoint's commit log)."""
    commits = read_history(table)
    folder = checkpoint / "commits"
    ran = sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())
    history = Table(title="Delta table history (one commit per batch)", title_justify="left")
    for column in ("version", "batch", "operation", "files", "rows", "committed at"):
        history.add_column(column, justify="left" if column == "operation" else "right")
    shown: list[Commit | None] = list(commits)
    if len(commits) > HISTORY_ROWS:
        half = HISTORY_ROWS // 2
        shown = [*commits[:half], None, *commits[-half:]]
    for commit in shown:
        if commit is None:
            history.add_row("...", "", f"{len(commits) - HISTORY_ROWS} more commits", "", "", "")
            continue
        batch = commit.batch_of(query_id)
        moment = datetime.fromtimestamp(commit.timestamp_ms / 1000, UTC)
        history.add_row(
            str(commit.version),
            "-" if batch is None else str(batch),
            commit.operation,
            f"{commit.files_added:,}",
            f"{commit.rows_added:,}",
            moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}",
        )
    batches = [commit.batch_of(query_id) for commit in commits]
    carried = [batch for batch in batches if batch is not None]
    once = len(carried) == len(commits) and sorted(carried) == ran
    verdict = "one commit per batch" if once else "MISMATCH"
    check = Text.assemble(
        ("commits ", ""),
        (f"{len(commits):,}", "bold"),
        (", batches ", ""),
        (f"{len(ran):,}", "bold"),
        (f" ({verdict}, app id = query id {query_id})", "green" if once else "bold red"),
    )
    return Group(Text(""), history, check)

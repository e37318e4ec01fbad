"""The testkit fails each of four sabotaged connectors and passes the honest ones.

The four breakages an outside author's sabotage run once slipped past the kit: a source whose
initial offset is "the current end" and is never persisted; a source that loses the last row
of every batch; a sink that declares complete mode but only appends; a sink that writes its
rows and its ledger in two transactions. Each is a few lines away from an honest connector
(the template's counter and JSON-lines sink, a log-file source, a small SQLite sink).
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

CONNECTORS = '''
import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

import microbatch as mb
from microbatch_example import CounterSource, JsonLinesSink, read_jsonl_folder
from microbatch_example.counter import CounterReader, CounterSplit
from microbatch_testkit import SinkContract, SourceContract, data

LOG_SCHEMA = pa.schema([pa.field("n", pa.int64(), nullable=False)])


# -- sources ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogSplit(mb.Split):
    path: str
    first: int
    stop: int


def _lines(path):
    return Path(path).read_text().splitlines() if Path(path).exists() else []


class LogReader(mb.StreamReader, mb.SplitReader):
    """Offsets count the lines of a file; a new query starts at the current end, which it
    keeps in its state so that a restart starts there too."""

    persist_initial = True

    def __init__(self, path, state):
        self.path = path
        self.state = state

    def initial_offset(self):
        if self.persist_initial and self.state is not None and self.state.exists("initial"):
            return self.state.read("initial")
        offset = {"line": len(_lines(self.path))}
        if self.persist_initial and self.state is not None:
            self.state.write("initial", offset)
        return offset

    def default_read_limit(self):
        return mb.ReadMaxRows(4)

    def latest_offset(self, start, limit):
        end = len(_lines(self.path))
        if isinstance(limit, mb.ReadMaxRows):
            end = min(end, start["line"] + limit.max_rows)
        return {"line": max(end, start["line"])}

    def partitions(self, start, end):
        first, stop = start["line"], end["line"]
        return [LogSplit(self.path, first, stop)] if stop > first else []

    def read(self, split):
        rows = [{"n": json.loads(line)} for line in _lines(split.path)[split.first : split.stop]]
        yield pa.RecordBatch.from_pylist(rows, schema=LOG_SCHEMA)


class LogSource(mb.Source):
    format_name = "sabotage-log"
    options = mb.OptionSpec(mb.Option(name="path", type="string", required=True, doc="The log."))
    reader_class = LogReader

    def schema(self):
        return LOG_SCHEMA

    def stream_reader(self, context):
        return self.reader_class(self.opts.path, context.state)


class ForgetfulLogReader(LogReader):
    persist_initial = False  # SABOTAGE: "the current end", taken again by every instance


class LatestNeverPersisted(LogSource):
    format_name = "sabotage-latest"
    reader_class = ForgetfulLogReader


class OffByOneReader(CounterReader):
    def partitions(self, start, end):
        first, stop = start["rows"], end["rows"]
        return [CounterSplit(first, stop - 1)] if stop - 1 > first else []  # SABOTAGE


class OffByOneCounter(CounterSource):
    format_name = "sabotage-off-by-one"

    def stream_reader(self, context):
        return OffByOneReader(rows_per_batch=self.opts.rows_per_batch, step=self.opts.step)


# -- sinks -----------------------------------------------------------------------------------
class SqliteWriter(mb.BatchWriter):
    """Rows and the ledger row of their batch, in one SQLite transaction."""

    def __init__(self, path, context):
        super().__init__(context)
        self.path = path

    def add_batch(self, table, batch_id):
        rows = [(row["id"], row["name"]) for row in table.to_pylist()]
        with closing(sqlite3.connect(self.path)) as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS people (id INTEGER, name TEXT)")
            connection.commit()
            ledger = mb.BatchLedger.for_query(connection, self.context)
            ledger.apply_once(batch_id, lambda c: self.apply(c, rows))

    def apply(self, connection, rows):
        if self.context.output_mode == mb.OutputMode.COMPLETE:
            connection.execute("DELETE FROM people")
        connection.executemany("INSERT INTO people VALUES (?, ?)", rows)


class SqliteSink(mb.Sink):
    format_name = "sabotage-sqlite"
    options = mb.OptionSpec(
        mb.Option(name="path", type="string", required=True, doc="The database file.")
    )
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset({mb.OutputMode.APPEND, mb.OutputMode.COMPLETE}),
        guarantee=mb.Guarantee.EXACTLY_ONCE,
    )
    writer_class = SqliteWriter

    def stream_writer(self, context):
        return self.writer_class(self.opts.path, context)


class AppendingWriter(SqliteWriter):
    def apply(self, connection, rows):
        connection.executemany("INSERT INTO people VALUES (?, ?)", rows)  # SABOTAGE: no DELETE


class CompleteButAppends(SqliteSink):
    format_name = "sabotage-complete"
    writer_class = AppendingWriter


class TwoTransactionsWriter(SqliteWriter):
    def add_batch(self, table, batch_id):
        rows = [(row["id"], row["name"]) for row in table.to_pylist()]
        with closing(sqlite3.connect(self.path)) as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS people (id INTEGER, name TEXT)")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS ledger (batch INTEGER PRIMARY KEY)"
            )
            connection.commit()
            if connection.execute("SELECT 1 FROM ledger WHERE batch = ?", (batch_id,)).fetchone():
                return
            self.apply(connection, rows)
            connection.commit()  # SABOTAGE: the rows are committed before their ledger row
            connection.execute("INSERT INTO ledger VALUES (?)", (batch_id,))
            connection.commit()


class TwoTransactions(SqliteSink):
    format_name = "sabotage-two-transactions"
    writer_class = TwoTransactionsWriter


# -- suites ----------------------------------------------------------------------------------
class CounterSuite(SourceContract):
    __test__ = False
    generates_data_on_its_own = True

    def make_options(self):
        return {"rowsPerBatch": 7, "step": 3}


class LogSuite(SourceContract):
    __test__ = False

    def make_options(self):
        return {"path": str(self.tmp_path / "log.jsonl")}

    def produce(self, reader):
        path = self.tmp_path / "log.jsonl"
        count = len(_lines(path))
        with path.open("a") as log:
            log.writelines(f"{count + index}\\n" for index in range(6))


class SqliteSuite(SinkContract):
    __test__ = False
    ordered = True

    def make_options(self):
        return {"path": str(self.tmp_path / "people.db")}

    def input_schema(self):
        return data.SIMPLE_SCHEMA

    def input_batches(self):
        return data.simple_batches()

    def read_back(self, writer):
        path = self.tmp_path / "people.db"
        rows = []
        if path.exists():
            with closing(sqlite3.connect(path)) as connection:
                found = connection.execute(
                    "SELECT name FROM sqlite_master WHERE name = 'people'"
                ).fetchone()
                if found:
                    query = "SELECT id, name FROM people ORDER BY rowid"
                    rows = [{"id": i, "name": n} for i, n in connection.execute(query)]
        return pa.Table.from_pylist(rows, schema=data.SIMPLE_SCHEMA)


class TestHonestCounter(CounterSuite):
    source_class = CounterSource


class TestHonestJsonLines(SinkContract):
    sink_class = JsonLinesSink
    ordered = True

    def make_options(self):
        return {"path": str(self.tmp_path / "out")}

    def read_back(self, writer):
        return read_jsonl_folder(self.tmp_path / "out", self.input_schema())


class TestHonestLog(LogSuite):
    source_class = LogSource


class TestHonestSqlite(SqliteSuite):
    sink_class = SqliteSink


class Sabotaged:
    """One thing of the connector is broken; the checks in other processes are left to the
    honest connectors."""

    in_process_only = "checked on the honest connectors (it is not what is broken here)"


class TestLatestNeverPersisted(Sabotaged, LogSuite):
    source_class = LatestNeverPersisted


class TestOffByOne(Sabotaged, CounterSuite):
    source_class = OffByOneCounter


class TestCompleteButAppends(Sabotaged, SqliteSuite):
    sink_class = CompleteButAppends


class TestTwoTransactions(Sabotaged, SqliteSuite):
    sink_class = TwoTransactions
'''

FAILED = re.compile(r"^FAILED \S+::(Test\w+)::(test_\w+)")


def test_each_sabotage_fails_and_the_honest_connectors_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sabotage=CONNECTORS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rfs", "-q")
    failed: dict[str, set[str]] = {}
    for line in result.outlines:
        match = FAILED.match(line)
        if match:
            failed.setdefault(match.group(1), set()).add(match.group(2))
    text = "\n".join(result.outlines)
    assert failed == {
        "TestLatestNeverPersisted": {"test_restart_resumes_from_state"},
        "TestOffByOne": {"test_consecutive_ranges_add_up", "test_runs_through_the_engine"},
        "TestCompleteButAppends": {"test_complete_mode_replaces_the_previous_batch"},
        "TestTwoTransactions": {"test_commit_is_atomic_when_killed"},
    }, text
    outcomes = result.parseoutcomes()
    assert "error" not in outcomes and "errors" not in outcomes, text
    # the failures name the offsets and batches involved
    assert (
        'a second instance over the same state store starts at {"line": 12}, the first started '
        'at {"line": 0}' in text
    )
    assert 'reading ({"rows": 0}, {"rows": 7}] (6 rows) then ({"rows": 7}, {"rows": 14}] ' in text
    assert 'compared with reading ({"rows": 0}, {"rows": 14}] (13 rows) in one go' in text
    assert "the engine's batches (batch 0 " in text
    assert "complete mode, after batch 1 (2 rows), which must replace the 4 rows of batch 0" in text
    assert re.search(
        r"after a SIGKILL before line event \d+ of \d+ of commit\(messages, \d+\), at "
        r"\S+test_sabotage.py:\d+ \(add_batch\), and a replay of batch \d+ by a new writer",
        text,
    ), text

"""The source suite passes a correct source and fails each deliberately broken one."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

SOURCES = """
import os
from dataclasses import dataclass

import pyarrow as pa

import microbatch as mb
from microbatch_testkit import SourceContract

SCHEMA = pa.schema([pa.field("n", pa.int64())])


@dataclass(frozen=True)
class ListSplit(mb.Split):
    first: int
    stop: int


class ListReader(mb.StreamReader, mb.SplitReader):
    def __init__(self, rows, rows_per_batch, context):
        self.rows = rows
        self.rows_per_batch = rows_per_batch
        self.state = context.state

    def initial_offset(self):
        return {"n": 0}

    def default_read_limit(self):
        return mb.ReadMaxRows(self.rows_per_batch)

    def latest_offset(self, start, limit):
        end = len(self.rows)
        if isinstance(limit, mb.ReadMaxRows):
            end = min(end, start["n"] + limit.max_rows)
        return {"n": end}

    def partitions(self, start, end):
        return [ListSplit(start["n"], end["n"])] if end["n"] > start["n"] else []

    def read(self, split):
        yield pa.RecordBatch.from_pylist(
            [{"n": value} for value in self.rows[split.first : split.stop]], schema=SCHEMA
        )


class ListSource(mb.Source):
    \"\"\"Reads a Python list that the test appends to; offsets count the rows.\"\"\"

    format_name = "list-source"
    options = mb.OptionSpec(
        mb.Option(name="rows", type="object", required=True, doc="The list to read."),
        mb.Option(name="rowsPerBatch", type="int", default=2, minimum=1, doc="Batch size."),
    )
    reader_class = ListReader

    def schema(self):
        return SCHEMA

    def stream_reader(self, context):
        return self.reader_class(self.opts.rows, self.opts.rows_per_batch, context)


class NotJsonReader(ListReader):
    def initial_offset(self):
        return {"n": 0, "seen": {0}}


class NotJson(ListSource):
    reader_class = NotJsonReader


class TupleOffsetsReader(ListReader):
    def latest_offset(self, start, limit):
        return {"n": super().latest_offset(start, limit)["n"], "at": (1, 2)}


class TupleOffsets(ListSource):
    reader_class = TupleOffsetsReader


class RandomReader(ListReader):
    def read(self, split):
        values = [int.from_bytes(os.urandom(4), "big") for _ in range(split.first, split.stop)]
        yield pa.RecordBatch.from_pylist([{"n": value} for value in values], schema=SCHEMA)


class ClaimsReplayable(ListSource):
    reader_class = RandomReader


class HonestlyNotReplayable(ClaimsReplayable):
    capabilities = mb.SourceCapabilities(replayable=False)


class IgnoresLimitReader(ListReader):
    def latest_offset(self, start, limit):
        return {"n": len(self.rows)}


class IgnoresLimit(ListSource):
    reader_class = IgnoresLimitReader


class NeverIdleReader(ListReader):
    def latest_offset(self, start, limit):
        return {"n": start["n"] + 1}


class NeverIdle(ListSource):
    reader_class = NeverIdleReader


class WrongSchemaReader(ListReader):
    def read(self, split):
        for batch in super().read(split):
            yield batch.cast(pa.schema([pa.field("n", pa.int32())]))


class WrongSchema(ListSource):
    reader_class = WrongSchemaReader


class EmptyRangeReader(ListReader):
    def partitions(self, start, end):
        return [ListSplit(max(start["n"] - 1, 0), end["n"])]


class EmptyRangeHasRows(ListSource):
    reader_class = EmptyRangeReader


class StopsOnceReader(ListReader):
    def stop(self):
        if getattr(self, "stopped", False):
            raise RuntimeError("already stopped")
        self.stopped = True


class StopsOnce(ListSource):
    reader_class = StopsOnceReader


class Undocumented(ListSource):
    options = ListSource.options.extend(mb.Option(name="color", type="string"))


class ForgetsStartReader(ListReader):
    def __init__(self, rows, rows_per_batch, context):
        super().__init__(rows, rows_per_batch, context)
        count = int(context.state.read("count") or 0)
        context.state.write("count", count + 1)
        self.base = count

    def initial_offset(self):
        return {"n": self.base}


class ForgetsStart(ListSource):
    reader_class = ForgetsStartReader


class PinsTargetReader(ListReader):
    target = None

    def prepare_available_now(self):
        self.target = len(self.rows)

    def latest_offset(self, start, limit):
        end = super().latest_offset(start, limit)
        if self.target is None:
            return end
        return {"n": min(end["n"], max(self.target, start["n"]))}


class PinsTarget(ListSource):
    capabilities = mb.SourceCapabilities(available_now=True)
    reader_class = PinsTargetReader


class ClaimsAvailableNow(ListSource):
    capabilities = mb.SourceCapabilities(available_now=True)


class UnpicklableReader(ListReader):
    def __init__(self, rows, rows_per_batch, context):
        super().__init__(rows, rows_per_batch, context)
        self.lock = __import__("threading").Lock()


class UnpicklableSplitReader(ListSource):
    reader_class = UnpicklableReader


GLOBAL_ROWS = {}


class InProcessReader(ListReader):
    # reads its rows from a dict of this module, filled in the test's process only

    def __init__(self, rows, rows_per_batch, context):
        super().__init__(rows, rows_per_batch, context)
        GLOBAL_ROWS["rows"] = rows
        self.rows = None

    def latest_offset(self, start, limit):
        self.rows = GLOBAL_ROWS["rows"]
        end = super().latest_offset(start, limit)
        self.rows = None
        return end

    def read(self, split):
        rows = GLOBAL_ROWS.get("rows", [])
        yield pa.RecordBatch.from_pylist(
            [{"n": value} for value in rows[split.first : split.stop]], schema=SCHEMA
        )


class ReadsOnlyInProcess(ListSource):
    reader_class = InProcessReader


class Suite(SourceContract):
    __test__ = False
    # the process and engine checks run on the classes below that set them back
    in_process_only = "checked on other classes of this self-test"
    engine_check = False
    engine_timeout = 5.0

    def make_options(self):
        if not hasattr(self, "rows"):
            self.rows = []
        return {"rows": self.rows}

    def produce(self, reader):
        self.rows.extend(range(len(self.rows), len(self.rows) + 5))

    def bad_options(self):
        return [({"rows": [], "rowsPerBatch": 0}, "must be at least 1")]


class TestGood(Suite):
    source_class = ListSource
    in_process_only = ""
    engine_check = True


class TestNotJson(Suite):
    source_class = NotJson


class TestTupleOffsets(Suite):
    source_class = TupleOffsets


class TestClaimsReplayable(Suite):
    source_class = ClaimsReplayable


class TestHonestlyNotReplayable(Suite):
    source_class = HonestlyNotReplayable


class TestIgnoresLimit(Suite):
    source_class = IgnoresLimit


class TestNeverIdle(Suite):
    source_class = NeverIdle


class TestWrongSchema(Suite):
    source_class = WrongSchema


class TestEmptyRangeHasRows(Suite):
    source_class = EmptyRangeHasRows


class TestStopsOnce(Suite):
    source_class = StopsOnce


class TestUndocumented(Suite):
    source_class = Undocumented


class TestForgetsStart(Suite):
    source_class = ForgetsStart


class TestPinsTarget(Suite):
    source_class = PinsTarget


class TestClaimsAvailableNow(Suite):
    source_class = ClaimsAvailableNow


class TestUnpicklableSplitReader(Suite):
    source_class = UnpicklableSplitReader
    in_process_only = ""


class TestReadsOnlyInProcess(Suite):
    source_class = ReadsOnlyInProcess
    in_process_only = ""


class TestWrongSchemaInTheEngine(Suite):
    source_class = WrongSchema
    engine_check = True


class TestEmptyRangeHasRowsInTheEngine(Suite):
    source_class = EmptyRangeHasRows
    engine_check = True


class TestProducesNothing(Suite):
    source_class = ListSource

    def produce(self, reader):
        pass
"""

FAILED = re.compile(r"^FAILED \S+::(Test\w+)::(test_\w+)")


def failures(outlines: list[str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in outlines:
        match = FAILED.match(line)
        if match:
            found.setdefault(match.group(1), set()).add(match.group(2))
    return found


_RUNS: dict[str, pytest.RunResult] = {}


@pytest.fixture
def run(pytester: pytest.Pytester) -> pytest.RunResult:
    """One run of the suites over SOURCES, shared by the tests of this module."""
    if "sources" not in _RUNS:
        pytester.makepyfile(test_sources=SOURCES)
        _RUNS["sources"] = pytester.runpytest("-p", "no:cacheprovider", "-rfs", "-q")
    return _RUNS["sources"]


WRONG_SCHEMA = {
    "test_latest_offset_respects_default_read_limit",
    "test_read_yields_the_declared_schema",
    "test_replay_reads_the_same_rows",
    "test_consecutive_ranges_add_up",
    "test_restart_resumes_from_state",
}
EMPTY_RANGE = {"test_empty_range_yields_no_rows", "test_consecutive_ranges_add_up"}


def test_correct_source_passes_and_each_broken_one_fails_its_check(run: pytest.RunResult) -> None:
    assert failures(run.outlines) == {
        "TestNotJson": {"test_offsets_are_json"},
        "TestTupleOffsets": {"test_offsets_are_json"},
        "TestClaimsReplayable": {
            "test_replay_reads_the_same_rows",
            "test_consecutive_ranges_add_up",
            "test_restart_resumes_from_state",
        },
        "TestIgnoresLimit": {"test_latest_offset_respects_default_read_limit"},
        "TestNeverIdle": {"test_latest_offset_returns_start_when_nothing_is_new"},
        "TestWrongSchema": WRONG_SCHEMA,
        "TestWrongSchemaInTheEngine": {*WRONG_SCHEMA, "test_runs_through_the_engine"},
        "TestEmptyRangeHasRows": EMPTY_RANGE,
        "TestEmptyRangeHasRowsInTheEngine": {*EMPTY_RANGE, "test_runs_through_the_engine"},
        "TestStopsOnce": {"test_stop_is_idempotent"},
        "TestUndocumented": {"test_every_option_is_documented"},
        "TestForgetsStart": {"test_restart_resumes_from_state"},
        "TestClaimsAvailableNow": {"test_available_now_reaches_a_pinned_target"},
        "TestUnpicklableSplitReader": {
            "test_splits_and_split_reader_are_picklable",
            "test_splits_are_read_in_other_processes",
        },
        "TestReadsOnlyInProcess": {"test_splits_are_read_in_other_processes"},
        "TestProducesNothing": {
            "test_offsets_are_json",
            "test_latest_offset_is_stable",
            "test_latest_offset_respects_default_read_limit",
            "test_latest_offset_returns_start_when_nothing_is_new",
            "test_empty_range_yields_no_rows",
            "test_read_yields_the_declared_schema",
            "test_splits_and_split_reader_are_picklable",
            "test_replay_reads_the_same_rows",
            "test_consecutive_ranges_add_up",
            "test_stop_is_idempotent",
        },
    }, "\n".join(run.outlines[-80:])


def test_failures_show_the_offending_values(run: pytest.RunResult) -> None:
    text = "\n".join(run.outlines)
    assert "initial_offset() returned an offset that is not JSON" in text
    assert "{'n': 2, 'at': (1, 2)} became {'n': 2, 'at': [1, 2]}" in text
    assert "whose schema differs from schema()" in text
    assert "batch: 2 rows, schema {n: int32}" in text
    assert 're-reading range ({"n": 0}, {"n": 2})' in text
    assert "holds 5 rows" in text
    assert "make produce() add data" in text
    assert "the target pinned by prepare_available_now() must not move" in text
    assert 'a second instance over the same state store starts at {"n": 1}' in text
    assert 'reading ({"n": 0}, {"n": 2}] (2 rows) then ({"n": 2}, {"n": 4}] (3 rows)' in text
    assert "split reader cannot be pickled (TypeError: cannot pickle '_thread.lock'" in text
    assert 'split 0 of partitions({"n": 0}, {"n": 4}), read in another process, compared' in text
    assert "the engine's batches (batch 0 " in text


def test_non_replayable_source_skips_the_replay_check(run: pytest.RunResult) -> None:
    assert "HonestlyNotReplayable declares replayable=False" in "\n".join(run.outlines)


def test_base_classes_are_not_collected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_only_bases="from microbatch_testkit import SinkContract, SourceContract\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes()
    assert "no tests ran" in result.stdout.str()

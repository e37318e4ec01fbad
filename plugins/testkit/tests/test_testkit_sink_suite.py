"""The sink suite passes a correct sink and fails each deliberately broken one."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

SINKS = """
import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_testkit import SinkContract


class ListWriter(mb.BatchWriter):
    def __init__(self, store, context):
        super().__init__(context)
        self.store = store

    def add_batch(self, table, batch_id):
        if self.context.state.exists(f"applied-{batch_id}"):
            return
        self.store.append(table)
        self.context.state.write(f"applied-{batch_id}", True)


class ListSink(mb.Sink):
    \"\"\"Appends each committed batch to a list; remembers applied batch ids in its state.\"\"\"

    format_name = "list-sink"
    options = mb.OptionSpec(
        mb.Option(name="store", type="object", required=True, doc="The list to append to."),
    )
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset({mb.OutputMode.APPEND, mb.OutputMode.UPDATE}),
        guarantee=mb.Guarantee.EXACTLY_ONCE,
    )
    writer_class = ListWriter

    def stream_writer(self, context):
        return self.writer_class(self.opts.store, context)


class AppliesTwiceWriter(ListWriter):
    def add_batch(self, table, batch_id):
        self.store.append(table)


class AppliesTwice(ListSink):
    writer_class = AppliesTwiceWriter


class HonestlyAtLeastOnce(AppliesTwice):
    capabilities = mb.SinkCapabilities(guarantee=mb.Guarantee.AT_LEAST_ONCE)


class ShowsBeforeCommitPart(mb.PartWriter):
    def __init__(self, store):
        self.store = store

    def write(self, data, part):
        self.store.append(data.read_all())
        return None


class ShowsBeforeCommitWriter(ListWriter):
    def part_writer(self):
        return ShowsBeforeCommitPart(self.store)

    def commit(self, messages, batch_id):
        pass


class ShowsBeforeCommit(ListSink):
    writer_class = ShowsBeforeCommitWriter


class DropsNullsWriter(ListWriter):
    def add_batch(self, table, batch_id):
        super().add_batch(table.filter(pc.is_valid(table["text"])), batch_id)


class DropsNulls(ListSink):
    writer_class = DropsNullsWriter


class ForgetsEmptyWriter(ListWriter):
    def commit(self, messages, batch_id):
        if not messages:
            raise RuntimeError("nothing to commit")
        super().commit(messages, batch_id)


class ForgetsEmptyBatches(ListSink):
    writer_class = ForgetsEmptyWriter


class UpdateReplacesWriter(ListWriter):
    def add_batch(self, table, batch_id):
        if self.context.output_mode == mb.OutputMode.UPDATE:
            self.store.clear()
        super().add_batch(table, batch_id)


class UpdateReplaces(ListSink):
    writer_class = UpdateReplacesWriter


class Suite(SinkContract):
    __test__ = False
    # the process and engine checks run on the classes below that set them back
    in_process_only = "checked on other classes of this self-test"
    engine_check = False

    def make_options(self):
        if not hasattr(self, "store"):
            self.store = []
        return {"store": self.store}

    def read_back(self, writer):
        return pa.concat_tables(self.store) if self.store else self.input_schema().empty_table()


class TestGood(Suite):
    sink_class = ListSink
    in_process_only = ""
    engine_check = True


class TestAppliesTwice(Suite):
    sink_class = AppliesTwice


class TestHonestlyAtLeastOnce(Suite):
    sink_class = HonestlyAtLeastOnce


class TestShowsBeforeCommit(Suite):
    sink_class = ShowsBeforeCommit
    in_process_only = ""


class TestUpdateReplaces(Suite):
    sink_class = UpdateReplaces


class TestDropsNulls(Suite):
    sink_class = DropsNulls


class TestDropsNullsInTheEngine(Suite):
    sink_class = DropsNulls
    engine_check = True


class TestForgetsEmptyBatches(Suite):
    sink_class = ForgetsEmptyBatches


class TestReadBackMisordered(Suite):
    sink_class = ListSink
    ordered = True

    def read_back(self, writer):
        table = super().read_back(writer)
        return table.take(pa.array(reversed(range(table.num_rows)), type=pa.int64()))


class TestReadBackMisorderedAnyOrder(TestReadBackMisordered):
    ordered = False
"""

FAILED = re.compile(r"^FAILED \S+::(Test\w+)::(test_\w+)")


_RUNS: dict[str, pytest.RunResult] = {}


@pytest.fixture
def run(pytester: pytest.Pytester) -> pytest.RunResult:
    """One run of the suites over SINKS, shared by the tests of this module."""
    if "sinks" not in _RUNS:
        pytester.makepyfile(test_sinks=SINKS)
        _RUNS["sinks"] = pytester.runpytest("-p", "no:cacheprovider", "-rfs", "-q")
    return _RUNS["sinks"]


def test_correct_sink_passes_and_each_broken_one_fails_its_check(run: pytest.RunResult) -> None:
    found: dict[str, set[str]] = {}
    for line in run.outlines:
        match = FAILED.match(line)
        if match:
            found.setdefault(match.group(1), set()).add(match.group(2))
    data_tests = {
        "test_committed_batch_is_read_back",
        "test_parts_of_a_batch_are_committed_together",
        "test_replayed_batch_is_applied_once",
        "test_empty_batches_commit",
        "test_update_mode_keeps_the_rows_of_earlier_batches",
    }
    assert found == {
        "TestAppliesTwice": {"test_replayed_batch_is_applied_once"},
        "TestShowsBeforeCommit": {
            "test_parts_of_a_batch_are_committed_together",
            "test_replayed_batch_is_applied_once",
            "test_parts_are_written_in_other_processes",
        },
        "TestUpdateReplaces": {"test_update_mode_keeps_the_rows_of_earlier_batches"},
        "TestDropsNulls": data_tests,
        "TestDropsNullsInTheEngine": {*data_tests, "test_runs_through_the_engine"},
        "TestForgetsEmptyBatches": {"test_empty_batches_commit"},
        "TestReadBackMisordered": data_tests,
    }, "\n".join(run.outlines[-60:])


def test_failures_show_the_differing_rows(run: pytest.RunResult) -> None:
    text = "\n".join(run.outlines)
    assert (
        "after a new writer re-ran write and commit of batch 0: expected 5 rows, received 10"
        in text
    )
    assert "after batch 1 was written but not committed" in text
    assert "expected, not received (1):" in text
    assert "'id': 3, 'small': None, 'text': None" in text
    assert "HonestlyAtLeastOnce declares guarantee=at-least-once" in text
    assert "update mode, after batch 0 (2 rows) and batch 1 (3 other rows)" in text
    assert "after batch 0's 2 parts were written in other processes" in text
    assert "after run 1 of an available-now query (append mode) that wrote 2 batches" in text
    assert "a batch committed in a child process is not visible in the test process" in text

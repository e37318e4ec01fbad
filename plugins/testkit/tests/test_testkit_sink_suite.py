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


class Suite(SinkContract):
    __test__ = False

    def make_options(self):
        if not hasattr(self, "store"):
            self.store = []
        return {"store": self.store}

    def read_back(self, writer):
        return pa.concat_tables(self.store) if self.store else self.input_schema().empty_table()


class TestGood(Suite):
    sink_class = ListSink


class TestAppliesTwice(Suite):
    sink_class = AppliesTwice


class TestHonestlyAtLeastOnce(Suite):
    sink_class = HonestlyAtLeastOnce


class TestShowsBeforeCommit(Suite):
    sink_class = ShowsBeforeCommit


class TestDropsNulls(Suite):
    sink_class = DropsNulls


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


@pytest.fixture
def run(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makepyfile(test_sinks=SINKS)
    return pytester.runpytest("-p", "no:cacheprovider", "-rfs", "-q")


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
    }
    assert found == {
        "TestAppliesTwice": {"test_replayed_batch_is_applied_once"},
        "TestShowsBeforeCommit": {
            "test_parts_of_a_batch_are_committed_together",
            "test_replayed_batch_is_applied_once",
        },
        "TestDropsNulls": data_tests,
        "TestForgetsEmptyBatches": {"test_empty_batches_commit"},
        "TestReadBackMisordered": data_tests,
    }


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

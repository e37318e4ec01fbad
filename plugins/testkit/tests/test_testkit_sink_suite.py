"""The sink suite passes a correct sink and fails each deliberately broken one."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

SINKS = '''
import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_testkit import SinkContract


class ListSink(mb.BatchSink):
    """Appends each committed batch to a list; remembers applied batch ids in its state."""

    format_name = "list-sink"
    options = mb.OptionSpec(
        mb.Option(name="store", type="object", required=True, doc="The list to append to."),
    )
    guarantee = mb.Guarantee.EXACTLY_ONCE
    output_modes = frozenset({mb.OutputMode.APPEND, mb.OutputMode.UPDATE})

    def add_batch(self, batch_id, table):
        if self.context.state.exists(f"applied-{batch_id}"):
            return
        self.opts.store.append(table)
        self.context.state.write(f"applied-{batch_id}", True)


class AppliesTwice(ListSink):
    def add_batch(self, batch_id, table):
        self.opts.store.append(table)


class HonestlyAtLeastOnce(AppliesTwice):
    guarantee = mb.Guarantee.AT_LEAST_ONCE


class ShowsBeforeCommit(ListSink):
    def write(self, batch_id, data):
        table = data.read_all()
        self.opts.store.append(table)
        return None

    def commit(self, batch_id, messages):
        pass


class DropsNulls(ListSink):
    def add_batch(self, batch_id, table):
        super().add_batch(batch_id, table.filter(pc.is_valid(table["text"])))


class ForgetsEmptyBatches(ListSink):
    def commit(self, batch_id, messages):
        if not messages:
            raise RuntimeError("nothing to commit")
        super().commit(batch_id, messages)


class Suite(SinkContract):
    __test__ = False

    def make_options(self):
        if not hasattr(self, "store"):
            self.store = []
        return {"store": self.store}

    def read_back(self, sink):
        return pa.concat_tables(self.store) if self.store else sink.context.schema.empty_table()


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

    def read_back(self, sink):
        table = super().read_back(sink)
        return table.take(pa.array(reversed(range(table.num_rows)), type=pa.int64()))


class TestReadBackMisorderedAnyOrder(TestReadBackMisordered):
    ordered = False
'''

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
        "after a new instance re-ran write and commit of batch 0: expected 5 rows, received 10"
        in text
    )
    assert "after batch 1 was written but not committed" in text
    assert "expected, not received (1):" in text
    assert "'id': 3, 'small': None, 'text': None" in text
    assert "HonestlyAtLeastOnce declares guarantee = at-least-once" in text

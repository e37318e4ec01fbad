"""The pytest plugin's fixtures and the kit's public names."""

from __future__ import annotations

from pathlib import Path

import pytest

import microbatch_testkit
from microbatch import StateStore

pytest_plugins = ["pytester"]


def test_memory_state_is_a_fresh_store(memory_state: StateStore) -> None:
    assert memory_state.url.startswith("memory://")
    assert memory_state.names() == []
    memory_state.write("offset", {"n": 1})
    assert memory_state.read("offset") == {"n": 1}


def test_memory_states_of_two_tests_are_apart(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_two="""
        def test_first(memory_state):
            memory_state.write("marker", 1)

        def test_second(memory_state):
            assert memory_state.names() == []
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_state_store_lives_in_tmp_path(state_store: StateStore, tmp_path: Path) -> None:
    state_store.write("commit", [1, 2])
    assert (tmp_path / "state" / "commit").read_text() == "[1,2]"


def test_public_names() -> None:
    assert sorted(microbatch_testkit.__all__) == [
        "BatchSourceContract",
        "SinkContract",
        "SourceContract",
        "crash",
        "data",
        "read_elsewhere",
        "write_batch_elsewhere",
    ]
    assert microbatch_testkit.SourceContract.__test__ is False
    assert microbatch_testkit.SinkContract.__test__ is False
    assert microbatch_testkit.BatchSourceContract.__test__ is False


def test_subclasses_are_collected_unless_they_opt_out() -> None:
    class Mine(microbatch_testkit.SourceContract):
        pass

    class MyBase(microbatch_testkit.SinkContract):
        __test__ = False

    class MySuite(MyBase):
        pass

    assert Mine.__test__ is True
    assert MyBase.__test__ is False
    assert MySuite.__test__ is True


def test_edge_data_covers_the_edge_cases() -> None:
    data = microbatch_testkit.data
    batches = data.edge_batches()
    assert [batch.num_rows for batch in batches] == [3, 0, 2]
    assert all(batch.schema.equals(data.EDGE_SCHEMA) for batch in batches)
    table = data.edge_table()
    assert all(table.column(name).null_count > 0 for name in table.column_names if name != "id")
    assert table.schema.field("at_local").type.tz == "America/New_York"
    assert data.simple_table().num_rows == 4

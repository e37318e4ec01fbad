"""The memory sink, driven through the sink contract as the engine drives it."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
import microbatch_memory
from microbatch import ConfigurationError, Guarantee, OutputMode, PartContext, WriteContext
from microbatch.errors import SchemaMismatchError
from microbatch_memory import MemorySink, MemoryTable, MemoryWriter, memory_table

SCHEMA = pa.schema([("key", pa.string()), ("value", pa.int64())])


def new_session() -> mb.Session:
    return mb.Session(load_plugins=False)


def make_connector(session: object) -> MemorySink:
    return MemorySink(MemorySink.options.parse({}, connector="memory"), session=session)


def make_sink(
    session: object,
    name: str | None = "out",
    mode: OutputMode = OutputMode.APPEND,
    query_id: str = "q1",
    schema: pa.Schema = SCHEMA,
) -> MemoryWriter:
    """The stream writer of one query run, as ``start()`` makes it."""
    context = WriteContext(
        schema=schema,
        output_mode=mode,
        query_id=query_id,
        query_name=name,
        session=session,
    )
    return make_connector(session).stream_writer(context)


def rows(*pairs: tuple[str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"key": k, "value": v} for k, v in pairs], schema=SCHEMA)


def run_batch(sink: MemoryWriter, batch_id: int, *parts: pa.Table) -> None:
    part_writer = sink.part_writer()
    messages = [
        part_writer.write(
            pa.RecordBatchReader.from_batches(SCHEMA, p.to_batches()),
            PartContext(batch_id=batch_id, part_index=index, num_parts=len(parts)),
        )
        for index, p in enumerate(parts)
    ]
    sink.commit(messages, batch_id)


def as_pairs(table: pa.Table) -> list[tuple[str, int]]:
    return [(row["key"], row["value"]) for row in table.to_pylist()]


def test_declared_capabilities() -> None:
    capabilities = MemorySink.capabilities
    assert MemorySink.format_name == "memory"
    assert capabilities.output_modes == {OutputMode.APPEND, OutputMode.COMPLETE, OutputMode.UPDATE}
    assert capabilities.guarantee is Guarantee.EXACTLY_ONCE
    assert capabilities.needs_checkpoint is False
    assert not capabilities.partition_by


@pytest.mark.parametrize("name", [None, ""])
def test_query_name_is_required(name: str | None) -> None:
    with pytest.raises(ConfigurationError, match="queryName must be specified for memory sink"):
        make_sink(new_session(), name=name)


def test_rejects_unknown_options() -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'numRows'"):
        MemorySink.options.parse({"numRows": 3}, connector="memory")


def test_registers_an_empty_table_when_the_writer_is_made() -> None:
    session = new_session()
    make_sink(session)
    table = session.table("out")
    assert table.schema.equals(SCHEMA)
    assert table.num_rows == 0


def test_append_accumulates_batches_in_order() -> None:
    session = new_session()
    sink = make_sink(session)
    run_batch(sink, 0, rows(("a", 1)), rows(("b", 2)))
    run_batch(sink, 1, rows(("c", 3)))
    assert as_pairs(session.table("out")) == [("a", 1), ("b", 2), ("c", 3)]
    assert sink.table.batch_ids == [0, 1]
    assert sink.table.num_rows == 3


def test_update_mode_appends_changed_rows() -> None:
    session = new_session()
    sink = make_sink(session, mode=OutputMode.UPDATE)
    run_batch(sink, 0, rows(("a", 2)))
    run_batch(sink, 1, rows(("a", 3)))
    assert as_pairs(session.table("out")) == [("a", 2), ("a", 3)]


def test_complete_mode_replaces_contents_each_batch() -> None:
    session = new_session()
    sink = make_sink(session, mode=OutputMode.COMPLETE)
    run_batch(sink, 0, rows(("a", 1), ("b", 1)))
    run_batch(sink, 1, rows(("a", 2)), rows(("b", 5)))
    assert as_pairs(session.table("out")) == [("a", 2), ("b", 5)]
    run_batch(sink, 2)  # an empty complete result empties the table
    assert session.table("out").num_rows == 0
    assert sink.table.batch_ids == [0, 1, 2]


def test_replayed_batch_is_not_applied_twice() -> None:
    session = new_session()
    sink = make_sink(session)
    run_batch(sink, 0, rows(("a", 1)))
    run_batch(sink, 1, rows(("b", 2)))
    run_batch(sink, 1, rows(("b", 2)))  # replay of the last batch
    run_batch(sink, 0, rows(("zzz", 9)))  # an older id is skipped too
    assert as_pairs(session.table("out")) == [("a", 1), ("b", 2)]
    assert sink.table.batch_ids == [0, 1]


def test_replay_in_complete_mode_keeps_first_result() -> None:
    session = new_session()
    sink = make_sink(session, mode=OutputMode.COMPLETE)
    run_batch(sink, 4, rows(("a", 1)))
    run_batch(sink, 4, rows(("a", 100)))
    assert as_pairs(session.table("out")) == [("a", 1)]


def test_empty_append_batch_is_recorded() -> None:
    session = new_session()
    sink = make_sink(session)
    run_batch(sink, 0)
    assert sink.table.batch_ids == [0]
    assert session.table("out").num_rows == 0


def test_reads_are_cached_until_the_next_batch() -> None:
    session = new_session()
    sink = make_sink(session)
    run_batch(sink, 0, rows(("a", 1)))
    run_batch(sink, 1, rows(("b", 2)))
    first = session.table("out")
    assert session.table("out") is first
    run_batch(sink, 2, rows(("c", 3)))
    second = session.table("out")
    assert second is not first
    assert as_pairs(first) == [("a", 1), ("b", 2)]  # an earlier read is not changed
    assert as_pairs(second) == [("a", 1), ("b", 2), ("c", 3)]


def test_restart_of_the_same_query_continues_the_table() -> None:
    session = new_session()
    first = make_sink(session, query_id="q1")
    run_batch(first, 0, rows(("a", 1)))
    run_batch(first, 1, rows(("b", 2)))
    first.stop()
    second = make_sink(session, query_id="q1")
    assert second.table is first.table
    run_batch(second, 1, rows(("b", 2)))  # the batch replayed after the restart
    run_batch(second, 2, rows(("c", 3)))
    assert as_pairs(session.table("out")) == [("a", 1), ("b", 2), ("c", 3)]
    assert memory_table(session, "out") is second.table


def test_a_new_query_under_the_same_name_starts_empty() -> None:
    session = new_session()
    first = make_sink(session, query_id="q1")
    run_batch(first, 0, rows(("a", 1)))
    second = make_sink(session, query_id="q2")
    assert session.table("out").num_rows == 0
    run_batch(second, 0, rows(("b", 2)))  # its batch 0 is not mistaken for q1's
    assert as_pairs(session.table("out")) == [("b", 2)]
    assert as_pairs(first.table.to_table()) == [("a", 1)]


def test_a_changed_schema_starts_a_new_table() -> None:
    session = new_session()
    first = make_sink(session)
    run_batch(first, 0, rows(("a", 1)))
    other = pa.schema([("key", pa.string())])
    second = make_sink(session, schema=other)
    assert second.table is not first.table
    assert session.table("out").schema.equals(other)


def test_tables_are_per_session_and_per_name() -> None:
    one, two = new_session(), new_session()
    sink_one = make_sink(one, name="t")
    sink_two = make_sink(two, name="t")
    sink_other = make_sink(one, name="u")
    run_batch(sink_one, 0, rows(("a", 1)))
    assert one.table("t").num_rows == 1
    assert two.table("t").num_rows == 0
    assert one.table("u").num_rows == 0
    assert memory_table(one, "t") is sink_one.table
    assert memory_table(two, "t") is sink_two.table
    assert memory_table(one, "u") is sink_other.table
    assert memory_table(one, "missing") is None


def test_tables_are_released_with_their_session() -> None:
    session = new_session()
    sink = make_sink(session)
    run_batch(sink, 0, rows(("a", 1)))
    assert session in microbatch_memory.table._TABLES
    session_ref, table_ref = weakref.ref(session), weakref.ref(sink.table)
    del session, sink
    gc.collect()
    assert session_ref() is None  # the module-level registry does not keep a session alive
    assert table_ref() is None


def test_works_without_a_session() -> None:
    sink = make_sink(None)
    run_batch(sink, 0, rows(("a", 1)))
    assert as_pairs(sink.table.to_table()) == [("a", 1)]


def test_parallel_writes_of_one_batch_all_land() -> None:
    session = new_session()
    sink = make_sink(session)
    parts = [rows(*[(f"p{p}", i) for i in range(100)]) for p in range(8)]
    messages: list[Any] = [None] * len(parts)
    part_writer = sink.part_writer()

    def write(index: int) -> None:
        reader = pa.RecordBatchReader.from_batches(SCHEMA, parts[index].to_batches())
        messages[index] = part_writer.write(reader, PartContext(0, index, len(parts)))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(parts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.commit(messages, 0)
    table = session.table("out")
    assert table.num_rows == 800
    assert table.column("key").to_pylist()[:100] == ["p0"] * 100  # split order is kept


def test_concurrent_readers_see_whole_batches() -> None:
    session = new_session()
    sink = make_sink(session)
    seen: list[int] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            seen.append(session.table("out").num_rows)

    thread = threading.Thread(target=reader)
    thread.start()
    for batch_id in range(200):
        run_batch(sink, batch_id, rows(("a", batch_id), ("b", batch_id)))
    done.set()
    thread.join()
    assert seen, "the reader thread never read"
    assert all(count % 2 == 0 for count in seen)
    assert session.table("out").num_rows == 400


def test_memory_table_conforms_compatible_batches_and_rejects_others() -> None:
    table = MemoryTable("t", SCHEMA)
    swapped = pa.table({"value": pa.array([1], pa.int32()), "key": ["a"]})
    assert table.apply(0, swapped)
    assert table.to_table().schema.equals(SCHEMA)
    with pytest.raises(SchemaMismatchError, match="memory table 't'"):
        table.apply(1, pa.table({"other": [1]}))
    assert table.batch_ids == [0]
    assert table.last_batch_id == 0
    assert "rows=1" in repr(table)


def test_describe_names_the_table() -> None:
    session = new_session()
    sink = make_connector(session)
    sink.stream_writer(WriteContext(schema=SCHEMA, query_name="big", session=session))
    assert sink.describe() == "MemorySink[big]"

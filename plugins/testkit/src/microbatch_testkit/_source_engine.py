"""The source suite's engine check: a real query from the source under test into a collector."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from microbatch import Session
from microbatch._checkpoint import Checkpoint

from ._compare import rows_difference, show
from ._engine import COLLECT_FORMAT, CollectSink, batch_ranges, ensure_registered, wait_until

__all__ = ["run_source_query"]

_PRODUCE_ROUNDS = 2


def run_source_query(contract: Any) -> None:
    """Start a query (processing-time trigger of 0 s) reading ``contract``'s source into a
    :class:`CollectSink`; produce data twice (or wait for a few batches of a source that makes
    its own); stop; then require batches that follow each other and, for a replayable source,
    rows equal to one read of the whole range the query covered."""
    cls = contract._connector_class()
    session = contract.session if isinstance(contract.session, Session) else None
    if session is None:
        session = Session(load_plugins=False)
    ensure_registered(session, "source", cls)
    ensure_registered(session, "sink", CollectSink)
    collected: dict[int, pa.Table] = {}
    checkpoint = contract.tmp_path / "engine-check-checkpoint"
    builder = session.read_stream.format(cls.format_name).options(**contract.make_options())
    schema = contract.make_schema()
    if schema is not None:
        builder = builder.schema(schema)
    query = (
        builder.load()
        .write_stream.format(COLLECT_FORMAT)
        .option("into", collected)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processing_time="0 seconds")
        .start()
    )
    timeout = contract.engine_timeout
    try:
        engine = getattr(query, "_engine", None)
        reader = getattr(getattr(engine, "job", None), "reader", None)
        if contract.generates_data_on_its_own:
            contract.produce(reader)
            wait_until(
                lambda: len(collected) >= contract.engine_batches,
                timeout,
                f"{contract.engine_batches} batches",
                query,
            )
        else:
            for round_number in range(_PRODUCE_ROUNDS):
                contract.produce(reader)
                if not query.process_all_available(timeout=timeout):
                    raise AssertionError(
                        f"the query did not catch up within {timeout:g} s after produce() "
                        f"number {round_number + 1}"
                    )
    finally:
        query.stop()
    error = query.exception()
    assert error is None, f"the query reading {cls.__qualname__} failed: {error!r}"
    _check_batches(contract, cls, collected, query, Checkpoint(str(checkpoint)))


def _check_batches(
    contract: Any, cls: type[Any], collected: dict[int, pa.Table], query: Any, checkpoint: Any
) -> None:
    ids = sorted(collected)
    assert ids, f"the query reading {cls.__qualname__} ran no batch after produce()"
    assert ids == list(range(len(ids))), f"the query committed batches {ids}, not 0..{len(ids) - 1}"
    ranges = batch_ranges(query, ids)
    missing = [batch_id for batch_id in ids if batch_id not in ranges]
    assert not missing, f"no progress record names the offsets of batches {missing}"
    for batch_id in ids[1:]:
        previous_end, start = ranges[batch_id - 1][1], ranges[batch_id][0]
        assert start == previous_end, (
            f"batch {batch_id} starts at {show(start)}, batch {batch_id - 1} ended at "
            f"{show(previous_end)}"
        )
    rows = pa.concat_tables([collected[batch_id] for batch_id in ids])
    listing = ", ".join(
        f"batch {batch_id} ({show(ranges[batch_id][0])}, {show(ranges[batch_id][1])}] "
        f"{collected[batch_id].num_rows} rows"
        for batch_id in ids
    )
    assert rows.num_rows > 0, f"the query's batches held no rows: {listing}"
    if not contract._capabilities().replayable:
        return
    first, last = ranges[ids[0]][0], ranges[ids[-1]][1]
    reader = contract.build(state=checkpoint.source_state(0))
    whole = contract.read_range(reader, first, last)
    difference = rows_difference(
        whole,
        rows.cast(whole.schema),
        ordered=False,  # splits may interleave rows (partitions)
        context=(
            f"the engine's batches ({listing}) compared with reading ({show(first)}, "
            f"{show(last)}] in one go ({whole.num_rows} rows)"
        ),
    )
    assert not difference, difference

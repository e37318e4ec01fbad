"""The sink suite's heavier checks: a crash inside ``commit``, and a real query into the sink."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, Session

from ._commit_crash import ENV_KILLS, commit_in_child, kill_points
from ._compare import rows_difference
from ._engine import ROWS_FORMAT, RowsSource, ensure_registered

__all__ = ["check_commit_under_kills", "run_sink_query"]


def check_commit_under_kills(contract: Any) -> None:
    """Kill ``commit`` at many lines of the sink's own code; each time, require the batch to
    be wholly visible or wholly absent, and a replay by a new writer to leave it exactly once.

    Batch 0 is committed whole in a child process, counting the line events of its commit;
    batch ``k`` (k = 1, 2, ...) is written here, then committed in a child killed with SIGKILL
    before line event number ``point[k]``, then replayed (written and committed again) by a new
    writer, as the engine does after a restart. Kill points: see ``kill_points``.
    """
    parts = contract.input_parts()
    whole = contract._table([batch for part in parts for batch in part])
    writer = contract.build()
    packages = contract.commit_crash_modules(writer)

    def commit_in_a_new_writer(messages: list[Any], batch_id: int) -> Any:
        def prepare() -> Any:
            child_writer = contract.build(
                last_committed_batch_id=batch_id - 1 if batch_id else None
            )
            return lambda: child_writer.commit(messages, batch_id)

        return prepare

    messages = contract.write_parts(writer, 0, parts)
    first = commit_in_child(commit_in_a_new_writer(messages, 0), packages, None)
    if first.error:
        pytest.fail(f"commit(messages, 0) failed in a child process:\n{first.error}")
    fresh = contract.build(last_committed_batch_id=0)
    committed = [whole]
    if contract.read_back(fresh).num_rows == 0 and whole.num_rows:
        pytest.skip(
            "a batch committed in a child process is not visible in the test process: the "
            "sink keeps its contents in its process, so a crash of that process loses them all"
        )
    contract.assert_contents(
        fresh, contract._expected(committed), "after batch 0 was committed in a child process"
    )
    if first.events == 0:
        pytest.fail(
            f"commit(messages, 0) ran no line of the packages {sorted(packages)}: name the "
            "packages of the sink's code in commit_crash_modules()"
        )
    points = kill_points(first.events)
    for batch_id, point in enumerate(points, start=1):
        messages = contract.write_parts(writer, batch_id, parts)
        outcome = commit_in_child(commit_in_a_new_writer(messages, batch_id), packages, point)
        if outcome.error:
            pytest.fail(f"commit(messages, {batch_id}) failed in a child process:\n{outcome.error}")
        where = (
            f"a SIGKILL before line event {point} of {first.events} of commit(messages, "
            f"{batch_id}), at {outcome.where}"
            if outcome.killed
            else f"commit(messages, {batch_id}) in a child process (it ended before line event "
            f"{point})"
        )
        fresh = contract.build(last_committed_batch_id=batch_id - 1)
        before = contract._expected(committed)
        after = contract._expected([*committed, whole])
        seen = contract.read_back(fresh)
        if rows_difference(before, seen, ordered=contract.ordered) and rows_difference(
            after, seen, ordered=contract.ordered
        ):
            pytest.fail(
                f"after {where}, batch {batch_id} is partly visible: the sink holds neither the "
                f"batches before it ({before.num_rows} rows) nor all of them with it "
                f"({after.num_rows} rows)\n"
                + rows_difference(after, seen, ordered=contract.ordered, context="with it")
            )
        contract.run_batch(fresh, batch_id, parts)
        committed.append(whole)
        contract.assert_contents(
            fresh,
            contract._expected(committed),
            f"after {where}, and a replay of batch {batch_id} by a new writer (are the rows "
            "and the record of applied batches committed in one transaction?); "
            f"kill point {batch_id} of the {len(points)} tried ({ENV_KILLS}=all tries every line)",
        )


def run_sink_query(contract: Any) -> None:
    """Two runs of an available-now query over one checkpoint, from :class:`RowsSource` into
    the sink under test (two batches of two parts, then one more batch); after each run,
    ``read_back`` must show every batch once."""
    cls = contract._connector_class()
    modes = contract._capabilities().output_modes
    choices = [contract.output_mode, OutputMode.APPEND, OutputMode.UPDATE]
    mode = next((m for m in choices if m in modes and m != OutputMode.COMPLETE), None)
    if mode is None:
        pytest.skip("the sink takes only complete mode, which needs an aggregation")
    session = contract.session if isinstance(contract.session, Session) else None
    if session is None:
        session = Session(load_plugins=False)
    ensure_registered(session, "sink", cls)
    ensure_registered(session, "source", RowsSource)
    batches = [contract.input_parts(), contract.input_parts()]
    whole = contract._table([batch for part in batches[0] for batch in part])
    checkpoint = contract.tmp_path / "engine-check-checkpoint"
    for run, expected_batches in ((1, 2), (2, 3)):
        builder = (
            session.read_stream.format(ROWS_FORMAT)
            .option("batches", batches)
            .option("rowsSchema", contract.input_schema())
            .load()
            .write_stream.format(cls.format_name)
            .options(**contract.make_options())
            .output_mode(mode)
            .option("checkpointLocation", str(checkpoint))
            .trigger(available_now=True)
        )
        if contract.query_name:
            builder = builder.query_name(contract.query_name)
        query = builder.start()
        finished = query.await_termination(timeout=60)
        if not finished:
            query.stop()
        assert finished, f"run {run} of the query into {cls.__qualname__} did not end in 60 s"
        error = query.exception()
        assert error is None, f"run {run} of the query into {cls.__qualname__} failed: {error!r}"
        fresh = contract.build(output_mode=mode)
        if mode == OutputMode.UPDATE:
            expected = contract.expected_contents(
                contract.expected_update_contents([whole] * expected_batches)
            )
        else:
            expected = contract._expected([whole] * expected_batches)
        contract.assert_contents(
            fresh,
            expected,
            f"after run {run} of an available-now query ({mode.value} mode) that wrote "
            f"{expected_batches} batches of {len(batches[0])} parts in all",
        )
        batches.append(contract.input_parts())
    assert isinstance(whole, pa.Table)

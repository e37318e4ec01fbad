"""The sink suite's heavier checks: a crash inside ``commit``, and a real query into the sink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, Session, StateStore

from ._commit_crash import ENV_KILLS, commit_in_child, kill_points
from ._compare import rows_difference
from ._engine import ROWS_FORMAT, RowsSource, ensure_registered

__all__ = ["check_commit_under_kills", "run_sink_query"]


def check_commit_under_kills(contract: Any) -> None:
    """Kill ``commit`` at many lines of the sink's own code; each time, require the batch to
    be wholly visible or wholly absent, and a replay by a new writer to leave it exactly once.

    First batch 0 is committed here and batch 1 in a child process that counts the line events
    of its commit (``commit_crash_modules``). Then, for each kill point (see ``kill_points``),
    in a fresh folder (``self.tmp_path`` and ``self.state`` are swapped, so that each attempt
    costs the same; when ``make_options`` does not follow ``self.tmp_path``, every attempt uses
    the one sink with the next batch ids): batch 0 is committed here, the next batch written here
    and committed in a child killed with SIGKILL before that line event, then replayed (written
    and committed again) by a new writer, as the engine does after a restart.
    """
    parts = contract.input_parts()
    whole = contract._table([batch for part in parts for batch in part])
    home, home_state = contract.tmp_path, contract.state
    writer = contract.build()
    packages = contract.commit_crash_modules(writer)
    contract.run_batch(writer, 0, parts)
    messages = contract.write_parts(writer, 1, parts)
    before_child = contract.read_back(contract.build(last_committed_batch_id=0))
    counted = commit_in_child(_commit_in_a_new_writer(contract, messages, 1), packages, None)
    if counted.error:
        pytest.fail(f"commit(messages, 1) failed in a child process:\n{counted.error}")
    fresh = contract.build(last_committed_batch_id=1)
    if whole.num_rows and not rows_difference(
        before_child, contract.read_back(fresh), ordered=contract.ordered
    ):
        pytest.skip(
            "a batch committed in a child process is not visible in the test process: the "
            "sink keeps its contents in its process, so a crash of that process loses them all"
        )
    contract.assert_contents(
        fresh,
        contract._expected([whole, whole]),
        "after batch 0 was committed here and batch 1 in a child process",
    )
    if counted.events == 0:
        pytest.fail(
            f"commit(messages, 1) ran no line of the packages {sorted(packages)}: name the "
            "packages of the sink's code in commit_crash_modules()"
        )
    points = kill_points(counted.events)
    shared: list[pa.Table] | None = None  # the batches so far, when every attempt shares a sink
    try:
        for number, point in enumerate(points, start=1):
            if shared is None and _move_to_fresh_folder(contract, home, number):
                first = contract.build()
                contract.run_batch(first, 0, parts)
                committed, batch_id = [whole], 1
            else:
                contract.tmp_path, contract.state = home, home_state
                shared = shared if shared is not None else [whole, whole]
                first, committed, batch_id = contract.build(), shared, len(shared)
            where = _kill_once(contract, first, packages, batch_id, point, counted.events)
            tried = f"kill point {number} of the {len(points)} tried ({ENV_KILLS}=all: every line)"
            fresh = contract.build(last_committed_batch_id=batch_id - 1)
            before = contract._expected(committed)
            after = contract._expected([*committed, whole])
            seen = contract.read_back(fresh)
            if rows_difference(before, seen, ordered=contract.ordered) and rows_difference(
                after, seen, ordered=contract.ordered
            ):
                pytest.fail(
                    f"after {where}, batch {batch_id} is partly visible: the sink holds neither "
                    f"the batches before it ({before.num_rows} rows) nor all of them with it "
                    f"({after.num_rows} rows); {tried}\n"
                    + rows_difference(after, seen, ordered=contract.ordered, context="with it")
                )
            contract.run_batch(fresh, batch_id, parts)
            committed.append(whole)
            contract.assert_contents(
                fresh,
                contract._expected(committed),
                f"after {where}, and a replay of batch {batch_id} by a new writer (are the rows "
                f"and the record of applied batches committed in one transaction?); {tried}",
            )
    finally:
        contract.tmp_path, contract.state = home, home_state


def _commit_in_a_new_writer(contract: Any, messages: list[Any], batch_id: int) -> Any:
    def prepare() -> Any:
        writer = contract.build(last_committed_batch_id=batch_id - 1 if batch_id else None)
        return lambda: writer.commit(messages, batch_id)

    return prepare


def _kill_once(
    contract: Any, writer: Any, packages: set[str], batch_id: int, point: int, events: int
) -> str:
    """Write batch ``batch_id`` with ``writer``, commit it in a child killed before line event
    ``point``; return what happened, for messages."""
    messages = contract.write_parts(writer, batch_id, contract.input_parts())
    outcome = commit_in_child(
        _commit_in_a_new_writer(contract, messages, batch_id), packages, point
    )
    if outcome.error:
        pytest.fail(f"commit(messages, {batch_id}) failed in a child process:\n{outcome.error}")
    if outcome.killed:
        return (
            f"a SIGKILL before line event {point} of {events} of commit(messages, {batch_id}), "
            f"at {outcome.where}"
        )
    return f"commit(messages, {batch_id}) in a child process (it ended before line event {point})"


def _move_to_fresh_folder(contract: Any, home: Path, number: int) -> bool:
    """Point ``self.tmp_path`` and ``self.state`` at a new folder; True when the sink's
    options follow (a new writer there sees nothing yet)."""
    folder = home / f"commit-kill-{number}"
    folder.mkdir()
    contract.tmp_path = folder
    contract.state = StateStore(str(folder / "state"))
    empty = contract._expected([])
    return not rows_difference(empty, contract.read_back(contract.build()), ordered=False)


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

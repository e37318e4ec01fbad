"""Review of checkpoint identity and redaction: spellings of a source path that the identity
took for the same folder while the file source read every file again, and the cost of keeping
secrets out of progress records."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch.errors import CheckpointMismatchError

pytest.importorskip("microbatch_file")


def run(session: mb.Session, source: str, sink: Path, checkpoint: Path) -> None:
    query = (
        session.read_stream.format("json")
        .schema("id bigint")
        .load(source)
        .write_stream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start(str(sink))
    )
    query.await_termination()


def output_ids(session: mb.Session, sink: Path) -> list[int]:
    table = session.read.format("parquet").schema("id bigint").load(str(sink))
    return sorted(table.column("id").to_pylist())


@pytest.mark.parametrize(
    "spelling", ["{root}/in/.", "{root}/in/./", "{root}/x/../in", "{root}//in"]
)
def test_a_source_path_spelt_with_dots_or_doubled_slashes_never_reads_files_again(
    session: mb.Session, tmp_path: Path, spelling: str, write_rows: Callable[..., None]
) -> None:
    """``in/.``, ``x/../in`` and ``//`` name the folder already read, but the file source keys
    the files it has read by the path as spelt: such a restart must be refused (or read
    nothing twice), never accepted as the same source and then read everything again."""
    (tmp_path / "x").mkdir()
    write_rows(tmp_path / "in", "a.json", range(10))
    checkpoint, out = tmp_path / "cp", tmp_path / "out"
    run(session, str(tmp_path / "in"), out, checkpoint)
    write_rows(tmp_path / "in", "b.json", range(10, 15))
    try:
        run(session, spelling.format(root=tmp_path), out, checkpoint)
    except CheckpointMismatchError as refused:
        assert "another source" in str(refused)
    assert output_ids(session, out) in (list(range(10)), list(range(15)))
    run(session, f"{tmp_path}/in/", out, checkpoint)  # the recorded spelling goes on
    assert output_ids(session, out) == list(range(15))


def test_a_sink_path_spelt_with_dots_is_still_the_same_sink(
    session: mb.Session, tmp_path: Path, write_rows: Callable[..., None]
) -> None:
    write_rows(tmp_path / "in", "a.json", range(5))
    checkpoint, out = tmp_path / "cp", tmp_path / "out"
    run(session, str(tmp_path / "in"), out, checkpoint)
    write_rows(tmp_path / "in", "b.json", range(5, 8))
    run(session, str(tmp_path / "in"), tmp_path / "out" / ".", checkpoint)
    assert output_ids(session, out) == list(range(8))


REDACTED = "*********(redacted)"


def redactor(secrets: list[str]) -> Any:
    from microbatch._redact import redactor as build

    return build(secrets)


def progress_record(shown: str) -> dict[str, Any]:
    return {
        "id": "cda47b7b-1384-4d00-be78-63ba948238b8",
        "batchId": 7,
        "durationMs": {"addBatch": 1, "walCommit": 0},
        "sources": [
            {"description": f"Source[user=me, token={shown}]", "startOffset": {"o": 6}},
        ],
        "sink": {"description": "Sink", "numOutputRows": -1, "metrics": {"k": [shown, 1]}},
    }


def test_a_progress_record_that_shows_no_secret_is_passed_on_as_it_is() -> None:
    """The hot path: a record without the secret is not walked and rebuilt on every batch."""
    record = progress_record(REDACTED)
    cleaner = redactor(["hunter2-s3cr3t", "pässwörd"])
    assert cleaner.value(record) is record
    assert cleaner.text("Processing new data") == "Processing new data"


@pytest.mark.parametrize(
    "shown",
    [
        "hunter2-s3cr3t",
        "p%C3%A4ssw%C3%B6rd",
        "p\\xe4ssw\\xf6rd",
        "p\\u00e4ssw\\u00f6rd",
        "pässwörd",
        "x y&amp;z",
        "x+y%26z",
    ],
)
def test_a_progress_record_that_shows_a_secret_in_any_form_is_scrubbed(shown: str) -> None:
    cleaner = redactor(["hunter2-s3cr3t", "pässwörd", "x y&z", "ab"])
    cleaned = cleaner.value(progress_record(shown))
    text = json.dumps(cleaned, ensure_ascii=False)
    assert shown not in text
    assert text.count(REDACTED) == 2
    assert cleaned["batchId"] == 7 and cleaned["sink"]["metrics"]["k"][1] == 1


def test_secrets_without_plain_characters_and_short_ones_are_still_scrubbed() -> None:
    cleaner = redactor(["%$#!", "ab"])
    assert cleaner.value({"a": ["x %$#! y", "about ab"]}) == {
        "a": [f"x {REDACTED} y", f"about {REDACTED}"]
    }
    assert cleaner.value(("id-ab1",)) == ("id-ab1",)  # inside a token: not the short secret


# -- the start-up sweep and another process trying to take the lock -------------------------
RACER = """
import sys, time
from microbatch._checkpoint import Checkpoint
from microbatch.errors import CheckpointInUseError

role, folder, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
checkpoint = Checkpoint(folder)
unexpected, attempts, deadline = [], 0, time.monotonic() + seconds
while time.monotonic() < deadline:
    attempts += 1
    try:
        checkpoint.acquire(f"{role}-{attempts}")
    except CheckpointInUseError:
        continue
    except Exception as error:
        unexpected.append(f"{type(error).__name__}: {error}")
        continue
    if role == "holder":
        for _ in range(20):
            checkpoint.sweep_temporary()
    checkpoint.release()
print(len(unexpected), attempts, unexpected[:1])
"""


def test_the_start_up_sweep_never_breaks_another_process_taking_the_lock(tmp_path: Path) -> None:
    """A start sweeps temporary files once it holds the lock; another process trying to take
    the lock at that moment writes ``.lock.<hex>.tmp`` in the same folder. Sweeping it made the
    other start fail with a bare FileNotFoundError instead of CheckpointInUseError."""
    import subprocess
    import sys

    seconds = os.environ.get("MICROBATCH_SWEEP_RACE_SECONDS", "2")
    folder = tmp_path / "cp"
    folder.mkdir()
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, role, str(folder), seconds],
            stdout=subprocess.PIPE,
            text=True,
        )
        for role in ("holder", "starter")
    ]
    results = [racer.communicate(timeout=120)[0].split(" ", 2) for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    for unexpected, attempts, sample in results:
        assert int(attempts) > 10
        assert unexpected == "0", sample


def test_temporary_files_of_lock_attempts_are_swept_only_once_abandoned(tmp_path: Path) -> None:
    from microbatch._checkpoint import Checkpoint

    checkpoint = Checkpoint(str(tmp_path / "cp"))
    checkpoint.root.write("metadata", {"id": "q"})
    fresh = [f".lock.{'a' * 32}.tmp", f"..lock.takeover-0123456789abcdef-1.{'b' * 32}.tmp"]
    old = [f".lock.{'c' * 32}.tmp", f"..lock.takeover-0123456789abcdef-2.{'d' * 32}.tmp"]
    killed = [f".metadata.{'e' * 32}.tmp"]
    for name in fresh + old + killed:
        (tmp_path / "cp" / name).write_text("{")
    an_hour_ago = os.path.getmtime(tmp_path / "cp" / "metadata") - 3600
    for name in old:
        os.utime(tmp_path / "cp" / name, (an_hour_ago, an_hour_ago))
    assert checkpoint.sweep_temporary() == 3
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == sorted([*fresh, "metadata"])


# -- retention clean-up killed half-way -------------------------------------------------------
def test_a_commit_entry_left_by_a_clean_up_killed_half_way_is_removed_later(
    tmp_path: Path,
    write_rows: Callable[..., None],
    file_by_file: Callable[..., Any],
) -> None:
    """Retention deletes offsets/<k> and then commits/<k>; a process killed in between left
    commits/<k> behind, below the oldest offset entry, and no later clean-up removed it."""

    def run_once(session: mb.Session) -> None:
        file_by_file(session, "parquet").start(str(tmp_path / "out")).await_termination()

    with mb.Session(conf={"minBatchesToRetain": 2}) as session:
        for index in range(6):
            write_rows(tmp_path / "in", f"{index}.json", range(index * 3, index * 3 + 3))
        run_once(session)
        offsets, commits = tmp_path / "cp" / "offsets", tmp_path / "cp" / "commits"
        oldest = min(int(name) for name in os.listdir(offsets))
        assert oldest > 0 and (commits / str(oldest)).exists()
        (offsets / str(oldest)).unlink()  # as a kill between the two deletes leaves it
        for index in range(6, 9):
            write_rows(tmp_path / "in", f"{index}.json", range(index * 3, index * 3 + 3))
        run_once(session)
        assert not (commits / str(oldest)).exists()
        assert sorted(int(n) for n in os.listdir(commits)) == sorted(
            int(n) for n in os.listdir(offsets)
        )
        assert output_ids(session, tmp_path / "out") == list(range(27))


# -- errors of a query cross process boundaries -----------------------------------------------
TOKEN = "tok-3x4mpl3-s3cr3t"


def secret_sink_class() -> type[Any]:
    from microbatch.options import Option, OptionSpec

    class LoginFailingWriter(mb.StreamWriter, mb.PartWriter):
        def __init__(self, token: str) -> None:
            self.token = token

        def write(self, data: Any, part: mb.PartContext) -> None:
            data.read_all()
            if part.batch_id == 1:
                raise ConnectionError(f"login with {self.token} refused")

        def commit(self, messages: Any, batch_id: int) -> None:
            pass

    class LoginFailingSink(mb.Sink):
        """Fails writing batch 1 with its token in the message."""

        format_name = "login-failing-review-test"
        capabilities = mb.SinkCapabilities(needs_checkpoint=False)
        options = OptionSpec(Option(name="token", secret=True, required=True, doc="the token"))

        def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
            return LoginFailingWriter(self.opts.token)

    return LoginFailingSink


def test_the_error_of_a_failed_query_survives_pickling_without_the_secret(
    session: mb.Session,
) -> None:
    """A query run in a worker process (multiprocessing, a process pool) reports its failure
    by pickling the exception; the keyword-only constructor made unpickling fail."""
    import pickle

    from microbatch.errors import StreamingQueryException

    session.registry.add_sink(secret_sink_class())
    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 1)
        .load()
        .write_stream.format("login-failing-review-test")
        .option("token", TOKEN)
        .start()
    )
    with pytest.raises(StreamingQueryException):
        query.await_termination(timeout=30)
    failure = query.exception()
    assert failure is not None
    back = pickle.loads(pickle.dumps(failure))
    assert type(back) is StreamingQueryException
    assert (back.query_id, back.run_id) == (query.id, query.run_id)
    assert str(back) == str(failure) and TOKEN not in str(back) and "ConnectionError" in str(back)
    assert isinstance(back.cause, ConnectionError) and TOKEN not in str(back.cause)


def test_a_stop_timeout_error_survives_pickling(session: mb.Session) -> None:
    import pickle
    import threading

    from microbatch.errors import QueryStopTimeoutError

    running, release = threading.Event(), threading.Event()

    def slow(table: Any, batch_id: int) -> None:
        running.set()
        release.wait(20)

    query = (
        session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 1).load().write_stream
    )
    started = query.foreach_batch(slow).start()
    try:
        assert running.wait(20)
        with pytest.raises(QueryStopTimeoutError) as caught:
            started.stop(timeout=0.1)
    finally:
        release.set()
        started.stop()
    back = pickle.loads(pickle.dumps(caught.value))
    assert type(back) is QueryStopTimeoutError and isinstance(back, TimeoutError)
    assert (back.query_id, back.run_id, str(back)) == (
        started.id,
        started.run_id,
        str(caught.value),
    )

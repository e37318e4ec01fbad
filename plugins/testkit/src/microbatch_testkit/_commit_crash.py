"""Killing a sink's ``commit`` with SIGKILL at a chosen line of its own code.

``commit_in_child`` forks the test process; the child builds a stream writer, then runs its
``commit`` under a trace function that counts the *line* events of frames whose module belongs
to one of the named top-level packages (the sink's own code and the microbatch core, not the
standard library or pyarrow) and kills itself with SIGKILL when the count reaches ``kill_at``.
The author places no crash point: every line of the sink's commit is a place to die.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass
from types import FrameType
from typing import Any

__all__ = [
    "ALL_UP_TO",
    "DEFAULT_KILLS",
    "ENV_KILLS",
    "TAIL",
    "ChildCommit",
    "commit_in_child",
    "kill_points",
]

ENV_KILLS = "MICROBATCH_TESTKIT_COMMIT_KILLS"
"""How many kill points the crash-inside-commit check tries: a number, or ``all`` for every
line the commit runs (the soak setting). See :func:`kill_points` for the default."""
ALL_UP_TO = 48
DEFAULT_KILLS = 24
TAIL = 8

_TIMEOUT = 30.0


@dataclass(frozen=True)
class ChildCommit:
    """How one commit in a child process ended."""

    killed: bool
    """True when the child was killed at the kill point."""
    events: int
    """Line events counted: the kill point when killed, all of the commit's otherwise."""
    where: str = ""
    """``file:line (function)`` of the line the child was killed before."""
    error: str = ""
    """The traceback, when the commit (or building the writer) raised."""


def kill_points(events: int) -> list[int]:
    """The kill points to try for a commit that runs ``events`` line events.

    Every one when there are at most :data:`ALL_UP_TO`; else :data:`DEFAULT_KILLS` spread evenly
    from the first line to the last, plus the last :data:`TAIL` (where a sink typically records
    the batch as applied). ``MICROBATCH_TESTKIT_COMMIT_KILLS`` overrides: ``all`` (the soak
    setting) or a number of evenly spread points.
    """
    if events <= 0:
        return []
    raw = os.environ.get(ENV_KILLS, "").strip().lower()
    if raw == "all":
        return list(range(1, events + 1))
    try:
        wanted = int(raw) if raw else None
    except ValueError:
        raise ValueError(f"{ENV_KILLS}={raw!r} is neither a number nor 'all'") from None
    if wanted is None and events <= ALL_UP_TO:
        return list(range(1, events + 1))
    count = DEFAULT_KILLS if wanted is None else wanted
    if count >= events:
        return list(range(1, events + 1))
    points = {1 + round(index * (events - 1) / max(count - 1, 1)) for index in range(count)}
    if wanted is None:
        points.update(range(max(1, events - TAIL + 1), events + 1))
    return sorted(points)


def _tracer(
    packages: Collection[str], kill_at: int | None, report: Callable[[str], None]
) -> tuple[Any, list[int]]:
    count = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
            if kill_at is not None and count[0] >= kill_at:
                code = frame.f_code
                report(f"killed {code.co_filename}:{frame.f_lineno} ({code.co_name})")
                os.kill(os.getpid(), signal.SIGKILL)
        return local

    def global_trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        module = str(frame.f_globals.get("__name__", ""))
        return local if module.partition(".")[0] in packages else None

    return global_trace, count


def commit_in_child(
    prepare: Callable[[], Callable[[], object]],
    packages: Collection[str],
    kill_at: int | None,
) -> ChildCommit:
    """Fork; in the child call ``prepare()`` (untraced; it builds the writer and returns the
    commit to run), then run the commit under the line counter, killed at ``kill_at`` (never
    when ``None``). Returns how the child ended."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns about fork() in a process with threads; the child only builds a
        # writer and commits, and is killed or ends within the timeout
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)

            def report(text: str) -> None:
                os.write(write_end, text.encode(errors="replace"))

            run = prepare()
            trace, count = _tracer(packages, kill_at, report)
            threading.settrace(trace)
            sys.settrace(trace)
            try:
                run()
            finally:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type, unused-ignore]
            report(f"done {count[0]}")
            code = 0
        except BaseException:
            with contextlib.suppress(BaseException):
                os.write(write_end, ("error " + traceback.format_exc()).encode(errors="replace"))
        finally:
            os._exit(code)
    os.close(write_end)
    output = _read_all(read_end, pid)
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        if text.startswith("killed "):
            return ChildCommit(killed=True, events=kill_at or 0, where=text[len("killed ") :])
        return ChildCommit(killed=False, events=0, error=f"the child was killed: {text}")
    if text.startswith("done "):
        return ChildCommit(killed=False, events=int(text.split()[1]))
    return ChildCommit(
        killed=False, events=0, error=text.removeprefix("error ") or f"exit status {status}"
    )


def _read_all(fd: int, pid: int) -> bytes:
    chunks: list[bytes] = []
    deadline = time.monotonic() + _TIMEOUT
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                chunks.append(b"error the commit did not end within %d s" % _TIMEOUT)
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)

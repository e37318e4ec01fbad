"""Kill a pipeline with SIGKILL at a chosen step of a chosen batch, then restart it.

The pipeline is a script run in a child process. Inside it, call :func:`arm` on the session
before starting the query; the test names the crash point through the environment variable
``MICROBATCH_CRASH_AT="<phase>:<batch_id>"`` (set by :func:`run_until_crash`)::

    # pipeline.py
    import microbatch as mb
    from microbatch_testkit import crash

    session = mb.Session()
    crash.arm(session)
    ...start the query, await it...

    # test_pipeline.py
    run = crash.run_until_crash("pipeline.py", "offsets_written", 1, args=[checkpoint])
    crash.run_to_completion("pipeline.py", args=[checkpoint])

Phases (see the ``microbatch_batch_phase`` hook): ``offsets_written`` (the offset log entry is
durable, the sink has seen nothing), ``mid_sink`` (after the first part of the batch was
written; or wherever the script calls ``crash_point("mid_sink", batch_id)``, see :func:`arm`),
``sink_write_done``, ``sink_committed`` (the sink committed, the commit log entry is not
written) and ``batch_committed``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import microbatch

__all__ = [
    "ENV_VAR",
    "PHASES",
    "CompletedRun",
    "CrashScenario",
    "FailAt",
    "arm",
    "await_available_now",
    "crash_point",
    "crash_target",
    "run_to_completion",
    "run_until_crash",
    "running_batch",
    "stop_after_batch",
]

ENV_VAR = "MICROBATCH_CRASH_AT"
PHASES = ("offsets_written", "mid_sink", "sink_write_done", "sink_committed", "batch_committed")
"""The crash points :func:`arm` understands."""

T = TypeVar("T")


def crash_target() -> tuple[str, int] | None:
    """The ``(phase, batch_id)`` named by ``MICROBATCH_CRASH_AT``, or None when it is unset."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    phase, _, batch = raw.rpartition(":")
    try:
        return phase, int(batch)
    except ValueError:
        raise ValueError(
            f"{ENV_VAR}={raw!r} is not '<phase>:<batch_id>' (for example 'offsets_written:1')"
        ) from None


def _die(phase: str, batch_id: int) -> None:
    sys.stderr.write(f"microbatch-testkit: killing process {os.getpid()} at {phase}:{batch_id}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str, batch_id: int) -> None:
    """Kill this process with SIGKILL when ``MICROBATCH_CRASH_AT`` names ``name:batch_id``.

    Call it from your own code, for example half-way through a ``foreach_batch`` function.
    """
    if crash_target() == (name, batch_id):
        _die(name, batch_id)


_running_batch = -1


def running_batch() -> int:
    """The id of the batch an armed session is running (-1 before its first): for a
    :func:`crash_point` placed inside a client library, which does not know the batch."""
    return _running_batch


class _CrashPlugin:
    """Hook implementation that kills the process at the targeted batch phase."""

    def __init__(self, target: tuple[str, int] | None, *, mid_sink_in_script: bool) -> None:
        self.target = target
        self.mid_sink_in_script = mid_sink_in_script

    @microbatch.hookimpl
    def microbatch_batch_phase(self, query_id: str, batch_id: int, phase: str) -> None:
        global _running_batch
        if phase == "offsets_written":
            _running_batch = batch_id
        if self.target is None:
            return
        wanted, wanted_batch = self.target
        if wanted_batch != batch_id:
            return
        if wanted == "mid_sink" and not self.mid_sink_in_script:
            wanted = "sink_write_done"
        if phase == wanted:
            _die(self.target[0], batch_id)


class FailAt:
    """A plugin (``mb.Session(plugins=[FailAt("sink_committed", 1)])``) that raises a
    ``RuntimeError`` ("simulated crash ...") at ``phase`` of batch ``batch_id``: the query
    fails in this process, killing nothing, for tests of what a failed batch leaves behind."""

    def __init__(self, phase: str, batch_id: int) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; use one of {PHASES}")
        self.phase = phase
        self.batch_id = batch_id

    @microbatch.hookimpl
    def microbatch_batch_phase(self, query_id: str, batch_id: int, phase: str) -> None:
        if batch_id == self.batch_id and phase == self.phase:
            raise RuntimeError(f"simulated crash at {phase} of batch {batch_id}")


def arm(session: Any, *, mid_sink_in_script: bool = False) -> object:
    """Register the crash hook with ``session``'s plugin manager; return the plugin object.

    Does nothing harmful when ``MICROBATCH_CRASH_AT`` is unset. With
    ``mid_sink_in_script=True`` the ``mid_sink`` phase is left to the script's own
    :func:`crash_point` call; otherwise it means "after the first part was written".
    """
    target = crash_target()
    if target is not None and target[0] not in PHASES:
        raise ValueError(f"{ENV_VAR} names unknown phase {target[0]!r}; use one of {PHASES}")
    registry = getattr(session, "registry", None)
    manager = getattr(registry, "plugin_manager", None)
    if manager is None:
        raise TypeError(f"arm() needs a microbatch Session, got {type(session).__name__}")
    plugin = _CrashPlugin(target, mid_sink_in_script=mid_sink_in_script)
    manager.register(plugin, name="microbatch-testkit-crash")
    return plugin


def await_available_now(query: Any, timeout: float = 60) -> None:
    """Wait for an available-now ``query`` to finish; exit the script with the reason when it
    failed or did not finish within ``timeout`` seconds (the end of a crash test's pipeline)."""
    query.await_termination(timeout)
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    if query.is_active:
        raise SystemExit(f"the available-now query did not finish in {timeout:g} s")


@dataclass(frozen=True)
class CompletedRun:
    """One finished run of a pipeline script."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    crash_at: str | None = None

    def describe(self) -> str:
        """The command, exit status and both output streams, for failure messages."""
        target = f" with {ENV_VAR}={self.crash_at}" if self.crash_at else ""
        return (
            f"command {' '.join(self.command)}{target} exited with {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}--- end ---"
        )


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _run(
    script: str | os.PathLike[str],
    args: Sequence[str],
    env: Mapping[str, str] | None,
    timeout: float,
    crash_at: str | None,
) -> CompletedRun:
    command = (sys.executable, os.fspath(script), *map(str, args))
    environment = {**os.environ, **(env or {})}
    environment.pop(ENV_VAR, None)
    if crash_at is not None:
        environment[ENV_VAR] = crash_at
    try:
        done = subprocess.run(
            command,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        run = CompletedRun(
            command, -1, _text(expired.stdout), _text(expired.stderr), crash_at=crash_at
        )
        raise AssertionError(f"timed out after {timeout} s; {run.describe()}") from None
    return CompletedRun(command, done.returncode, done.stdout, done.stderr, crash_at=crash_at)


def run_until_crash(
    script: str | os.PathLike[str],
    phase: str,
    batch_id: int,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CompletedRun:
    """Run ``script`` with the crash point ``phase:batch_id`` armed; assert it was SIGKILLed."""
    if phase not in PHASES:
        raise ValueError(f"unknown crash phase {phase!r}; use one of {PHASES}")
    run = _run(script, args, env, timeout, f"{phase}:{batch_id}")
    if run.returncode != -signal.SIGKILL:
        raise AssertionError(f"expected the pipeline to be killed by SIGKILL; {run.describe()}")
    return run


def run_to_completion(
    script: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CompletedRun:
    """Run ``script`` with no crash point; assert it exited with status 0."""
    run = _run(script, args, env, timeout, None)
    if run.returncode != 0:
        raise AssertionError(f"expected the pipeline to finish; {run.describe()}")
    return run


def stop_after_batch(query: Any, batch_id: int, *, timeout: float = 30) -> None:
    """In a pipeline script: let ``query`` run until batch ``batch_id`` has reported progress,
    then stop it.

    Ends the script with ``SystemExit`` (exit status 1 and the reason on stderr) when the query
    failed or did not reach the batch within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        progress = query.last_progress
        if progress is not None and progress["batchId"] >= batch_id:
            break
        if query.exception() is not None:
            break
        time.sleep(0.01)
    query.stop()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    if query.last_progress is None or query.last_progress["batchId"] < batch_id:
        raise SystemExit(f"batch {batch_id} was not reached in {timeout:g} s")


@dataclass
class CrashScenario(Generic[T]):
    """Kill a pipeline at a point, restart it to completion, and read what its sink holds.

    ``read_sink`` is called after the restart finished; :meth:`run` returns its result and
    keeps both runs in :attr:`runs`.
    """

    script: str | os.PathLike[str]
    read_sink: Callable[[], T]
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    timeout: float = 60
    runs: list[CompletedRun] = field(default_factory=list)

    def run(self, phase: str, batch_id: int) -> T:
        """Crash at ``phase`` of batch ``batch_id``, restart, and return ``read_sink()``."""
        self.runs.append(
            run_until_crash(
                self.script, phase, batch_id, args=self.args, env=self.env, timeout=self.timeout
            )
        )
        self.runs.append(
            run_to_completion(self.script, args=self.args, env=self.env, timeout=self.timeout)
        )
        return self.read_sink()

"""Child processes that never outlive the test run.

Each service process starts in a session of its own, so that stopping it signals its whole
process group (the PostgreSQL postmaster's backends, the JVM's children). Three layers make
sure none is left behind:

- the provider's ``stop()``, called by the session fixture's finalizer (also when tests fail);
- an ``atexit`` handler that kills every group still registered when the interpreter exits;
- ``setpriv --pdeathsig``, where available, so the kernel signals the child when the Python
  process dies without running ``atexit`` (``SIGKILL``, a crash).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ServiceProcess", "free_port", "log_tail", "run_checked", "wait_until"]

_live: set[ServiceProcess] = set()
_live_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or a note that it does not exist."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    interval: float = 0.1,
) -> bool:
    """Poll ``ready`` until it returns true (True), or ``alive`` turns false or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        if not alive():
            return False
        time.sleep(interval)
    return ready()


def _privilege_prefix(user: str | None, death_signal: str | None) -> list[str]:
    """``setpriv`` arguments that switch to ``user`` and set the parent-death signal."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    options = []
    if user is not None:
        entry = pwd.getpwnam(user)
        options += [f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    # The kernel sends the signal when the *thread* that forked the child exits; only the main
    # thread lives as long as the process.
    if death_signal is not None and threading.current_thread() is threading.main_thread():
        options.append(f"--pdeathsig={death_signal}")
    return [setpriv, *options, "--"] if options else []


def _switch_ids(user: str | None) -> tuple[int | None, int | None, list[int] | None]:
    """``(user, group, extra_groups)`` for ``subprocess`` when ``setpriv`` cannot switch."""
    if user is None or shutil.which("setpriv") is not None:
        return None, None, None
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid, []


@contextlib.contextmanager
def _logged(
    argv: Sequence[str],
    *,
    log: Path,
    user: str | None,
    death_signal: str | None,
    env: dict[str, str] | None,
) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Open ``log`` for appending with the command line noted in it; give the full command (with
    its ``setpriv`` prefix) and the ``subprocess`` arguments every child shares: no stdin, output
    into the log, ``env``, and the ids of ``user`` when ``setpriv`` cannot switch to it."""
    command = [*_privilege_prefix(user, death_signal), *argv]
    uid, gid, groups = _switch_ids(user)
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        yield (
            command,
            {
                "stdin": subprocess.DEVNULL,
                "stdout": out,
                "stderr": subprocess.STDOUT,
                "env": env,
                "user": uid,
                "group": gid,
                "extra_groups": groups,
            },
        )


def run_checked(
    argv: Sequence[str],
    *,
    what: str,
    log: Path,
    user: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> None:
    """Run a short command to completion (as ``user`` if given), output appended to ``log``.

    The command dies with this process, like the services.

    Raises ``RuntimeError`` naming ``what`` with the end of the log when it fails.
    """
    with _logged(argv, log=log, user=user, death_signal="KILL", env=env) as (command, launch):
        try:
            completed = subprocess.run(command, timeout=timeout, **launch)
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"{what} did not finish within {timeout:.0f} s; its output:\n{log_tail(log)}"
            ) from None
    if completed.returncode != 0:
        raise RuntimeError(
            f"{what} failed with exit code {completed.returncode}; its output:\n{log_tail(log)}"
        )


class ServiceProcess:
    """A long-running service process in its own process group.

    ``death_signal`` (a signal name such as ``"KILL"``) is what the kernel sends the process if
    this Python process dies first; ``stop_signal`` is what :meth:`stop` sends the group first.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        log: Path,
        user: str | None = None,
        env: dict[str, str] | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
        death_signal: str = "KILL",
    ) -> None:
        self.name = name
        self.log = log
        self.stop_signal = stop_signal
        with _logged(argv, log=log, user=user, death_signal=death_signal, env=env) as (
            command,
            launch,
        ):
            self._popen = subprocess.Popen(command, start_new_session=True, **launch)
        with _live_lock:
            _live.add(self)

    @property
    def pid(self) -> int:
        """The process id, which is also its process group id."""
        return self._popen.pid

    def alive(self) -> bool:
        """True while the process has not exited."""
        return self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process ended, else None."""
        return self._popen.poll()

    def kill_unready(self, timeout: float) -> str:
        """Kill a process that did not become ready within ``timeout`` seconds and say why,
        for an error message: ``exited with code N`` or ``not ready in {timeout}s``."""
        code = self.returncode
        self.stop(graceful=False)
        return f"exited with code {code}" if code is not None else f"not ready in {timeout}s"

    def stop(self, *, timeout: float = 20.0, graceful: bool = True) -> None:
        """Signal the process group, wait up to ``timeout`` seconds, then kill what remains.

        ``graceful=False`` kills with ``SIGKILL`` at once, like a power cut. Safe to call twice.
        """
        try:
            first = self.stop_signal if graceful else signal.SIGKILL
            self._signal_group(first)
            try:
                self._popen.wait(timeout=timeout if graceful else 10)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._popen.wait(timeout=10)
            # Children that outlived their leader (a backend still exiting) get no grace.
            self._signal_group(signal.SIGKILL)
        finally:
            with _live_lock:
                _live.discard(self)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)


@atexit.register
def _kill_everything_left() -> None:
    with _live_lock:
        left = list(_live)
    for process in left:
        with contextlib.suppress(Exception):
            process.stop(timeout=5)

"""The docker provider's own reaper: containers never outlive the process that started them.

Every container the provider starts carries the label ``org.microbatch.testkit.owner=<token>``,
one token per Python process. Before its first container, a process starts a small watcher
(this file, run as a script) in a session of its own, whose standard input is a pipe from the
process. Once it has imported what it needs it writes one byte to its standard output, which
the owner waits for (a watcher that cannot come up is an error before any container exists).
It then blocks until that pipe closes, which happens however its owner ends (``close()``,
exit, an exception, ``SIGKILL``), removes every container with the owner's label (forced,
with their volumes, retrying for up to 30 s while the daemon does not answer) and exits. The
one case it does not cover is the watcher itself being killed: the owner notices at its next
container or at its end and then removes its containers itself, but if both are killed the
containers stay. When the owner has closed all its containers it closes the pipe itself and
reaps the watcher, so no process is left behind; the next container starts a new one.

Run as a script, it needs only the standard library and the ``docker`` package (it must start
quickly and print nothing but its ready byte).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import IO, Any

__all__ = ["OWNER_LABEL", "owner_labels", "owner_token", "reap", "release", "track", "watcher"]

OWNER_LABEL = "org.microbatch.testkit.owner"
"""The label naming the process that owns a container (its value is :func:`owner_token`)."""

READY = b"R"
"""The byte the watcher writes to its standard output once it can reap."""
DONE = b"D"
"""What the owner writes before closing the pipe when it removed all its containers itself."""
READY_TIMEOUT = 15.0
"""How long :func:`track` waits for it (seconds)."""
REAP_PATIENCE = 30.0
"""How long :func:`reap` keeps trying while the daemon does not answer (seconds)."""

_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_token = uuid.uuid4().hex
_watcher: subprocess.Popen[bytes] | None = None
_tracked = 0


def owner_token() -> str:
    """This process's token (a forked child gets a new one)."""
    return _token


def owner_labels() -> dict[str, str]:
    """The labels every container of this process carries."""
    return {OWNER_LABEL: _token}


def watcher() -> subprocess.Popen[bytes] | None:
    """The running watcher process of this process, None when there is none."""
    return _watcher


def track() -> None:
    """Count one more container of this process; start the watcher if none runs.

    Call it before creating the container, so that a crash right after the creation is
    covered too. Raises ``RuntimeError`` (with the watcher's exit code) when the watcher does
    not come up within a few seconds: no container is then created unguarded.
    """
    global _watcher, _tracked
    with _lock:
        if _watcher is None or _watcher.poll() is not None:
            if _watcher is not None and _tracked:
                _logger.warning(
                    "the testkit's container watcher ended early (exit code %s); starting "
                    "a new one",
                    _watcher.returncode,
                )
            _watcher = _start_watcher()
        _tracked += 1


def _start_watcher(deadline: float = READY_TIMEOUT) -> subprocess.Popen[bytes]:
    """Start the watcher and wait for its ready byte (sent once it has imported what it needs)."""
    process = subprocess.Popen(
        [sys.executable, "-P", os.path.abspath(__file__), _token, str(REAP_PATIENCE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a kill of the owner's group spares it
        close_fds=True,
    )
    assert process.stdout is not None
    ready = b""
    try:
        readable, _, _ = select.select([process.stdout], [], [], deadline)
        if readable:
            ready = os.read(process.stdout.fileno(), 1)
    finally:
        process.stdout.close()
    if ready == READY:
        return process
    if process.poll() is None:
        process.kill()
    code = process.wait()
    raise RuntimeError(
        "the testkit's container watcher did not come up "
        + (f"within {deadline:.0f} s" if code == -signal.SIGKILL else f"(exit code {code})")
        + f": it runs {sys.executable} with the 'docker' package, which it imports; no "
        "container was started"
    )


def release() -> None:
    """Count one container less (it was removed); with none left, end the watcher."""
    global _tracked
    with _lock:
        _tracked = max(0, _tracked - 1)
        if _tracked == 0 and _end_watcher(done=True):
            _reap_here()  # the watcher is gone: whatever is left, removed here


def _end_watcher(*, done: bool = False) -> bool:
    """Close the pipe (the watcher then removes what is left) and reap it; ``done``: every
    container was removed by its owner, so the watcher is told it has nothing to reap.

    Returns True when the watcher had ended before its pipe closed (it then removed nothing:
    the caller reaps in this process); logs a warning when it exited non-zero.
    """
    global _watcher
    process, _watcher = _watcher, None
    if process is None:
        return False
    early = process.poll() is not None
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            if done and not early:
                process.stdin.write(DONE)
            process.stdin.close()
    try:
        process.wait(timeout=REAP_PATIENCE + 30)  # it may be retrying against a silent daemon
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.returncode != 0:
        _logger.warning(
            "the testkit's container watcher exited with code %s%s",
            process.returncode,
            " before its owner ended: its containers are removed by the owner" if early else "",
        )
    return early


def _at_exit() -> None:
    with _lock:
        if _end_watcher() and _tracked:
            _reap_here()


def _reap_here() -> None:
    """Reap this process's containers in this process (the watcher is gone); log a failure."""
    try:
        reap(_token)
    except Exception as exc:
        _logger.warning(
            "could not remove the containers labelled %s=%s: %s", OWNER_LABEL, _token, exc
        )


def _before_fork() -> None:
    """No fork while :func:`track` or :func:`release` is half done (a pipe made, the watcher
    not yet recorded): the lock is held across the fork."""
    _lock.acquire()


def _after_fork_in_parent() -> None:
    _lock.release()


def _after_fork_in_child() -> None:
    """A forked child owns nothing yet: a token of its own, and the parent's pipe let go (so
    that the parent's watcher still sees its owner end)."""
    global _token, _watcher, _tracked, _lock
    _lock = threading.Lock()
    _token, _tracked = uuid.uuid4().hex, 0
    process, _watcher = _watcher, None
    if process is not None:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # this child's copy of the pipe only
        process.returncode = 0  # not this child's child: never wait for it


atexit.register(_at_exit)
os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


# -- the watcher ------------------------------------------------------------------------------


def reap(token: str, *, client: Any = None, patience: float = REAP_PATIENCE) -> list[str]:
    """Remove every container labelled with ``token`` (forced, with volumes); their ids.

    Keeps trying for ``patience`` seconds while the daemon does not answer (a
    ``DockerException`` or a connection error from ``requests``); containers already gone
    are fine.
    """
    import docker
    import requests
    from docker.errors import DockerException, NotFound

    removed: list[str] = []
    own = client is None
    deadline = time.monotonic() + patience
    attempt = 0
    while True:
        try:
            if client is None:
                client = docker.from_env(timeout=60)
            for container in client.containers.list(
                all=True, filters={"label": f"{OWNER_LABEL}={token}"}
            ):
                with contextlib.suppress(NotFound):
                    container.remove(force=True, v=True)
                removed.append(container.id)
            break
        except (DockerException, requests.exceptions.RequestException):
            attempt += 1
            pause = min(0.5 * attempt, 3.0)
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
    if own and client is not None:
        client.close()
    return removed


def _wait_for_eof(stream: IO[bytes]) -> bytes:
    """Block until ``stream`` closes; the last byte read (``b""`` for none)."""
    last = b""
    while True:
        try:
            data = stream.read1(65536)  # type: ignore[attr-defined]
        except InterruptedError:
            continue
        except OSError:
            return last
        if not data:
            return last
        last = data[-1:]


def main(argv: list[str]) -> int:
    """``_docker_reaper.py TOKEN [PATIENCE]``: say ready, wait until standard input closes,
    then reap ``TOKEN`` (unless the owner's last byte said there is nothing left), trying for
    up to ``PATIENCE`` seconds."""
    if len(argv) not in (1, 2):
        return 2
    patience = float(argv[1]) if len(argv) == 2 else REAP_PATIENCE
    import docker  # noqa: F401  # before the ready byte: a missing package shows at once
    import requests  # noqa: F401

    os.write(sys.stdout.fileno(), READY)
    if _wait_for_eof(sys.stdin.buffer) == DONE:
        return 0  # the owner removed its containers itself
    try:
        reap(argv[0], patience=patience)
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

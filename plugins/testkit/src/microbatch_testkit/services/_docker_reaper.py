"""The docker provider's own reaper: containers never outlive the process that started them.

Every container the provider starts carries the label ``org.microbatch.testkit.owner=<token>``,
one token per Python process. Before its first container, a process starts a small watcher
(this file, run as a script) in a session of its own, whose standard input is a pipe from the
process. The watcher blocks until that pipe closes, which happens however its owner ends
(``close()``, exit, an exception, ``SIGKILL``), then removes every container with the owner's
label (forced, with their volumes) and exits. When the owner has closed all its containers it
closes the pipe itself and reaps the watcher, so no process is left behind; the next container
starts a new one.

Run as a script, it needs only the standard library and the ``docker`` package (it must start
quickly and print nothing).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import IO, Any

__all__ = ["OWNER_LABEL", "owner_labels", "owner_token", "reap", "release", "track", "watcher"]

OWNER_LABEL = "org.microbatch.testkit.owner"
"""The label naming the process that owns a container (its value is :func:`owner_token`)."""

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
    covered too.
    """
    global _watcher, _tracked
    with _lock:
        _tracked += 1
        if _watcher is None or _watcher.poll() is not None:
            _watcher = subprocess.Popen(
                [sys.executable, "-P", os.path.abspath(__file__), _token],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C or a kill of the owner's group spares it
                close_fds=True,
            )


def release() -> None:
    """Count one container less (it was removed); with none left, end the watcher."""
    global _tracked
    with _lock:
        _tracked = max(0, _tracked - 1)
        if _tracked == 0:
            _end_watcher()


def _end_watcher(timeout: float = 30.0) -> None:
    """Close the pipe (the watcher then removes what is left, nothing normally) and reap it."""
    global _watcher
    process, _watcher = _watcher, None
    if process is None:
        return
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _at_exit() -> None:
    with _lock:
        _end_watcher()


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
os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the watcher ------------------------------------------------------------------------------


def reap(token: str, *, client: Any = None, attempts: int = 3) -> list[str]:
    """Remove every container labelled with ``token`` (forced, with volumes); their ids.

    Retries a few times when the daemon does not answer; containers already gone are fine.
    """
    import docker
    from docker.errors import DockerException, NotFound

    removed: list[str] = []
    own = client is None
    for attempt in range(attempts):
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
        except DockerException:
            if attempt + 1 == attempts:
                break
            time.sleep(0.5 * (attempt + 1))
    if own and client is not None:
        client.close()
    return removed


def _wait_for_eof(stream: IO[bytes]) -> None:
    while True:
        try:
            if not stream.read(65536):
                return
        except InterruptedError:
            continue
        except OSError:
            return


def main(argv: list[str]) -> int:
    """``_docker_reaper.py TOKEN``: wait until standard input closes, then reap ``TOKEN``."""
    if len(argv) != 1:
        return 2
    _wait_for_eof(sys.stdin.buffer)
    try:
        reap(argv[0])
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

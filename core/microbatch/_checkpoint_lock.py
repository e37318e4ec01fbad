"""The checkpoint's lock file: one run at a time, and an atomic takeover of a stale lock.

A run takes the lock by creating ``<checkpoint>/lock`` exclusively. A lock left by a process
that no longer runs on this host is *stale* and may be taken over. Replacing it is not atomic
by itself: two processes that both see the same stale lock could each replace it, the second
one overwriting the first one's fresh lock. So a takeover first creates, exclusively, a marker
named after the stale lock's content::

    <checkpoint>/.lock.takeover-<hash of the stale lock>-<generation>

Only the process that created the marker may replace that lock, and only while the lock still
holds the content the marker is named after. A process killed while it held a marker leaves
the marker behind; the next process sees that the marker's owner is dead and creates the next
generation, again exclusively, so exactly one process wins each round.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Callable
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from .state import StateStore

__all__ = ["acquire_lock", "lock_holder", "parse_lock", "young_lock_temporary"]

LOCK = "lock"
_AGAIN = "look at the lock again"
_MARKER = re.compile(r"\.lock\.takeover-([0-9a-f]{16})-([0-9]+)")
_SET_ASIDE = re.compile(r"\.lock\.stale-[0-9a-f]{32}")
"""A stale lock moved aside by earlier versions, left behind when that process was killed."""


def parse_lock(raw: bytes | None) -> dict[str, Any] | None:
    """The lock record in ``raw``, or ``None`` when there is none or it is not a record."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def lock_holder(record: dict[str, Any] | None) -> str | None:
    """Who owns a lock (or takeover marker) record, or ``None`` when its owner is gone.

    A record of another host is always taken as live (its process cannot be checked from
    here). A record of this very process is not: the caller keeps track of what this process
    holds itself.
    """
    if record is None:
        return None  # a torn lock cannot belong to a live run: locks are written whole
    host, pid = record.get("host"), record.get("pid")
    if host != socket.gethostname():
        return f"a query on host {host} (pid {pid}, run {record.get('runId')})"
    if pid == os.getpid():
        return None
    if isinstance(pid, int) and not isinstance(pid, bool) and _process_alive(pid):
        return f"process {pid} (run {record.get('runId')}, started {record.get('startedAt')})"
    return None


def acquire_lock(root: StateStore, record: dict[str, Any]) -> str | None:
    """Take the lock of the checkpoint folder ``root`` for ``record``.

    Returns ``None`` when the lock is now ``record``'s, else a description of who holds it.
    """
    for _ in range(3):
        if root.create(LOCK, record):
            _sweep_markers(root)
            return None
        raw = root.read_bytes(LOCK)
        if raw is None:
            continue  # released between our attempt and the read: try again
        holder = lock_holder(parse_lock(raw))
        if holder is not None:
            return holder
        outcome = _take_over(root, raw, record)
        if outcome is not _AGAIN:
            return outcome
    return "another process starting now"


def _take_over(root: StateStore, stale: bytes, record: dict[str, Any]) -> str | None:
    """Replace the stale lock whose content is ``stale``, if this process wins the marker.

    ``None`` when the lock is now ``record``'s, who holds it otherwise, or :data:`_AGAIN`
    when the lock changed meanwhile into another stale one (look again)."""
    key = hashlib.sha256(stale).hexdigest()[:16]
    generations = _markers(root).get(key, {})
    newest = max(generations, default=0)
    if newest:
        owner = lock_holder(parse_lock(root.read_bytes(generations[newest])))
        if owner is not None:
            return f"{owner}, which is taking over a stale lock"
    marker = f".lock.takeover-{key}-{newest + 1}"
    if not root.create(marker, record):
        return "another process taking over the stale lock at the same moment"
    current = root.read_bytes(LOCK)
    if current != stale:
        root.delete(marker)
        if current is None and root.create(LOCK, record):
            _sweep_markers(root)
            return None
        return lock_holder(parse_lock(current)) or _AGAIN
    root.write(LOCK, record)
    _sweep_markers(root)
    return None


def _markers(root: StateStore) -> dict[str, dict[int, str]]:
    """The takeover markers in ``root``: stale-lock key -> generation -> file name."""
    found: dict[str, dict[int, str]] = {}
    for name in root.names(hidden=True):
        match = _MARKER.fullmatch(name)
        if match:
            found.setdefault(match.group(1), {})[int(match.group(2))] = name
    return found


def _sweep_markers(root: StateStore) -> None:
    """Remove takeover markers once the lock is ours: none of them can win any more, since
    each is named after a lock content that is gone."""
    for name in root.names(hidden=True):
        if _MARKER.fullmatch(name) or _SET_ASIDE.fullmatch(name):
            with contextlib.suppress(OSError):
                root.delete(name)


_LOCK_TEMPORARY_AGE = 600.0
"""Seconds after which a temporary file of a lock attempt is surely abandoned (an attempt
writes it and links it into place within milliseconds)."""


def young_lock_temporary(root: StateStore) -> Callable[[str], bool]:
    """Whether a temporary file of ``root`` belongs to a lock or takeover-marker write that
    another process may still be making (local files: younger than
    :data:`_LOCK_TEMPORARY_AGE`; elsewhere always, as their age cannot be read the same way)."""

    def keep(name: str) -> bool:
        if not name.startswith((".lock.", "..lock.")):
            return False
        if not isinstance(root.fs, LocalFileSystem):
            return True
        try:
            age = time.time() - os.path.getmtime(root.location(name))
        except OSError:
            return True
        return age < _LOCK_TEMPORARY_AGE

    return keep


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""Settling of files no event explains (filesystems without notifications): the rules of
:class:`~microbatch_file._pickup.Pickup` on a real local folder, with real file times."""

from __future__ import annotations

import os
import time
from pathlib import Path

from microbatch_file._discovery import Discovery
from microbatch_file._listing import Layout, Listing
from microbatch_file._location import SourceLocation
from microbatch_file._pickup import Pickup


def lines(first: int, count: int) -> str:
    return "".join(f'{{"id": {i}}}\n' for i in range(first, first + count))


def _unwatched_pickup(folder: Path, settle: float) -> tuple[Pickup, Listing]:
    """The rules of a filesystem without notifications, on a real local folder."""
    listing = Listing(Layout(SourceLocation.resolve(str(folder)), in_progress_suffixes=()))
    return Pickup(
        listing.location, Discovery(listing), settle=settle, min_age=0.0, streaming=True
    ), listing


def test_without_notifications_a_file_is_taken_once_it_settled(folder: Path) -> None:
    pickup, listing = _unwatched_pickup(folder, settle=2.0)  # margins of about 1 s
    old = folder / "old.json"
    old.write_text(lines(0, 1))
    os.utime(old, (time.time() - 10, time.time() - 10))
    fresh = folder / "fresh.json"
    fresh.write_text(lines(1, 1))
    future = folder / "future.json"  # a clock ahead of ours: judged by what is seen
    future.write_text(lines(2, 1))
    os.utime(future, (time.time() + 3600, time.time() + 3600))

    def due(path: Path) -> float | None:
        entry = listing.entry_for(str(path))
        assert entry is not None
        return pickup.due(entry)

    assert due(old) is None
    assert due(fresh) is not None and due(future) is not None
    time.sleep(1.0)
    with fresh.open("a") as handle:  # still written: settling starts again
        handle.write(lines(3, 1))
    assert due(fresh) is not None and due(future) is not None
    time.sleep(1.2)
    assert due(fresh) is not None  # changed 1.2 s ago
    assert due(future) is None  # seen unchanged for 2.2 s
    time.sleep(1.0)
    assert due(fresh) is None


def test_batch_reads_and_object_stores_do_not_settle(folder: Path) -> None:
    (folder / "a.json").write_text(lines(0, 1))
    listing = Listing(Layout(SourceLocation.resolve(str(folder)), in_progress_suffixes=()))
    batch = Pickup(listing.location, Discovery(listing), settle=5, min_age=0, streaming=False)
    entry = listing.entry_for(str(folder / "a.json"))
    assert entry is not None and batch.due(entry) is None
    memory = SourceLocation.resolve("memory://settle-test")
    assert Pickup(memory, Discovery(listing), settle=5, min_age=0, streaming=True).settle == 0

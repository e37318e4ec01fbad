"""Real processes race to take over the same stale checkpoint lock: exactly one may win.

Each trial prepares a checkpoint whose lock names a dead process of this host; three worker
processes wait at a barrier, then all call ``Checkpoint.acquire`` at once. The workers live
through all the trials, so a winner is still alive (its lock not stale) while the other one
decides. ``MICROBATCH_LOCK_RACE_TRIALS`` sets the number of trials (default 150).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from microbatch._checkpoint import Checkpoint

TRIALS = int(os.environ.get("MICROBATCH_LOCK_RACE_TRIALS", "150"))
RACERS = ("a", "b", "c")


def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    process = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(process.stdout)


def stale_lock(folder: Path, pid: int, run_id: str) -> None:
    folder.mkdir(parents=True)
    (folder / "lock").write_text(
        json.dumps({"runId": run_id, "pid": pid, "host": socket.gethostname(), "startedAt": "-"})
    )


def _racer(name: str, folders: list[str], start: Any, done: Any, results: Any) -> None:
    for index, folder in enumerate(folders):
        start.wait(timeout=30)
        try:
            Checkpoint(folder).acquire(f"{name}-{index}")
        except Exception as error:
            results.put((index, name, False, type(error).__name__))
        else:
            results.put((index, name, True, ""))
        done.wait(timeout=30)


def race(folders: list[Path]) -> dict[int, list[tuple[str, bool, str]]]:
    context = multiprocessing.get_context("spawn")
    start, done = context.Barrier(len(RACERS)), context.Barrier(len(RACERS))
    results = context.Queue()
    paths = [str(folder) for folder in folders]
    workers = [
        context.Process(target=_racer, args=(name, paths, start, done, results)) for name in RACERS
    ]
    for worker in workers:
        worker.start()
    outcome: dict[int, list[tuple[str, bool, str]]] = {}
    for _ in range(len(RACERS) * len(folders)):
        index, name, won, error = results.get(timeout=60)
        outcome.setdefault(index, []).append((name, won, error))
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return outcome


def test_exactly_one_of_racing_processes_takes_over_a_stale_lock(tmp_path: Path) -> None:
    pid = dead_pid()
    folders = [tmp_path / f"cp{index}" for index in range(TRIALS)]
    for index, folder in enumerate(folders):
        stale_lock(folder, pid, f"dead-{index}")
    outcome = race(folders)
    double = [index for index, attempts in outcome.items() if sum(w for _, w, _ in attempts) > 1]
    none = [index for index, attempts in outcome.items() if not any(w for _, w, _ in attempts)]
    print(f"{TRIALS} trials: {len(double)} with several owners, {len(none)} with no owner")
    assert double == [], f"several owners in {len(double)} of {TRIALS} trials"
    assert none == [], f"no owner in {len(none)} of {TRIALS} trials"
    losers = {error for attempts in outcome.values() for _, won, error in attempts if not won}
    assert losers <= {"CheckpointInUseError"}
    for index, folder in enumerate(folders):
        winner = next(name for name, won, _ in outcome[index] if won)
        assert json.loads((folder / "lock").read_text())["runId"] == f"{winner}-{index}"
        leftovers = [p.name for p in folder.iterdir() if p.name != "lock"]
        assert leftovers == []  # takeover markers are gone once the lock is taken


def test_a_takeover_marker_left_by_a_killed_process_does_not_block_the_lock(
    tmp_path: Path,
) -> None:
    """A process killed in the middle of a takeover leaves its marker: the next start still
    takes the stale lock over (the marker's owner is dead too)."""
    pid = dead_pid()
    folder = tmp_path / "cp"
    stale_lock(folder, pid, "dead")
    key = hashlib.sha256((folder / "lock").read_bytes()).hexdigest()[:16]
    marker = {"runId": "killed", "pid": pid, "host": socket.gethostname(), "startedAt": "-"}
    (folder / f".lock.takeover-{key}-1").write_text(json.dumps(marker))
    checkpoint = Checkpoint(str(folder))
    checkpoint.acquire("next")
    assert json.loads((folder / "lock").read_text())["runId"] == "next"
    assert sorted(p.name for p in folder.iterdir()) == ["lock"]
    checkpoint.release()

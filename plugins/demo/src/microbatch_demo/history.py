"""A Delta table's history, as the demo shows it: one row per commit, with the batch it holds.

Each commit of the ``delta`` sink carries an application transaction (``txn``: app id = the
query id, version = the batch id) in the same log entry as its data files; that is how a
restarted query knows which batches the table already holds. :func:`read_history` reads the
table's log entries (``_delta_log/<version>.json``) and pairs each commit with its ``txn``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Commit", "read_history"]


@dataclass(frozen=True)
class Commit:
    """One version of the table."""

    version: int
    timestamp_ms: int
    operation: str
    files_added: int
    rows_added: int
    transactions: tuple[tuple[str, int], ...]
    """The ``(appId, version)`` pairs of the commit's ``txn`` actions."""

    def batch_of(self, app_id: str) -> int | None:
        """The batch id that query ``app_id`` committed in this version, or None."""
        return next((version for app, version in self.transactions if app == app_id), None)


def read_history(table: str | Path) -> list[Commit]:
    """Every commit of the local Delta table at ``table``, oldest first."""
    log = Path(table) / "_delta_log"
    commits = []
    for entry in sorted(log.glob("[0-9]*.json")):
        info: dict = {}
        transactions = []
        files = rows = 0
        for line in entry.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                info = action["commitInfo"]
            elif "txn" in action:
                transactions.append((action["txn"]["appId"], int(action["txn"]["version"])))
            elif "add" in action:
                files += 1
                stats = action["add"].get("stats")
                rows += int(json.loads(stats).get("numRecords", 0)) if stats else 0
        commits.append(
            Commit(
                version=int(entry.stem),
                timestamp_ms=int(info.get("timestamp", 0)),
                operation=str(info.get("operation", "?")),
                files_added=files,
                rows_added=rows,
                transactions=tuple(transactions),
            )
        )
    return commits

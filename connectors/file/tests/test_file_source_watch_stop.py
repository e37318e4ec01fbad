"""Stopping the folder watcher while files keep changing logs no error."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from microbatch_file._watch import FolderWatcher


def test_stopping_the_watcher_during_changes_logs_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    done = threading.Event()

    def churn() -> None:
        index = 0
        while not done.is_set():
            path = tmp_path / f"f-{index % 50}.json"
            path.write_text("{}\n")
            os.replace(path, tmp_path / f"g-{index % 50}.json")
            index += 1

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        for _ in range(60):
            watcher = FolderWatcher(str(tmp_path), recursive=False, on_change=lambda: None)
            assert watcher.start()
            watcher.stop()
    finally:
        done.set()
        writer.join()
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == [], [record.getMessage() for record in errors]

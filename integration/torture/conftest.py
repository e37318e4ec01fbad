"""The torture run is a script (``run_torture.py``), not a test: pytest collects nothing here."""

from __future__ import annotations

collect_ignore_glob = ["*.py"]

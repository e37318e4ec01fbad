"""Makes :mod:`file_connector_helpers` importable by the tests of this folder (the suite runs with
``--import-mode=importlib``, which puts no test folder on ``sys.path``)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)

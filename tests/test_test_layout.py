"""The test suite runs as one pytest session (``--import-mode=importlib``): helper modules that
test files import by bare name share one ``sys.modules``, so their names must be unique."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_test_helper_modules_have_names_unique_across_the_repository() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for folder in ("connectors", "plugins", "integration", "tests"):
        for path in (ROOT / folder).rglob("_*.py"):
            if "tests" in path.parts and path.name != "__init__.py" and "src" not in path.parts:
                found[path.stem].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in found.items() if len(paths) > 1}
    assert not clashes, f"test helper modules with the same name (rename one): {clashes}"

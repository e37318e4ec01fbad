"""The connector template installs as a distribution and its connectors are discovered."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1] / "plugins" / "template"


def _can_build_offline() -> bool:
    """True when this environment has what setuptools needs to build without isolation."""
    try:
        from importlib.metadata import version

        major, minor = (int(part) for part in version("setuptools").split(".")[:2])
    except Exception:
        return False
    if (major, minor) >= (70, 1):  # bdist_wheel ships with setuptools from 70.1 on
        return True
    return major >= 64 and importlib.util.find_spec("wheel") is not None


def test_template_installs_and_registers_its_connectors() -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(TEMPLATE)]
    if _can_build_offline():
        command.insert(-2, "--no-build-isolation")
    installed = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    check = textwrap.dedent(
        """
        from microbatch._registry import ConnectorRegistry

        registry = ConnectorRegistry()
        registry.load_entry_points()
        source = registry.find("source", "example-counter")
        sink = registry.find("sink", "example-jsonl")
        print(source.distribution, source.version, source.cls.__name__)
        print(sink.distribution, sink.version, sink.cls.__name__)
        """
    )
    found = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert found.stdout.splitlines() == [
        "microbatch-example 0.1.0 CounterSource",
        "microbatch-example 0.1.0 JsonLinesSink",
    ], found.stdout + found.stderr

"""The local providers leave no process behind: not after a failing test, not after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from microbatch_testkit.services import MachineProbe, require_services

pytest_plugins = ["pytester"]


@pytest.fixture
def local_services_possible() -> None:
    probe = MachineProbe()
    problems = probe.local_problems("kafka") + probe.local_problems("postgres")
    if problems:
        message = "the local providers need " + "; ".join(problems)
        if require_services():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _all_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


FAILING_TEST = """
import json, os

def test_fails_while_services_run(kafka_service, postgres_service):
    with open(os.environ["RECORD"], "w") as out:
        json.dump({"pids": [kafka_service.pid, postgres_service.pid],
                   "dirs": [str(kafka_service.workdir), str(postgres_service.workdir)]}, out)
    assert kafka_service.running
    raise AssertionError("this test fails on purpose")
"""


@pytest.mark.usefixtures("local_services_possible")
def test_a_failing_test_leaves_no_process_and_no_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("MICROBATCH_SERVICES", "local")
    monkeypatch.setenv("RECORD", str(record))
    pytester.makepyfile(test_fails=FAILING_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*this test fails on purpose*", "*kafka: Apache Kafka*"])
    seen = json.loads(record.read_text())
    assert all(isinstance(pid, int) for pid in seen["pids"])
    assert _all_gone(seen["pids"], timeout=5)
    assert not any(Path(folder).exists() for folder in seen["dirs"])


CRASHING_HOLDER = """
import json, sys, time
from microbatch_testkit.services import LocalKafka, LocalPostgres

kafka, postgres = LocalKafka(), LocalPostgres()
kafka.start()
postgres.start()
print(json.dumps({"pids": [kafka.pid, postgres.pid],
                  "dirs": [str(kafka.workdir), str(postgres.workdir)]}), flush=True)
time.sleep(600)
"""


@pytest.mark.usefixtures("local_services_possible")
def test_services_die_with_a_killed_test_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", CRASHING_HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MICROBATCH_SERVICES": "local"},
    )
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        seen = json.loads(line)
        assert not any(_gone(pid) for pid in seen["pids"])
        holder.send_signal(signal.SIGKILL)  # no atexit, no finalizer: only the kernel is left
        holder.wait(timeout=10)
        assert _all_gone(seen["pids"], timeout=15)
    finally:
        if holder.poll() is None:
            holder.kill()
        for folder in json.loads(line or '{"dirs": []}')["dirs"]:
            subprocess.run(["rm", "-rf", folder], check=False)

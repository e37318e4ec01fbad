"""The ``microbatch`` command: run in-process through ``main`` and as the installed script."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from microbatch._checkpoint import BatchEntry, Checkpoint, SourceRange
from microbatch._cli import main
from microbatch._registry import ConnectorRegistry

SCRIPT = shutil.which("microbatch", path=os.path.dirname(sys.executable))
RowOf = Callable[[str, str], list[str]]  # the testkit's row_of fixture

FAKE_PLUGIN = """
from __future__ import annotations

import pyarrow as pa

from microbatch import (
    BatchWriter,
    Option,
    OptionSpec,
    Sink,
    Source,
    SourceCapabilities,
    StreamReader,
    hookimpl,
)


class FakeReader(StreamReader):
    def initial_offset(self):
        return {}

    def latest_offset(self, start, limit):
        return start

    def partitions(self, start, end):
        return []


class FakeSource(Source):
    format_name = "fakefmt"
    description = "A source for testing the command line."
    capabilities = SourceCapabilities(replayable=False)
    options = OptionSpec(
        Option(name="pollInterval", type="duration", default="5 seconds", doc="How often."),
        Option(name="mode", choices=("fast", "slow"), default="fast", doc="Speed."),
        Option(name="password", secret=True, doc="Log-in password."),
        Option(name="path", required=True, doc="Where | to read."),
        prefixes=("client.",),
    )

    def schema(self) -> pa.Schema:
        return pa.schema([("value", pa.int64())])

    def stream_reader(self, context):
        return FakeReader()


class FakeWriter(BatchWriter):
    def add_batch(self, table, batch_id):
        pass


class FakeSink(Sink):
    format_name = "fakefmt"
    description = "A sink for testing the command line."

    def stream_writer(self, context):
        return FakeWriter(context)


@hookimpl
def microbatch_register_connectors(registry):
    registry.add_source(FakeSource)
    registry.add_sink(FakeSink)
"""


@pytest.fixture
def fake_dist(tmp_path: Path) -> dict[str, str]:
    """An installed distribution ``mbfake 1.2.3`` with a working and a broken plugin; returns
    the environment of a process that sees it."""
    (tmp_path / "mbfake_plugin.py").write_text(FAKE_PLUGIN)
    (tmp_path / "mbfake_broken.py").write_text("raise RuntimeError('boom: cannot start')\n")
    info = tmp_path / "mbfake-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mbfake\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(
        "[microbatch.connectors]\nfakefmt = mbfake_plugin\nbroken = mbfake_broken\n"
    )
    return {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "220"}


def run_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT is not None, "the microbatch console script is not installed in this venv"
    return subprocess.run(
        [SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or {**os.environ, "COLUMNS": "220"},
    )


# -- connectors --------------------------------------------------------------------------


def test_connectors_lists_every_installed_connector(
    row_of: RowOf, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = ConnectorRegistry()
    registry.load_entry_points()
    installed = {info.format_name for info in registry.connectors()}
    assert {"rate", "rate-micro-batch", "memory"} <= installed

    assert main(["connectors"]) == 0
    out = capsys.readouterr().out
    for name in installed:
        assert row_of(out, name)[0] == name
    rate = row_of(out, "rate")
    assert rate[1] == "source"
    assert rate[3] == "replayable"
    assert rate[4].startswith("microbatch-rate ")
    memory_sink = [line for line in out.splitlines() if "│ memory " in line and "│ sink " in line]
    assert memory_sink and "append" in memory_sink[0]


def test_connectors_rate_shows_its_options(
    row_of: RowOf, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["connectors", "rate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rate (source)")
    assert "microbatch-rate" in out
    cells = row_of(out, "rowsPerSecond")
    assert cells[1] == "int >= 1"
    assert cells[2] == "1"
    assert cells[5].startswith("How many rows")


def test_connector_names_are_matched_case_insensitively(
    row_of: RowOf, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["connectors", "RATE-MICRO-BATCH"]) == 0
    assert row_of(capsys.readouterr().out, "rowsPerBatch")[3] == "yes"


def test_unknown_connector_exits_2_with_a_suggestion() -> None:
    result = run_script("connectors", "rat")
    assert result.returncode == 2
    assert "Unknown format 'rat'. Did you mean 'rate'?" in result.stderr
    assert result.stdout == ""


def test_unknown_sink_name_suggests_the_sink(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["connectors", "memroy"]) == 2
    assert "Did you mean 'memory'?" in capsys.readouterr().err


def test_third_party_plugin_with_both_roles_and_a_broken_plugin(
    fake_dist: dict[str, str], row_of: RowOf
) -> None:
    listing = run_script("connectors", env=fake_dist)
    assert listing.returncode == 0
    fake_rows = [line for line in listing.stdout.splitlines() if "│ fakefmt " in line]
    assert len(fake_rows) == 2
    assert any("not replayable" in row and "mbfake 1.2.3" in row for row in fake_rows)
    assert "Plugins that failed to load" in listing.stderr
    assert "broken" in listing.stderr and "boom: cannot start" in listing.stderr

    detail = run_script("connectors", "fakefmt", env=fake_dist)
    assert detail.returncode == 0, detail.stderr
    out = detail.stdout
    assert out.startswith("fakefmt (source and sink)")
    assert "Distribution: mbfake 1.2.3" in out
    assert row_of(out, "pollInterval")[1:3] == ["duration", "5 seconds"]
    assert row_of(out, "mode")[4] == "fast, slow"
    assert row_of(out, "password")[5] == "(secret) Log-in password."
    assert row_of(out, "path")[3] == "yes"
    assert "guarantee: at-least-once" in out
    assert "Also accepts any option named 'client.*', passed through" in out


def test_help_and_version() -> None:
    result = run_script("--version")
    assert result.returncode == 0
    assert result.stdout.strip().startswith("microbatch 0.")
    bare = run_script()
    assert bare.returncode == 2
    assert "connectors" in bare.stderr and "checkpoint" in bare.stderr


# -- docs options ------------------------------------------------------------------------


def test_docs_options_renders_every_connector(fake_dist: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "options.md"
    result = run_script("docs", "options", "--output", str(target), env=fake_dist)
    assert result.returncode == 0, result.stderr
    text = target.read_text()
    assert text.startswith("# Option reference\n")
    assert "## `rate` source" in text
    assert "| `rowsPerSecond` | int >= 1 | `1` |" in text
    assert "## `fakefmt` source" in text and "## `fakefmt` sink" in text
    assert "| `path` | string |  | yes |  | Where \\| to read. |" in text
    assert "| `mode` | string | `fast` |  | `fast`, `slow` | Speed. |" in text
    assert "Also accepts any option named `client.*`, passed through" in text

    only = run_script("docs", "options", "--distribution", "mbfake", env=fake_dist)
    assert "## `fakefmt` source" in only.stdout
    assert "## `rate` source" not in only.stdout


# -- checkpoint inspect ------------------------------------------------------------------


def make_checkpoint(url: str, *, batches: int, committed: int) -> Checkpoint:
    checkpoint = Checkpoint(url)
    checkpoint.open(source="rate-micro-batch", sink="memory")
    for batch_id in range(batches):
        start = None if batch_id == 0 else {"offset": batch_id * 10}
        checkpoint.write_offsets(
            BatchEntry(
                batch_id,
                (SourceRange(start, {"offset": (batch_id + 1) * 10}),),
                1_700_000_000_000,
            )
        )
        if batch_id < committed:
            checkpoint.write_commit(batch_id, 10)
    return checkpoint


def test_inspect_shows_batches_and_the_batch_to_rerun(
    tmp_path: Path, row_of: RowOf, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = make_checkpoint(str(tmp_path / "cp"), batches=3, committed=2)
    query_id = checkpoint.metadata()["id"]  # type: ignore[index]

    assert main(["checkpoint", "inspect", str(tmp_path / "cp")]) == 0
    out = capsys.readouterr().out
    assert f"Query id     {query_id}" in out
    assert "Source       rate-micro-batch" in out
    assert "Lock         free" in out
    assert row_of(out, "1") == [
        "1",
        "2023-11-14T22:13:20.000Z",
        '{"offset":10}',
        '{"offset":20}',
        "10",
        "yes",
    ]
    assert row_of(out, "2")[-1] == "no"
    assert "Batch 2 was logged but not committed: the next run re-runs it" in out


def test_inspect_json_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_checkpoint(str(tmp_path), batches=2, committed=2)
    assert main(["checkpoint", "inspect", "--json", str(tmp_path)]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert dump["metadata"]["sink"] == "memory"
    assert [batch["end"] for batch in dump["batches"]] == [{"offset": 10}, {"offset": 20}]
    assert dump["batches"][0]["start"] is None
    assert all(batch["committed"] for batch in dump["batches"])
    assert dump["rerunOnRestart"] is None
    assert dump["lock"] is None


def test_inspect_reads_fsspec_urls(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://cli-test-{uuid.uuid4().hex}/cp"
    make_checkpoint(url, batches=1, committed=0)
    assert main(["checkpoint", "inspect", "--json", url]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert dump["rerunOnRestart"] == 0


@pytest.mark.parametrize(
    ("batches", "committed", "entry", "text", "message"),
    [
        (3, 3, "1", '{"batchId": 1, "start"', "is not a valid entry (it is not valid JSON)"),
        (2, 1, "0", '{"batchId": 0}', "is not a valid offset log entry"),
    ],
    ids=["not-json", "missing-fields"],
)
def test_inspect_names_a_corrupted_offset_entry(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    batches: int,
    committed: int,
    entry: str,
    text: str,
    message: str,
) -> None:
    make_checkpoint(str(tmp_path), batches=batches, committed=committed)
    (tmp_path / "offsets" / entry).write_text(text)
    assert main(["checkpoint", "inspect", str(tmp_path)]) == 1
    assert f"{tmp_path}/offsets/{entry} {message}" in capsys.readouterr().err


def test_inspect_missing_folder(tmp_path: Path) -> None:
    result = run_script("checkpoint", "inspect", str(tmp_path / "nowhere"))
    assert result.returncode == 1
    assert f"No checkpoint at {tmp_path / 'nowhere'}: the folder does not exist." in result.stderr


def test_inspect_folder_that_is_not_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["checkpoint", "inspect", str(tmp_path)]) == 1
    assert "is not a checkpoint" in capsys.readouterr().err


def test_inspect_reports_who_holds_the_lock(
    tmp_path: Path, wide: None, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = make_checkpoint(str(tmp_path), batches=1, committed=1)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"runId": "run-1", "pid": holder.pid, "host": socket.gethostname(), "startedAt": "x"}
        checkpoint.root.write("lock", lock)
        assert main(["checkpoint", "inspect", str(tmp_path)]) == 0
        assert f"held by process {holder.pid} (run run-1" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()
    assert main(["checkpoint", "inspect", str(tmp_path)]) == 0
    assert f"stale (left by pid {holder.pid}" in capsys.readouterr().out


# -- with the engine ---------------------------------------------------------------------


def test_inspect_a_checkpoint_written_by_a_real_query(
    tmp_path: Path, row_of: RowOf, capsys: pytest.CaptureFixture[str]
) -> None:
    import microbatch as mb

    location = str(tmp_path / "cp")
    with mb.Session() as session:
        frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 7).load()
        query = (
            frame.write_stream.format("memory")
            .query_name("inspected")
            .trigger(available_now=True)
            .option("checkpointLocation", location)
            .start()
        )
        assert query.await_termination(60)
        assert session.table("inspected").num_rows == 7
        progress = query.last_progress
        assert progress is not None

    assert main(["checkpoint", "inspect", location]) == 0
    out = capsys.readouterr().out
    assert f"Query id     {query.id}" in out
    assert "Source       rate-micro-batch" in out
    assert "Sink         memory" in out
    assert "Lock         free" in out
    start, end = progress["sources"][0]["startOffset"], progress["sources"][0]["endOffset"]
    compact = {"separators": (",", ":")}
    assert row_of(out, "0")[2:] == [
        json.dumps(start, **compact),
        json.dumps(end, **compact),
        "7",
        "yes",
    ]

    assert main(["checkpoint", "inspect", "--json", location]) == 0
    [batch] = json.loads(capsys.readouterr().out)["batches"]
    assert (batch["start"], batch["end"], batch["numInputRows"]) == (start, end, 7)

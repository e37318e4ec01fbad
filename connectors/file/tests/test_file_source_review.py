"""File source edge cases: a writer that opened its file before the query began watching
the folder, and JSON nested too deeply for schema inference.

Real writer processes, real files; every test counts the rows exactly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from file_connector_helpers import start_memory_query, wait_for

import microbatch as mb
from microbatch.errors import SchemaError

# writes ``count`` rows, then waits for a line on stdin (the file still open), then ``count``
# more, and closes the file
WRITER = textwrap.dedent(
    """
    import sys
    path, count = sys.argv[1], int(sys.argv[2])
    with open(path, "w") as handle:
        for part in range(2):
            if part:
                sys.stdin.readline()
            handle.write("".join(
                '{"id": %d, "text": "t"}\\n' % (part * count + i) for i in range(count)
            ))
            handle.flush()
            if not part:
                print("written", flush=True)
    """
)


def test_a_file_its_writer_opened_before_the_query_started_waits_for_its_close(
    session: mb.Session, tmp_path: Path
) -> None:
    """The query starts while a writer holds its file open, idle for longer than settleTime:
    no event told how the file got there, but its writer still holds it, so it is not taken
    half written."""
    folder = tmp_path / "in"
    folder.mkdir()
    rows = 300
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder / "log.json"), str(rows)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "written"
        time.sleep(0.4)  # the file's time is now older than settleTime
        query = start_memory_query(
            session, folder, tmp_path / "checkpoint", settleTime="200 milliseconds"
        )
        try:
            query.process_all_available()
            time.sleep(0.3)
            query.process_all_available()
            assert session.table("events").num_rows == 0  # held while its writer holds it
            writer.stdin.write("go\n")
            writer.stdin.close()
            assert writer.wait(timeout=10) == 0
            wait_for(lambda: session.table("events").num_rows >= 2 * rows)
            time.sleep(0.2)
            query.process_all_available()
            table = session.table("events")
            assert table.num_rows == 2 * rows
            assert sorted(table["id"].to_pylist()) == list(range(2 * rows))
            progress = query.last_progress
            assert progress is not None
            assert progress.sources[0]["metrics"]["numFilesChangedAfterRead"] == "0"
        finally:
            query.stop()
    finally:
        writer.kill()
        writer.wait()


def _nested(depth: int) -> str:
    return '{"deep": ' + '{"b": ' * depth + "1" + "}" * depth + "}"


@pytest.mark.parametrize("depth", [400, 990])
def test_schema_inference_on_json_nested_hundreds_of_levels_gives_a_clear_result(
    session: mb.Session, tmp_path: Path, depth: int
) -> None:
    """Nesting that pyarrow infers without crashing but that the schema's handling could not
    recurse through: the deep value is left out of the schema, the rest is read."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text('{"id": 1}\n' + _nested(depth)[:-1] + ', "id": 2}\n')
    table = session.read.format("json").option("schemaInference", "true").load(str(folder))
    assert table.schema.names == ["id"]
    assert sorted(table["id"].to_pylist()) == [1, 2]

    only_deep = tmp_path / "deep"
    only_deep.mkdir()
    (only_deep / "a.json").write_text(_nested(depth) + "\n")
    with pytest.raises(SchemaError, match="UNABLE_TO_INFER_SCHEMA"):
        session.read.format("json").option("schemaInference", "true").load(str(only_deep))


def test_schema_inference_keeps_moderate_nesting(session: mb.Session, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(_nested(50) + "\n")
    table = session.read.format("json").option("schemaInference", "true").load(str(folder))
    assert table.num_rows == 1
    value = table["deep"][0].as_py()
    for _ in range(50):
        value = value["b"]
    assert value == 1


# ParseJson (core) over rows holding a line break and then another value: pyarrow's reader
# may start one of its blocks inside such a row, which aborts the process
PARSE_ROWS = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from microbatch._transforms import ParseJson
    row = sys.argv[1]
    # the rows around the reader's first block boundary (1 MiB) are the bad ones
    values = pa.array(['{"a": 7}'] * 114_000 + [row] * 3_000 + ['{"a": 7}'], pa.string())
    batch = pa.RecordBatch.from_pydict({"value": values})
    out = ParseJson("value", "a BIGINT", corrupt_column="_bad").apply(batch)
    bad = sum(1 for value in out.column("_bad").to_pylist() if value is not None)
    print(out.num_rows, bad, out.column("a").to_pylist()[-1])
    """
)


@pytest.mark.parametrize("after", ['"x"', "1", "true", "null"])
def test_parse_json_rows_with_a_value_after_a_line_break_never_kill_the_process(
    after: str,
) -> None:
    row = '{"a": 1}\n' + after + "}"
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ROWS, row], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["117001", "3000", "7"]

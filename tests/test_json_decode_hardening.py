"""``ParseJson`` on input that used to crash the process or was read wrongly.

pyarrow's JSON reader (26.0.1) kills the process (SIGSEGV) when one of the blocks it reads
starts with a top-level ``null``; a row holding a document and then ``null`` can put one
there. Those cases run in a child process, so a crash fails the test instead of killing the
test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest

from microbatch._transforms import ParseJson
from microbatch.errors import TransformError

CHILD = r"""
import json, sys
import pyarrow as pa
from microbatch.errors import TransformError
from microbatch._transforms import ParseJson

mode, kind = sys.argv[1], sys.argv[2]
rows = ['{"a": 1}'] * 10
filler = {
    "spaces": '{"a": 2}' + " null" * 400_000 + ' {"a": 3}',
    "lines": '{"a": 2}' + "\nnull" * 400_000 + '\n{"a": 3}',
    "blanks": '{"a": 2}' + " " * 2_100_000 + 'null {"a": 3}',
}[kind]
rows[5] = filler
batch = pa.record_batch([pa.array(rows)], names=["v"])
corrupt = "_corrupt" if mode == "PERMISSIVE" else None
try:
    out = ParseJson("v", pa.schema([("a", pa.int64())]), mode=mode, corrupt_column=corrupt)
    result = out.apply(batch)
    bad = result.column("_corrupt").is_valid().to_pylist() if corrupt else None
    print(json.dumps({"a": result.column("a").to_pylist(), "bad": bad}))
except TransformError as error:
    print(json.dumps({"error": str(error)[:300]}))
"""


def parse_in_child(mode: str, kind: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, kind], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (
        f"the parsing process died with exit code {done.returncode} (a negative code is a "
        f"signal: -11 is SIGSEGV)\n{done.stderr[-2000:]}"
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


KINDS = ["spaces", "lines", "blanks"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_null_after_a_document_is_a_corrupt_row_not_a_crash(kind: str) -> None:
    result = parse_in_child("PERMISSIVE", kind)
    assert result["a"] == [1] * 5 + [None] + [1] * 4
    assert result["bad"] == [False] * 5 + [True] + [False] * 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_null_after_a_document_is_dropped(kind: str) -> None:
    assert parse_in_child("DROPMALFORMED", kind)["a"] == [1] * 9


@pytest.mark.parametrize("kind", KINDS)
def test_a_null_after_a_document_fails_fast_naming_the_row(kind: str) -> None:
    error = parse_in_child("FAILFAST", kind)["error"]
    assert "at row 5 of the batch" in error and "Extra data" in error


def test_valid_rows_that_mention_null_are_not_flagged() -> None:
    rows = ['{"s": "} null", "a": null, "b": [null, 1]}', '{"s": "x\\" null", "a": 2}']
    batch = pa.record_batch([pa.array(rows * 30_000)], names=["v"])  # several read blocks
    schema = pa.schema([("s", pa.string()), ("a", pa.int64())])
    result = ParseJson("v", schema, mode="FAILFAST").apply(batch)
    assert result.num_rows == 60_000
    assert result.column("s").to_pylist()[:2] == ["} null", 'x" null']


@pytest.mark.parametrize("many", [False, True])
def test_float_out_of_range_is_malformed_not_infinity(many: bool) -> None:
    rows = ['{"f": 1.5}', '{"f": 1e39}', '{"f": -3.5e38}', '{"f": 3.4e38}']
    if many:  # the bad rows are found among many good ones
        rows = rows[:1] * 2000 + rows[1:]
    batch = pa.record_batch([pa.array(rows)], names=["v"])
    schema = pa.schema([("f", pa.float32())])
    result = ParseJson("v", schema, corrupt_column="_c").apply(batch)
    assert result.column("f").to_pylist()[-3:-1] == [None, None]
    assert result.column("f").to_pylist()[-1] == pytest.approx(3.4e38)
    assert result.column("_c").to_pylist()[-3:] == ['{"f": 1e39}', '{"f": -3.5e38}', None]
    with pytest.raises(TransformError, match="out of range for FLOAT"):
        ParseJson("v", schema, mode="FAILFAST").apply(batch)
    nested = pa.schema([("g", pa.struct([("f", pa.float32())]))])
    one = pa.record_batch([pa.array(['{"g": {"f": 1e39}}'])], names=["v"])
    assert ParseJson("v", nested, mode="DROPMALFORMED").apply(one).num_rows == 0


def test_timestamp_ntz_with_an_offset_is_malformed_not_shifted() -> None:
    rows = ['{"t": "2024-05-01T10:00:00"}', '{"t": "2024-05-01T10:00:00+02:00"}']
    batch = pa.record_batch([pa.array(rows)], names=["v"])
    ntz = pa.schema([("t", pa.timestamp("us"))])
    result = ParseJson("v", ntz, corrupt_column="_c").apply(batch)
    assert result.column("t").to_pylist() == [datetime(2024, 5, 1, 10), None]
    assert result.column("_c").to_pylist() == [None, rows[1]]
    with pytest.raises(TransformError, match=r"row 1 .*offset"):
        ParseJson("v", ntz, mode="FAILFAST").apply(batch)
    utc = pa.schema([("t", pa.timestamp("us", tz="UTC"))])
    instants = ParseJson("v", utc).apply(batch).column("t").to_pylist()
    assert [moment.hour for moment in instants] == [10, 8]

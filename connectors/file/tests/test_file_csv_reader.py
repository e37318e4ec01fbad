"""The CSV reader's paths against each other, and what it does around them.

Spark's tokenizer model (``_spark_csv``) is checked against Spark itself in
``test_file_spark_csv.py`` and the whole source in ``test_file_spark_readers.py``; here the
pyarrow fast path (whole blocks, then line by line) must give exactly what the tokenizer alone
gives, on random text, any block size and every parse mode, and a ``multiLine`` file read piece
by piece must give what it gives read whole.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import SourceError
from microbatch_file import _csv_reader
from microbatch_file._csv_reader import CsvFileReader, CsvSettings
from microbatch_file._parse_modes import DropCounter
from microbatch_file._spark_csv import (
    CsvSyntaxError,
    SparkCsvOptions,
    Tokenizer,
    records,
    stream_records,
)

S2 = pa.schema([("a", pa.string()), ("b", pa.string())])
MIXED = pa.schema([("a", pa.int32()), ("b", pa.string()), ("c", pa.float64())])


def blocks(data: bytes, size: int) -> Iterator[tuple[bytes, int]]:
    """``data`` in blocks of whole lines of about ``size`` bytes, as the source reads files."""
    start, line = 0, 1
    while start < len(data):
        end = data.find(b"\n", start + size)
        end = len(data) if end < 0 else end + 1
        yield data[start:end], line
        line += data.count(b"\n", start, end)
        start = end


def reader(schema: pa.Schema, options: SparkCsvOptions, **more: Any) -> CsvFileReader:
    settings = {"corrupt": True, "mode": "PERMISSIVE", "header": False, "where": "f.csv"}
    settings.update(more)
    return CsvFileReader(CsvSettings(options=options), schema, drops=DropCounter(), **settings)


def rows(csv: CsvFileReader, data: bytes, size: int = 1 << 20) -> Any:
    """The rows read (NaN as text, to compare), or the error."""
    try:
        tables = list(csv.read(blocks(data, size)))
    except SourceError as error:
        return ("error", str(error).split(":")[0])
    found = pa.concat_tables(tables).to_pylist() if tables else []
    return [{k: "NaN" if v != v else v for k, v in row.items()} for row in found]


_PIECES = ["a", "1", "-", ".", " ", "\t", ",", ",", '"', '"', "\\", "\n", "\n", "\r\n", "\r"]
_PIECES += ["#", "'", "\x00", "\ufeff", "é", "\x01"]
_LINES = ["1,a,2.5", '2,"x,y",3', "3,b", '"q""r",s', "  ", "", "4,c,5,6", '5,"open', "# c"]
_OPTIONS: list[dict[str, Any]] = [
    {},
    {"escape": '"'},
    {"quote": "'"},
    {"quote": "", "escape": ""},
    {"sep": "\t"},
    {"sep": ";"},
    {"comment": "#"},
    {"null_value": "NA", "empty_value": "E"},
    {"unescaped_quote_handling": "SKIP_VALUE"},
    {"unescaped_quote_handling": "RAISE_ERROR"},
    {"nan_value": "1"},
    {"max_columns": 3},
]
_SCHEMAS = [S2, MIXED, pa.schema([("a", pa.string())]), pa.schema([("a", pa.float64())])]


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_reads_what_the_tokenizer_reads(seed: int) -> None:
    rnd = random.Random(seed)
    logging.disable(logging.WARNING)
    try:
        for _ in range(150):
            if rnd.random() < 0.5:
                text = "".join(rnd.choices(_PIECES, k=rnd.randint(0, 60)))
            else:
                text = "\n".join(rnd.choices(_LINES, k=rnd.randint(1, 12))) + rnd.choice("\n ")
            data = text.encode()
            if rnd.random() < 0.1:
                data = data.replace(b"a", b"\xff")  # invalid UTF-8
            options = SparkCsvOptions(**rnd.choice(_OPTIONS))
            more = {
                "mode": rnd.choice(["PERMISSIVE", "DROPMALFORMED", "FAILFAST"]),
                "corrupt": rnd.random() < 0.5,
                "header": rnd.random() < 0.3,
            }
            schema, size = rnd.choice(_SCHEMAS), rnd.choice([1, 7, 1 << 20])
            fast = reader(schema, options, **more)
            slow = reader(schema, options, **more)
            slow.fast = False
            assert rows(fast, data, size) == rows(slow, data, size), (data, options, more, size)
    finally:
        logging.disable(logging.NOTSET)


_STREAM_PIECES = [*_PIECES[:-2], ";", "|"]
_STREAM_OPTIONS: list[dict[str, Any]] = [
    {},
    {"escape": '"'},
    {"comment": "#"},
    {"line_sep": ";"},
    {"line_sep": "\r\n"},
    {"sep": "||"},
    {"unescaped_quote_handling": "SKIP_VALUE"},
    {"unescaped_quote_handling": "BACK_TO_DELIMITER"},
    {"ignore_leading_white_space": True, "ignore_trailing_white_space": True},
    {"ignore_trailing_white_space": True},
    {"max_chars_per_column": 5},
]


@pytest.mark.parametrize("seed", range(4))
def test_a_multiline_file_read_in_pieces_reads_as_a_whole(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(400):
        text = "".join(rnd.choices(_STREAM_PIECES, k=rnd.randint(0, 80)))
        options = SparkCsvOptions(multi_line=True, **rnd.choice(_STREAM_OPTIONS))
        at = [0]

        def read(size: int, text: str = text, at: list[int] = at) -> str:
            taken = text[at[0] : at[0] + (len(text) if size < 0 else size)]
            at[0] += len(taken)
            return taken

        def run(found: Any) -> Any:
            try:
                return list(found)
            except CsvSyntaxError as error:
                return error.line, error.reason

        whole = run(records(text, options))
        assert run(stream_records(read, options, piece=rnd.choice([1, 3, 20]))) == whole, text


def test_clean_blocks_never_reach_the_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the tokenizer was used")

    monkeypatch.setattr(Tokenizer, "records", refuse)
    data = b"".join(b'%d,"name, %d",%d.5\r\n' % (i, i, i) for i in range(2000))
    found = rows(reader(MIXED, SparkCsvOptions(), corrupt=False), data, size=4096)
    assert len(found) == 2000
    assert found[1] == {"a": 1, "b": "name, 1", "c": 1.5}


def test_only_the_odd_lines_of_a_block_reach_the_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    original = Tokenizer.records

    def spy(self: Tokenizer, text: str, first_line: int = 1) -> Any:
        seen.append(text)
        return original(self, text, first_line)

    monkeypatch.setattr(Tokenizer, "records", spy)
    lines = [b"%d,x,%d" % (i, i) for i in range(100)]
    lines[40] = b'40,"a\\"b",40'  # an escaped quote
    lines[70] = b"70,y"  # too few values
    found = rows(reader(MIXED, SparkCsvOptions()), b"\n".join(lines) + b"\n")
    assert seen == ['40,"a\\"b",40', "70,y"]
    assert found[40] == {"a": 40, "b": 'a"b', "c": 40.0, _csv_reader.CORRUPT: None}
    assert found[70] == {"a": 70, "b": "y", "c": None, _csv_reader.CORRUPT: "70,y"}
    assert [row["a"] for row in found] == list(range(100))


def test_values_left_open_are_converted_one_by_one() -> None:
    data = "1,a,1.5\n\uff12,b,0x1p3\n3,c,x\n".encode()  # full-width 2 and a hexadecimal float
    found = rows(reader(MIXED, SparkCsvOptions()), data)
    assert found == [
        {"a": 1, "b": "a", "c": 1.5, _csv_reader.CORRUPT: None},
        {"a": 2, "b": "b", "c": 8.0, _csv_reader.CORRUPT: None},
        {"a": 3, "b": "c", "c": None, _csv_reader.CORRUPT: "3,c,x"},
    ]


def test_the_header_is_the_first_line_not_blank_nor_a_comment_in_any_block() -> None:
    data = b"\n  \n#x\n" * 50 + b"a,b\n1,2\n"
    csv = reader(S2, SparkCsvOptions(comment="#"), header=True, corrupt=False)
    assert rows(csv, data, size=1) == [{"a": "1", "b": "2"}]


def test_a_header_that_does_not_match_with_enforce_schema_false_fails() -> None:
    csv = CsvFileReader(
        CsvSettings(enforce_schema=False),
        S2,
        corrupt=False,
        mode="PERMISSIVE",
        header=True,
        where="f.csv",
        drops=DropCounter(),
    )
    with pytest.raises(SourceError) as raised:
        list(csv.read(blocks(b"a,c\n1,2\n", 1 << 20)))
    assert str(raised.value).startswith("CSV header does not conform to the schema.")
    assert "Expected: b but found: c" in str(raised.value)
    assert "CSV file: f.csv" in str(raised.value)


def test_errors_name_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("".join(f"{i},x\n" for i in range(5000)) + "7,x,9\n")
    load = mb.Session().read.format("csv").schema("a INT, b STRING")
    with pytest.raises(SourceError, match=r"f\.csv at line 5001 .*the record has 3 value"):
        load.options(mode="FAILFAST").load(str(path))
    with pytest.raises(SourceError, match=r"MALFORMED_CSV_RECORD.*f\.csv at line 5001"):
        load.options(maxColumns="2").load(str(path))


def test_dropped_records_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    drops = DropCounter()
    csv = CsvFileReader(
        CsvSettings(),
        MIXED,
        corrupt=False,
        mode="DROPMALFORMED",
        header=False,
        where="f.csv",
        drops=drops,
    )
    with caplog.at_level(logging.WARNING, logger="microbatch.file"):
        tables = list(csv.read(blocks(b"1,a,1\nx,b,2\n3,c\n4,d,4\n", 1 << 20)))
    assert pa.concat_tables(tables).column("a").to_pylist() == [1, 4]
    assert drops.count == 2
    assert "Dropped 2 malformed CSV line(s) of f.csv" in caplog.text
    assert "the first is at line 2" in caplog.text


def test_multiline_records_span_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.csv"
    path.write_text("".join(f'{i},"line {i}\nand more, {i}"\n' for i in range(300)))
    monkeypatch.setattr("microbatch_file._formats.BLOCK_SIZE", 64)
    table = (
        mb.Session()
        .read.format("csv")
        .schema("a INT, b STRING")
        .options(multiLine="true")
        .load(str(path))
    )
    assert table.num_rows == 300
    assert table.slice(299).to_pylist() == [{"a": 299, "b": "line 299\nand more, 299"}]


def test_floats_read_as_java_reads_them() -> None:
    data = b"1e39\n-1e39\n 2.5 \n1.5d\nNaN\n+Infinity\n"
    found = rows(reader(pa.schema([("f", pa.float32())]), SparkCsvOptions(), corrupt=False), data)
    values = [row["f"] for row in found]
    assert values[:4] == [math.inf, -math.inf, 2.5, 1.5]
    assert values[4] == "NaN" and values[5] == math.inf


@pytest.mark.parametrize("block_size", [3, 7, 12, 1 << 20])
@pytest.mark.parametrize("mode", ["PERMISSIVE", "FAILFAST"])
def test_a_record_ending_at_line_sep_is_never_cut_where_a_block_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_size: int, mode: str
) -> None:
    """With lineSep a line feed is part of a record: blocks of whole lines must be joined
    back into whole records before they are read."""
    from microbatch_file import _formats

    monkeypatch.setattr(_formats, "BLOCK_SIZE", block_size)
    path = tmp_path / "windows.csv"
    path.write_bytes(b'x,y\r\na,"b\nc"\r\nd,e\r\n')
    reader = mb.Session().read.format("csv").options(lineSep="\r\n", mode=mode)
    table = reader.schema("a STRING, b STRING").load(str(path))
    assert table.to_pylist() == [
        {"a": "x", "b": "y"},
        {"a": "a", "b": "b\nc"},
        {"a": "d", "b": "e"},
    ]

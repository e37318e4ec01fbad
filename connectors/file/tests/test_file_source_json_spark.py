"""The json file source reads records as Spark 4 does: pyarrow's fast path for the records it
reads as Spark does, ``SparkJsonReader`` for the others, in order, in every parse mode."""

from __future__ import annotations

import logging
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import ReadAllAvailable, ReadContext
from microbatch.errors import SchemaError, SourceError
from microbatch.spark_datetime import DatetimeParser
from microbatch.spark_json import SparkJsonOptions, SparkJsonReader
from microbatch_file import _formats, _json_spark
from microbatch_file._datetimes import DatetimeOptions
from microbatch_file._json_spark import JsonSettings
from microbatch_file._parse_modes import CORRUPT, DropCounter
from microbatch_file._records import split_records
from microbatch_file.sources import JsonFileSource

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.string())])


def read_all(folder: Path, schema: pa.Schema | None, **options: Any) -> list[dict[str, Any]]:
    parsed = JsonFileSource.options.parse({"path": str(folder), **options}, connector="json")
    source = JsonFileSource(parsed, user_schema=schema, streaming=False)
    reader = source.stream_reader(ReadContext(schema=source.schema(), streaming=False))
    start = reader.initial_offset()
    end = reader.latest_offset(start, ReadAllAvailable())
    split_reader = reader.split_reader()
    splits = reader.partitions(start, end)
    return [r for s in splits for b in split_reader.read(s) for r in b.to_pylist()]


def inferred(folder: Path, **options: Any) -> pa.Schema:
    parsed = JsonFileSource.options.parse(
        {"path": str(folder), "schemaInference": "true", **options}, connector="json"
    )
    return JsonFileSource(parsed, user_schema=None, streaming=True).schema()


def test_failfast_names_the_file_the_line_and_the_whole_reason(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n\n{"a": 2}\r{"a": 3, "b": [}\n')
    with pytest.raises(SourceError, match=r"f\.json at line 4 .*invalid JSON at character 15"):
        read_all(tmp_path, SCHEMA, mode="FAILFAST")
    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n{"a": "of the batch:  (value: x"}\n')
    with pytest.raises(SourceError) as caught:
        read_all(tmp_path, SCHEMA, mode="FAILFAST")
    assert 'cannot read "of the batch:  (value: x" as BIGINT. Fix' in str(caught.value)


def test_lines_are_read_as_spark_reads_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [
        '{"a": 1, "b": "x"}',
        '{"a": "no", "b": "kept"}',  # the good value is kept
        "[1]",
        '{"a": 1.5}',
        '{"a": 4, "b": {"nested": 1}}',  # STRING keeps the source text
        '{"a": 5} {"a": 6}',  # only the first document counts
        "null",
        "{'a': 7, 'b': '\\u00e9'}",  # single quotes
        '[{"a": 8}, {"a": 9, "a": 10}]',  # a row per element, the last repeated key wins
    ]
    (tmp_path / "f.json").write_text("\n".join(lines) + "\n")
    rows = read_all(tmp_path, SCHEMA.append(pa.field("_corrupt_record", pa.string())))
    assert [tuple(row.values()) for row in rows] == [
        (1, "x", None),
        (None, "kept", lines[1]),
        (None, None, "[1]"),
        (None, None, lines[3]),
        (4, '{"nested": 1}', None),
        (5, None, None),
        (None, None, "null"),
        (7, "é", None),
        (8, None, None),
        (10, None, None),
    ]
    with caplog.at_level(logging.WARNING):
        dropped = read_all(tmp_path, SCHEMA, mode="DROPMALFORMED")
    assert [row["a"] for row in dropped] == [1, 4, 5, 7, 8, 10]
    assert any("Dropped 4 malformed JSON line(s)" in r.getMessage() for r in caplog.records)


# -- the fast path and the slow path give the reference's rows --------------------------------
MIXED = pa.schema(
    [
        ("i", pa.int32()),
        ("f", pa.float32()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("st", pa.struct([("x", pa.int64()), ("y", pa.list_(pa.float64()))])),
    ]
)

GOOD_LINES = [
    b'{"i": 1, "f": 1.5, "s": "a", "ts": "2024-03-01T12:00:00Z", "st": {"x": 1, "y": [1.5]}}',
    b'{"i": 2, "s": "b", "ts": "2024-03-01 12:00:00.5", "other": [1, {"z": null}]}',
    b'{"f": -0.25, "st": {"y": []}, "ts": "2024-03-01T12:00:00+02:00"}',
    b"{}",
]
ODD_LINES = [
    b"",
    b"   ",
    b"{'i': 3, 's': 'single'}",
    b'{"i": 4} trailing',
    b'{"i": 5, "i": 6}',
    b'{"s": 7}',
    b'{"s": {"k": [1, 2.50]}}',
    b'[{"i": 8}, {"i": 9}]',
    b"[]",
    b'{"i": "x", "s": "kept"}',
    b'{"i": 10, "ts": "2024-02-30T00:00:00Z"}',
    b'{"i": 11, "ts": "2024-03-01T12"}',
    b'{"i": 12, "ts": "01/03/2024"}',
    b'{"f": 1.00000005960464477539062500001}',
    b'{"f": 1e39}',
    b'{"f": "NaN", "i": 13}',
    b'{"f": -NaN}',
    b'{"f": NaN}',
    b'{"i": 14, "s": "caf\xc3\xa9 \xff"}',
    b"null",
    b"{broken",
    b'  {"i": 15}  ',
    b'{"i": 16, /* comment */ "s": "c"}',
    b'{"st": {"x": 17, "x": 18}}',
    b'{"i": 2147483648}',
    b'{"f": Inf, "i": 19}',  # pyarrow reads Inf, -Inf and -0 otherwise than Jackson
    b'{"f": -Inf}',
    b'{"f": -0, "i": 20}',
    b'{"f": -0.0, "i": 21}',
    b'{"i": 22, "ts": "2024-03-0\xd9\xa1T12:00:00Z"}',  # a digit of another script
    b'{"f": 1' + b"0" * 400 + b', "s": "x"}',
]


def reference(
    data: bytes, schema: pa.Schema, mode: str, separator: bytes | None = None
) -> list[dict[str, Any]] | str:
    """What reading ``data`` gives record by record with ``SparkJsonReader`` alone."""
    datetimes = DatetimeOptions()
    reader = SparkJsonReader(schema, SparkJsonOptions(), datetimes.parse_one)
    rows: list[dict[str, Any]] = []
    for number, record in enumerate(split_records(data, separator), start=1):
        result = reader.read(record)
        if result.malformed is None:
            rows.extend({**row, CORRUPT: None} for row in result.rows)
        elif mode == "FAILFAST":
            return f"at line {number} "
        elif mode == "PERMISSIVE":
            text = record.decode(errors="replace")
            rows.extend({**row, CORRUPT: text} for row in result.partial)
    return rows


def decoded(data: bytes, schema: pa.Schema, mode: str, block: int = 0) -> list[dict[str, Any]]:
    reading = _json_spark.JsonReading(schema, True, mode, JsonSettings())
    tables = []
    drops = DropCounter()
    start = 0
    first = 1
    for line, cut in _cuts(data, block):
        assert line == first  # the records each block says it held number the next one
        table, records = reading.block(data[start:cut], "f.json", first, drops)
        tables.append(table)
        first, start = first + records, cut
    return pa.concat_tables(tables).to_pylist() if tables else []


def _cuts(data: bytes, block: int) -> list[tuple[int, int]]:
    """Where blocks of about ``block`` bytes end (after a line feed), with their first line."""
    if not block:
        return [(1, len(data))]
    cuts, line, start = [], 1, 0
    while start < len(data):
        cut = data.find(b"\n", start + block)
        cut = len(data) if cut < 0 else cut + 1
        cuts.append((line, cut))
        line += data[start:cut].count(b"\n") + data[start:cut].count(b"\r")
        line -= data[start:cut].count(b"\r\n")
        start = cut
    return cuts


@pytest.mark.parametrize("seed", range(12))
def test_blocks_mixing_clean_and_odd_records_give_the_reference_rows(seed: int) -> None:
    rng = random.Random(seed)
    lines = [rng.choice(GOOD_LINES) for _ in range(300)]
    for _ in range(rng.choice([0, 1, 3, 30])):
        lines[rng.randrange(len(lines))] = rng.choice(ODD_LINES)
    separators = [rng.choice([b"\n", b"\n", b"\r\n", b"\r"]) for _ in lines]
    data = b"".join(line + sep for line, sep in zip(lines, separators, strict=True))
    if seed % 3 == 0:
        data = data.rstrip(b"\r\n")
    for mode in ("PERMISSIVE", "DROPMALFORMED", "FAILFAST"):
        expected = reference(data, MIXED, mode)
        if isinstance(expected, str):
            with pytest.raises(SourceError, match=expected):
                decoded(data, MIXED, mode, block=seed * 300)
            continue
        got = decoded(data, MIXED, mode, block=seed * 300)
        assert repr(got) == repr(_as_arrow(expected, MIXED)), mode  # (repr: NaN is NaN)


def _as_arrow(rows: list[dict[str, Any]], schema: pa.Schema) -> list[dict[str, Any]]:
    full = schema.append(pa.field(CORRUPT, pa.string()))
    return pa.Table.from_pylist(rows, schema=full).to_pylist()


def test_a_clean_block_never_reaches_the_slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_slow_path(*args: Any) -> None:
        raise AssertionError("the slow path read a clean record")

    monkeypatch.setattr(SparkJsonReader, "read", no_slow_path)
    data = b"\n".join(GOOD_LINES * 50) + b"\n"
    assert len(decoded(data, MIXED, "FAILFAST")) == 200


def test_a_float_rounded_twice_by_pyarrow_is_rounded_once() -> None:
    data = b'{"f": 1.00000005960464477539062500001}\n{"f": 1.000000059604644775390625}\n'
    rows = decoded(data, pa.schema([("f", pa.float32())]), "FAILFAST")
    assert [row["f"] for row in rows] == [1.0000001192092896, 1.0]


@pytest.mark.parametrize(
    "kind", ["timestamp", "timestamp_ntz", "date"], ids=["timestamp", "ntz", "date"]
)
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_the_iso_cast_gives_what_the_datetime_parser_gives(kind: Any, zone: str) -> None:
    texts = [
        f"{date}{sep}{time}{fraction}{offset}"
        for date in ("2024-03-01", "1999-12-31", "2024-02-29", "2023-02-29", "2024-13-01")
        for sep in ("T", " ")
        for time in ("00:00:00", "23:59:59", "24:00:00", "12:30:60")
        for fraction in ("", ".5", ".123456")
        for offset in ("", "Z", "+02:00", "-0530", "+01", "+18:00", "+19:00")
    ] + ["2024-03-01", "2024-3-1", "+2024-03-01", "0999-01-01T00:00:00Z"]
    parser = DatetimeParser(kind, None, zone)
    for text in texts:
        values = pa.array([text, None])
        cast = _json_spark._iso_cast(parser, values)
        if cast is not None:
            assert cast.equals(parser.parse(values)[0]), text


def test_the_quick_shape_check_admits_only_text_of_the_iso_shape() -> None:
    rng = random.Random(13)
    pieces = [
        "2024", "0999", "1999", "-", "03", "1", "01", "T", " ", "t", "12", ":", "00", "59",
        "60", ".", "5", "123456", "1234567", "Z", "z", "+", "02", "18", "19", "30", "",
    ]  # fmt: skip
    texts = ["2024-03-01T12:00:00Z", "2024-03-01T12:00Z", "2024-03-01T12Z", "0999-03-01T12:00:00Z"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randrange(4, 14))) for _ in range(4000)]
    texts += [
        f"2024-03-01{rng.choice('T ')}{rng.choice(['12', '12:30', '12:30:59'])}"
        f"{rng.choice(['', '.5', '.123456'])}{rng.choice(['Z', '+19:00', '+0530', '-01', ''])}"
        for _ in range(2000)
    ]
    admitted = 0
    for text in texts:
        values = pa.array([text])
        if not _json_spark._utc_shaped(values):
            continue
        try:
            values.cast(pa.timestamp("us", tz="UTC"))
        except pa.ArrowInvalid:
            continue
        admitted += 1
        assert re.fullmatch(_json_spark._ISO_ZONED[1:-1], text), text
    assert admitted > 100


def test_records_pyarrow_rejects_are_found_from_the_rows_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [b'{"a": %d, "b": "x"}' % i for i in range(2000)]
    for row in (37, 500, 501, 1999):
        lines[row] = b'{"a": %d,, "b": "x"}' % row  # ends with "}": only a read finds it
    lines[900] = b'{"a": 900, "b": 5}'  # a number for a STRING: screened out before reading
    lines[901] = b'{"a": "901"}'
    data = b"\n".join(lines) + b"\n"
    reads = 0
    read_json = _json_spark.pajson.read_json

    def counted(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return read_json(*args)

    monkeypatch.setattr(_json_spark.pajson, "read_json", counted)
    for mode in ("PERMISSIVE", "DROPMALFORMED"):
        expected = reference(data, SCHEMA, mode)
        assert not isinstance(expected, str)
        assert repr(decoded(data, SCHEMA, mode)) == repr(_as_arrow(expected, SCHEMA))
    assert reads <= 2 * (4 + 2)  # the block, then a read after each bad record, and the last


def test_a_clean_block_with_two_documents_on_a_line_keeps_the_first() -> None:
    lines = [b'{"a": %d, "b": "x"}' % i for i in range(50)]
    lines[10] = b'{"a": 10, "b": "} {"}'
    lines[20] = b'{"a": 20} {"a": 21}'
    lines[30] = b'{"a": 30}\t \t{"a": 31}'
    lines[40] = b'{"a": 40}{"a": 41}'
    lines[47] = b'{"a": 47} null'
    rows = decoded(b"\n".join(lines) + b"\n", SCHEMA, "FAILFAST")
    assert [row["a"] for row in rows] == list(range(50))


def test_a_clean_block_with_a_document_across_lines_reads_each_line() -> None:
    lines = [b'{"a": %d, "b": "x"}' % i for i in range(50)]
    lines[4] = b'{"a": 4, "x":\n{"c": 1}}'  # a document across lines: two records
    lines[6] = b'{"a": 6, "x":\r{"c": 1}}'
    lines[9] = b'{"a": 9} null'  # each a row more for pyarrow, where a line above has one less
    lines[12] = b'{"a": 12} null'
    data = b"\n".join(lines) + b"\n"
    for mode in ("PERMISSIVE", "DROPMALFORMED"):
        expected = reference(data, SCHEMA, mode)
        assert not isinstance(expected, str)
        assert decoded(data, SCHEMA, mode) == _as_arrow(expected, SCHEMA), mode
    kept = [row["a"] for row in decoded(data, SCHEMA, "DROPMALFORMED")]
    assert kept[:11] == [0, 1, 2, 3, None, 5, None, 7, 8, 9, 10]  # ({"c": 1}} gives {"c": 1})


# -- lineSep, multiLine ------------------------------------------------------------------------
def test_a_custom_line_sep_splits_only_there_and_counts_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [b'{"a": %d,\n "b": "x\\ny"}' % i for i in range(40)]
    records[33] = b'{"a": "bad"}'
    (tmp_path / "f.json").write_bytes(b"||".join(records) + b"||\n")
    monkeypatch.setattr(_formats, "BLOCK_SIZE", 50)
    rows = read_all(tmp_path, SCHEMA, lineSep="||", mode="DROPMALFORMED")
    assert [row["a"] for row in rows] == [i for i in range(40) if i != 33]
    assert rows[0]["b"] == "x\ny"
    with pytest.raises(SourceError, match=r"f\.json at record 34 "):
        read_all(tmp_path, SCHEMA, lineSep="||", mode="FAILFAST")


def test_a_multiline_array_gives_a_row_per_element(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text('[\n {"a": 1},\n {"a": 2, "b": \'x\'}\n]\n{"a": 3}')
    assert read_all(tmp_path, SCHEMA, multiLine="true") == [
        {"a": 1, "b": None},
        {"a": 2, "b": "x"},
    ]


# -- schema inference --------------------------------------------------------------------------
def test_inference_follows_spark(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(
        b'{"b": 1, "a": "", "n": null, "e": {}, "l": []}\n'
        b'{"b": 2.5, "a": 3, "d": 123456789012345678901234}\n'
        b"{'q': true, x: 1}\n"
        b"[1, 2]\n"
    )
    schema = inferred(tmp_path)
    assert schema == pa.schema(
        [
            ("_corrupt_record", pa.string()),
            ("a", pa.int64()),
            ("b", pa.float64()),
            ("d", pa.decimal128(24, 0)),
            ("l", pa.list_(pa.string())),
            ("n", pa.string()),
        ]
    )
    assert inferred(tmp_path, allowUnquotedFieldNames="true", mode="DROPMALFORMED").names == [
        "a",
        "b",
        "d",
        "l",
        "n",
        "q",
        "x",
    ]
    assert inferred(tmp_path, dropFieldIfAllNull="true", mode="DROPMALFORMED").names == [
        "a",
        "b",
        "d",
    ]
    with pytest.raises(SchemaError, match=r"MALFORMED_RECORD_IN_SCHEMA_INFERENCE.*line 3"):
        inferred(tmp_path, mode="FAILFAST")


def test_inference_with_primitives_as_string_and_prefers_decimal(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text('{"a": 1.50, "b": "2.5", "c": true, "d": 1e3}\n')
    assert inferred(tmp_path, primitivesAsString="true") == pa.schema(
        [("a", pa.string()), ("b", pa.string()), ("c", pa.string()), ("d", pa.string())]
    )
    assert inferred(tmp_path, prefersDecimal="true") == pa.schema(
        [
            ("a", pa.decimal128(3, 2)),
            ("b", pa.decimal128(2, 1)),
            ("c", pa.bool_()),
            ("d", pa.decimal128(4, 0)),  # Spark refuses to infer a negative scale
        ]
    )


@pytest.mark.parametrize(
    "lines",
    [
        [b'{"a": 1, "b": {"y": [1, 2.5], "x": "2024-01-01"}}', b'{"a": 2.5, "c": null}'],
        [b'{"z": [], "a": [{"b": 1}, {"c": "x"}]}', b'{"z": [[true]], "e": {}}'],
        [b'{"a": "2024-01-01T00:00:00"}', b'{"a": "text", "": 1}'],
    ],
)
def test_pyarrow_inference_gives_the_types_spark_infers(lines: list[bytes]) -> None:
    from microbatch_file._json_infer import infer_json_schema

    data = b"\n".join(lines) + b"\n"
    fast = infer_json_schema([(data, "f.json")], JsonSettings(), "PERMISSIVE", False)
    blank = b"\n\n".join(lines) + b"\n"  # a blank line: inferred record by record
    slow = infer_json_schema([(blank, "f.json")], JsonSettings(), "PERMISSIVE", False)
    assert fast == slow


@pytest.mark.parametrize("mode", ["PERMISSIVE", "FAILFAST"])
def test_a_decimal_beyond_its_precision_is_malformed_on_the_fast_path(
    tmp_path: Path, mode: str
) -> None:
    """pyarrow reads 99999 into DECIMAL(5,2) without checking its precision: the block's
    clean records must not carry that value (Spark: malformed)."""
    clean = "".join('{"dec": 1.25}\n' for _ in range(20))
    path = tmp_path / "d.json"
    path.write_text('{"dec": 99999}\n{"dec": "1234.5"}\n' + clean)
    reader = mb.Session().read.format("json").option("mode", mode)
    if mode == "FAILFAST":
        with pytest.raises(SourceError, match="line 1"):
            reader.schema("dec DECIMAL(5,2)").load(str(path))
        return
    table = reader.schema("dec DECIMAL(5,2), _corrupt_record STRING").load(str(path))
    table.validate(full=True)
    assert table.column("dec").to_pylist()[:3] == [None, None, Decimal("1.25")]
    corrupt = table.column("_corrupt_record").to_pylist()
    assert corrupt[:3] == ['{"dec": 99999}', '{"dec": "1234.5"}', None]


@pytest.mark.parametrize("dtype", [pa.uint32(), pa.time64("us"), pa.duration("s")], ids=str)
def test_a_type_spark_json_lacks_is_refused_at_load(tmp_path: Path, dtype: pa.DataType) -> None:
    (tmp_path / "f.json").write_text('{"a": 1}\n')
    session = mb.Session()
    with pytest.raises(SchemaError, match=r"UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE.*'a'"):
        session.read_stream.format("json").schema(pa.schema([("a", dtype)])).load(str(tmp_path))

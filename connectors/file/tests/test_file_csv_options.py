"""The CSV source's options (Spark's names, defaults and checks at ``load()``), schema
inference, and the vectorised conversion of whole columns against one value at a time."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import OptionError, SchemaError
from microbatch_file._csv_columns import ColumnConverter
from microbatch_file._csv_infer import safe_names
from microbatch_file._datetimes import DatetimeOptions
from microbatch_file._spark_csv import SparkCsvOptions, separator
from microbatch_file._spark_csv_values import convert
from microbatch_file.sources import CsvFileSource

from .file_connector_helpers import make_source


def load(path: Path, ddl: str | None = None, **options: Any) -> pa.Table:
    reader = mb.Session().read.format("csv")
    if ddl is not None:
        reader = reader.schema(ddl)
    return reader.options(**options).load(str(path))


# -- options ---------------------------------------------------------------------------------
def test_the_options_have_sparks_names_and_defaults(tmp_path: Path) -> None:
    source = make_source(CsvFileSource, {"path": str(tmp_path)})
    settings = source.make_format().settings  # type: ignore[attr-defined]
    assert settings.options == SparkCsvOptions()
    assert settings.enforce_schema is True
    assert source.opts.unescaped_quote_handling == "STOP_AT_DELIMITER"
    assert (source.opts.max_columns, source.opts.max_chars_per_column) == (20480, -1)
    assert (source.opts.nan_value, source.opts.positive_inf, source.opts.negative_inf) == (
        "NaN",
        "Inf",
        "-Inf",
    )


@pytest.mark.parametrize(
    ("text", "sep"),
    [(",", ","), ("\\t", "\t"), ("\t", "\t"), ("||", "||"), (".\\t.", ".\t."), ("\\\\", "\\")],
)
def test_a_separator_is_read_as_spark_reads_it(text: str, sep: str) -> None:
    assert separator(text) == sep


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sep": ""}, "Delimiter cannot be empty string"),
        ({"sep": "\\"}, "Single backslash is prohibited"),
        ({"sep": "\\x"}, "Unsupported special character for delimiter: \\x"),
        ({"delimiter": "\\u0000"}, "Unsupported special character for delimiter: \\u"),
        ({"lineSep": ""}, "cannot be an empty string"),
        ({"lineSep": "abc"}, "one or two characters"),
        ({"quote": "ab"}, "single character"),
        ({"charToEscapeQuoteEscaping": "ab"}, "single character"),
        ({"unescapedQuoteHandling": "STOP"}, "must be one of STOP_AT_DELIMITER"),
        ({"maxColumns": "0"}, "at least 1"),
        ({"maxCharsPerColumn": "-2"}, "at least -1"),
        ({"enforceSchema": "maybe"}, "enforceSchema"),
        ({"emptyValues": "x"}, "emptyValue"),
    ],
)
def test_invalid_options_fail_at_load(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError) as raised:
        load(tmp_path, "a STRING", **options)
    assert message in str(raised.value)


def test_unescaped_quote_handling_and_multiline_are_read(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text('1,"a\nb"\n2,"c"d"\n')
    table = load(tmp_path, "i INT, s STRING", multiLine="true", unescapedQuoteHandling="skip_value")
    assert table.to_pylist() == [{"i": 1, "s": "a\nb"}, {"i": 2, "s": None}]


# -- inference -------------------------------------------------------------------------------
def test_inferred_types_are_the_first_that_read_every_value(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text(
        "i,f,b,d,t,s,n,m\n"
        "1,1.5,true,2024-03-01,2024-03-01T10:00:00,x,,1\n"
        "2,2,FALSE,2024-03-02,2024-03-02,y,,NA\n"
    )
    source = make_source(
        CsvFileSource,
        {"path": str(tmp_path), "header": True, "inferSchema": True, "schemaInference": True},
        streaming=True,
    )
    assert source.schema() == pa.schema(
        [
            ("i", pa.int64()),
            ("f", pa.float64()),
            ("b", pa.bool_()),
            ("d", pa.date32()),
            ("t", pa.timestamp("us", tz="UTC")),
            ("s", pa.string()),
            ("n", pa.string()),
            ("m", pa.string()),
        ]
    )


def test_inference_tokenises_with_the_source_options(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("# names\n'a;b';c\n'1;2';NA\n'3;4';5\n")
    options = {
        "path": str(tmp_path),
        "header": True,
        "inferSchema": True,
        "schemaInference": True,
        "sep": ";",
        "quote": "'",
        "comment": "#",
        "nullValue": "NA",
    }
    source = make_source(CsvFileSource, options, streaming=True)
    assert source.schema() == pa.schema([("a;b", pa.string()), ("c", pa.int64())])


def test_header_names_are_made_safe_as_spark_does() -> None:
    assert safe_names(["a", None, "", "A", "b", "NA"], "NA") == [
        "a0",
        "_c1",
        "_c2",
        "A3",
        "b",
        "_c5",
    ]


# -- whole columns against one value at a time -----------------------------------------------
_TYPES = [
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.float64(),
    pa.float32(),
    pa.bool_(),
    pa.decimal128(5, 2),
    pa.decimal128(3, 0),
    pa.decimal128(2, 2),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us"),
]


def _token(rnd: random.Random) -> str:
    kind = rnd.random()
    if kind < 0.3:
        return "".join(rnd.choices("0123456789", k=rnd.randint(1, 20)))
    if kind < 0.4:
        return rnd.choice(
            ["NaN", "Inf", "-Inf", "Infinity", "+Infinity", "nan", " NaN ", "true", "tRuE", "1"]
        )
    if kind < 0.6:
        date = rnd.choice(["2024", "1999", "0000", "9999"]) + "-" + rnd.choice(["01", "02", "13"])
        date += "-" + rnd.choice(["01", "29", "30", "1"])
        time = rnd.choice(["", "T12:00:00", " 23:59:59.123456", "T00:00", "T12:00:00.1234567"])
        zone = rnd.choice(["", "Z", "+02:00", "-18:00", "+19:00", "+0200", " UTC"])
        return date + time + zone
    return "".join(rnd.choices("0123456789+-.eE x,dfNaIinfty\t\u0661TZ:", k=rnd.randint(0, 12)))


def _plain(values: pa.Array) -> list[Any]:
    """Values as comparable Python values (datetimes as numbers, at any year)."""
    if pa.types.is_date(values.type):
        values = values.cast(pa.int32())
    elif pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in values.to_pylist()]


@pytest.mark.parametrize("dtype", _TYPES, ids=str)
def test_a_column_converts_as_its_values_one_by_one(dtype: pa.DataType) -> None:
    """Every value the vectorised conversion decides is :func:`convert`'s value (which only
    cannot hold dates beyond the year 9999, which Spark reads)."""
    rnd = random.Random(str(dtype))
    datetimes = DatetimeOptions()
    options = SparkCsvOptions()
    converter = ColumnConverter(options, datetimes)
    one = pa.schema([("a", dtype)])
    tokens = [_token(rnd) for _ in range(600)]
    for batch in [[token] for token in tokens[:200]] + [tokens]:  # one value, and all at once
        values, todo = converter.convert(pa.array(batch, pa.string()), dtype)
        left = todo.to_pylist() if todo is not None else [False] * len(batch)
        for token, value, open_ in zip(batch, _plain(values), left, strict=True):
            if open_:
                continue  # convert()'s to decide
            expected, reason = convert([token], one, options, datetimes.parse_one)
            if reason is not None and "outside the years 1 to 9999" in reason:
                continue
            assert reason is None, (token, value)
            want = _plain(pa.array([expected["a"]], dtype))[0]
            assert (value, str(value)) == (want, str(want)), token  # str: -0.0 is not 0.0


def test_column_types_spark_lacks_are_refused_at_load(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("1,x\n")
    with pytest.raises(SchemaError, match=r"UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE.*`b`"):
        load(tmp_path, "a INT, b ARRAY<INT>")
    assert load(tmp_path, "a INT, b BINARY").to_pylist() == [{"a": 1, "b": b"x"}]

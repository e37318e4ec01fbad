from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from microbatch._transforms import (
    Cast,
    Drop,
    Filter,
    MapBatches,
    ParseJson,
    Pipeline,
    Select,
    Transform,
    WithColumn,
    WithColumnRenamed,
)
from microbatch.errors import SchemaError, TransformError


def people() -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "name": ["ann", "bob", None, "dan"],
            "value": pa.array([5, 10, None, 20], pa.int32()),
        }
    )


# -- Select ----------------------------------------------------------------------------------
def test_select_names_reorders_and_keeps_fields() -> None:
    batch = people()
    commented = batch.schema.field("name").with_metadata({b"comment": b"who"})
    batch = pa.RecordBatch.from_arrays(batch.columns, schema=batch.schema.set(1, commented))
    out = Select.of("value", "name").apply(batch)
    assert out.schema.names == ["value", "name"]
    assert out.schema.field("name").metadata == {b"comment": b"who"}
    assert out.column("value").to_pylist() == [5, 10, None, 20]


def test_select_expressions_pairs_and_keywords() -> None:
    step = Select.of(
        "id",
        ("double", pc.field("value") * 2),
        pc.field("id") + 100,
        big=pc.field("value") >= 10,
        tag="x",
    )
    out = step.apply(people())
    assert out.schema.names == ["id", "double", "add_checked(id, 100)", "big", "tag"]
    assert out.column("double").to_pylist() == [10, 20, None, 40]
    assert out.column("add_checked(id, 100)").to_pylist() == [101, 102, 103, 104]
    assert out.column("big").to_pylist() == [False, True, None, True]
    assert out.column("tag").to_pylist() == ["x"] * 4
    assert step.describe() == (
        "Select id, multiply_checked(value, 2) AS double, add_checked(id, 100) AS "
        'add_checked(id, 100), (value >= 10) AS big, "x" AS tag'
    )


def test_select_with_function_style_expression() -> None:
    out = Select.of(total=pc.multiply(pc.field("id"), pc.field("value"))).apply(people())
    assert out.column("total").to_pylist() == [5, 20, None, 80]


def test_select_unknown_column() -> None:
    with pytest.raises(TransformError, match=r"column 'nope' not found among \[id, name, value\]"):
        Select.of("id", "nope").apply(people())


def test_select_unknown_column_in_expression() -> None:
    with pytest.raises(TransformError, match=r"Select .* failed on a batch with columns \[id"):
        Select.of(x=pc.field("nope") + 1).apply(people())


def test_select_rejects_duplicates_empty_and_junk() -> None:
    with pytest.raises(TransformError, match=r"the column.s. id twice"):
        Select.of("id", ("id", pc.field("value")))
    with pytest.raises(TransformError, match="at least one column"):
        Select.of()
    with pytest.raises(TransformError, match="cannot use 3"):
        Select.of(3)


# -- Filter ----------------------------------------------------------------------------------
def test_filter_keeps_matching_rows_in_order_and_drops_nulls() -> None:
    step = Filter(pc.field("value") >= 10)
    out = step.apply(people())
    assert out.column("id").to_pylist() == [2, 4]
    assert out.schema == people().schema
    assert step.describe() == "Filter (value >= 10)"


def test_filter_keeps_order_on_a_large_batch() -> None:
    n = 300_000
    batch = pa.record_batch({"i": pa.array(range(n), pa.int64())})
    out = Filter(pc.equal(pc.bit_wise_and(pc.field("i"), 3), 0)).apply(batch)
    assert out.column("i").to_pylist() == list(range(0, n, 4))


def test_filter_on_an_empty_batch() -> None:
    empty = people().slice(0, 0)
    assert Filter(pc.field("value") > 1).apply(empty).schema == empty.schema


def test_filter_errors() -> None:
    with pytest.raises(TransformError, match="gives int32 values, not booleans"):
        Filter(pc.field("value")).apply(people())
    with pytest.raises(TransformError, match=r"Filter .* failed on a batch with columns"):
        Filter(pc.field("missing") > 1).apply(people())
    with pytest.raises(TransformError, match=r"needs a pyarrow.compute.Expression, got bool"):
        Filter(True)


# -- WithColumn ------------------------------------------------------------------------------
def test_with_column_appends() -> None:
    step = WithColumn("twice", pc.multiply(pc.field("value"), 2))
    out = step.apply(people())
    assert out.schema.names == ["id", "name", "value", "twice"]
    assert out.column("twice").to_pylist() == [10, 20, None, 40]
    assert step.describe() == "WithColumn twice = multiply(value, 2)"


def test_with_column_replaces_in_place() -> None:
    out = WithColumn("name", pc.utf8_upper(pc.field("name"))).apply(people())
    assert out.schema.names == ["id", "name", "value"]
    assert out.column("name").to_pylist() == ["ANN", "BOB", None, "DAN"]


@pytest.mark.parametrize(
    ("value", "dtype"), [(0, pa.int64()), ("eu", pa.string()), (1.5, pa.float64())]
)
def test_with_column_literal(value: object, dtype: pa.DataType) -> None:
    out = WithColumn("lit", value).apply(people())
    assert out.schema.field("lit").type == dtype
    assert out.column("lit").to_pylist() == [value] * 4


def test_with_column_rejects_values_arrow_cannot_hold() -> None:
    with pytest.raises(TransformError, match="Column 'x': <object"):
        WithColumn("x", object())


# -- Drop / WithColumnRenamed ----------------------------------------------------------------
def test_drop_ignores_unknown_names() -> None:
    step = Drop(("name", "nope"))
    assert step.apply(people()).schema.names == ["id", "value"]
    assert Drop(("nope",)).apply(people()).schema.names == ["id", "name", "value"]
    assert Drop("id").apply(people()).schema.names == ["name", "value"]  # type: ignore[arg-type]
    assert step.describe() == "Drop name, nope"


def test_with_column_renamed() -> None:
    out = WithColumnRenamed("name", "who").apply(people())
    assert out.schema.names == ["id", "who", "value"]
    assert out.column("who").to_pylist() == ["ann", "bob", None, "dan"]
    assert WithColumnRenamed("nope", "x").apply(people()).schema.names == ["id", "name", "value"]
    assert WithColumnRenamed("id", "id").apply(people()).schema.names == ["id", "name", "value"]
    assert WithColumnRenamed("id", "key").describe() == "WithColumnRenamed id -> key"


def test_with_column_renamed_refuses_duplicates() -> None:
    with pytest.raises(TransformError, match="a column 'value' already exists; drop it first"):
        WithColumnRenamed("name", "value").apply(people())


# -- Cast ------------------------------------------------------------------------------------
def test_cast_with_ddl_strings_and_types() -> None:
    step = Cast.of({"id": "STRING", "value": pa.float64()})
    out = step.apply(people())
    assert out.schema.field("id").type == pa.string()
    assert out.column("id").to_pylist() == ["1", "2", "3", "4"]
    assert out.column("value").to_pylist() == [5.0, 10.0, None, 20.0]
    assert step.describe() == "Cast id: STRING, value: DOUBLE"


def test_cast_from_schema_or_ddl_keeps_nullability_and_metadata() -> None:
    batch = pa.record_batch(
        [pa.array(["1", "2"])],
        schema=pa.schema([pa.field("n", pa.string(), False, metadata={b"k": b"v"})]),
    )
    for spec in ("n BIGINT", pa.schema([("n", pa.int64())])):
        out = Cast.of(spec).apply(batch)
        assert out.schema.field("n") == pa.field("n", pa.int64(), False)
        assert out.schema.field("n").metadata == {b"k": b"v"}
        assert out.column("n").to_pylist() == [1, 2]


def test_cast_errors_name_the_column_and_both_types() -> None:
    batch = pa.record_batch({"s": ["1", "x"]})
    with pytest.raises(TransformError) as info:
        Cast.of({"s": "INT"}).apply(batch)
    assert "Cannot cast column 's' from STRING to INT" in str(info.value)
    with pytest.raises(TransformError, match="column 'nope' not found"):
        Cast.of({"nope": "INT"}).apply(batch)
    with pytest.raises(SchemaError, match="unknown type 'INTT'"):
        Cast.of({"s": "INTT"})
    with pytest.raises(TransformError, match="the type for column 's' is 5"):
        Cast.of({"s": 5})


# -- MapBatches ------------------------------------------------------------------------------
def test_map_batches_with_a_record_batch_result() -> None:
    def keep_two(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.slice(0, 2)

    step = MapBatches(keep_two)
    assert step.apply(people()).column("id").to_pylist() == [1, 2]
    assert step.describe().startswith("MapBatches ")
    assert "keep_two" in step.describe()


def test_map_batches_turns_a_multi_chunk_table_into_one_batch() -> None:
    def doubled(batch: pa.RecordBatch) -> pa.Table:
        return pa.Table.from_batches([batch, batch])

    out = MapBatches(doubled).apply(people())
    assert isinstance(out, pa.RecordBatch)
    assert out.num_rows == 8
    assert out.column("id").to_pylist() == [1, 2, 3, 4, 1, 2, 3, 4]


def test_map_batches_empty_table_gives_an_empty_batch() -> None:
    schema = pa.schema([("x", pa.int8())])
    out = MapBatches(lambda batch: schema.empty_table()).apply(people())
    assert isinstance(out, pa.RecordBatch)
    assert out.num_rows == 0
    assert out.schema == schema


def test_map_batches_rejects_other_results() -> None:
    def to_dict(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.to_pydict()

    with pytest.raises(TransformError, match=r"MapBatches .*to_dict: the function returned dict"):
        MapBatches(to_dict).apply(people())


# -- ParseJson -------------------------------------------------------------------------------
def json_batch(values: Sequence[object], dtype: pa.DataType | None = None) -> pa.RecordBatch:
    column = pa.array(values, dtype or pa.string())
    return pa.record_batch({"key": list(range(len(values))), "value": column})


ALL_TYPES = (
    "i INT, l BIGINT, t TINYINT, sm SMALLINT, f FLOAT, x DOUBLE, ok BOOLEAN, s STRING, "
    "bin BINARY, d DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, price DECIMAL(10,2), "
    "tags ARRAY<STRING>, m MAP<STRING, INT>, st STRUCT<a: INT, b: ARRAY<DATE>>"
)
GOOD = {
    "i": 1,
    "l": 9007199254740993,
    "t": -5,
    "sm": 300,
    "f": 1.5,
    "x": 2,
    "ok": True,
    "s": "héllo",
    "bin": "raw",
    "d": "2024-02-29",
    "ts": "2024-01-02T03:04:05.123456Z",
    "ntz": "2024-01-02T03:04:05",
    "price": 12.34,
    "tags": ["a", None],
    "m": {"k": 1, "z": None},
    "st": {"a": 7, "b": ["2024-01-01"], "ignored": 1},
    "extra": "ignored",
}
GOOD_ROW = {
    "i": 1,
    "l": 9007199254740993,
    "t": -5,
    "sm": 300,
    "f": 1.5,
    "x": 2.0,
    "ok": True,
    "s": "héllo",
    "bin": b"raw",
    "d": date(2024, 2, 29),
    "ts": datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
    "ntz": datetime(2024, 1, 2, 3, 4, 5),
    "price": Decimal("12.34"),
    "tags": ["a", None],
    "m": [("k", 1), ("z", None)],
    "st": {"a": 7, "b": [date(2024, 1, 1)]},
}
EMPTY_ROW = dict.fromkeys(GOOD_ROW)


def rows(batch: pa.RecordBatch, *names: str) -> list[dict[str, object]]:
    return batch.select(list(names) or batch.schema.names).to_pylist()


def test_parse_json_every_type() -> None:
    step = ParseJson("value", ALL_TYPES)
    out = step.apply(json_batch([json.dumps(GOOD), "{}"]))
    assert out.schema.names == ["key", *GOOD_ROW]
    assert out.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert out.schema.field("d").type == pa.date32()
    assert rows(out, *GOOD_ROW) == [GOOD_ROW, EMPTY_ROW]


def test_parse_json_row_by_row_path_gives_the_same_values() -> None:
    out = ParseJson("value", ALL_TYPES).apply(json_batch([json.dumps(GOOD), "{broken"]))
    assert rows(out, *GOOD_ROW) == [GOOD_ROW, EMPTY_ROW]


def test_parse_json_iso_timestamps() -> None:
    values = [
        '{"ts": "2024-01-02T03:04:05Z"}',
        '{"ts": "2024-01-02T05:04:05+02:00"}',
        '{"ts": "2024-01-02 03:04:05"}',
        '{"ts": "2024-01-02T03:04Z"}',
    ]
    out = ParseJson("value", "ts TIMESTAMP").apply(json_batch(values))
    assert out.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    expected = [datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)] * 3
    assert out.column("ts").to_pylist() == [*expected, datetime(2024, 1, 2, 3, 4, tzinfo=UTC)]
    assert out.column("ts").cast(pa.int64()).to_pylist()[0] == 1704164645000000


BAD_VALUES = [
    '{"a": 1, "b": "one"}',
    "{broken",
    None,
    '{"a": "notint", "b": "three"}',
    "",
    "   ",
    '{"a": 5, "b": "five"}',
    '{"a": 6} {"a": 7}',
    "[1, 2]",
    '{"a": 1.5}',
    '{"a": 99999999999}',
    '{"a": 10, "b": "ten"}',
]
BAD_ROWS = {1, 3, 7, 8, 9, 10}


def test_parse_json_permissive() -> None:
    step = ParseJson("value", "a INT, b STRING", corrupt_column="_corrupt")
    out = step.apply(json_batch(BAD_VALUES))
    assert out.schema.names == ["key", "a", "b", "_corrupt"]
    assert out.column("key").to_pylist() == list(range(12))
    assert out.column("a").to_pylist() == [1] + [None] * 5 + [5] + [None] * 4 + [10]
    assert out.column("b").to_pylist() == [
        *("one", None, None, "three", None, None, "five", None, None, None, None, "ten")
    ]
    corrupt = out.column("_corrupt").to_pylist()
    assert {row for row, text in enumerate(corrupt) if text is not None} == BAD_ROWS
    assert corrupt[1] == "{broken"
    assert corrupt[3] == '{"a": "notint", "b": "three"}'


def test_parse_json_permissive_without_corrupt_column() -> None:
    out = ParseJson("value", "a INT").apply(json_batch(BAD_VALUES))
    assert out.schema.names == ["key", "a"]
    assert out.num_rows == len(BAD_VALUES)


def test_parse_json_drop_malformed() -> None:
    out = ParseJson("value", "a INT, b STRING", mode="DROPMALFORMED").apply(json_batch(BAD_VALUES))
    assert out.column("key").to_pylist() == [0, 2, 4, 5, 6, 11]
    assert out.column("a").to_pylist() == [1, None, None, None, 5, 10]


def test_parse_json_fail_fast_names_column_row_and_error() -> None:
    step = ParseJson("value", "a INT", mode="failfast")
    with pytest.raises(TransformError) as info:
        step.apply(json_batch(BAD_VALUES))
    message = str(info.value)
    assert "column 'value' at row 1 of the batch" in message
    assert "invalid JSON: Expecting property name enclosed in double quotes" in message
    assert '"{broken"' in message
    assert "mode='PERMISSIVE'" in message


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"a": "notint"}', "column 'a': cannot read \"notint\" as INT"),
        ('{"a": 1.5}', "column 'a': cannot read 1.5 as INT"),
        ('{"a": true}', "column 'a': cannot read true as INT"),
        ('{"a": 99999999999}', "column 'a': "),
        ("[1]", "expected a JSON object, got [1]"),
        ('{"a": 1} {"a": 2}', "invalid JSON: Extra data"),
    ],
)
def test_parse_json_fail_fast_reasons(value: str, reason: str) -> None:
    batch = json_batch(['{"a": 0}', value])
    with pytest.raises(TransformError, match="at row 1 of the batch") as info:
        ParseJson("value", "a INT", mode="FAILFAST").apply(batch)
    assert reason in str(info.value)


def test_parse_json_null_empty_and_blank_rows_give_null_rows() -> None:
    step = ParseJson("value", "a INT", mode="FAILFAST")
    out = step.apply(json_batch([None, "", " \n ", '{"a": 1}'], pa.large_string()))
    assert out.column("a").to_pylist() == [None, None, None, 1]


def test_parse_json_binary_input_and_invalid_utf8() -> None:
    values = [b'{"a": 1, "s": "\xc3\xa9"}', b'{"a": 2, "s": "\xff"}', None, b'\xfe{"a": 3}']
    out = ParseJson("value", "a INT, s STRING", corrupt_column="bad").apply(
        json_batch(values, pa.binary())
    )
    assert out.column("a").to_pylist() == [1, None, None, None]
    assert out.column("s").to_pylist() == ["é", None, None, None]
    assert out.column("bad").to_pylist() == [
        None,
        '{"a": 2, "s": "\ufffd"}',
        None,
        '\ufffd{"a": 3}',
    ]
    with pytest.raises(TransformError, match="at row 1 of the batch: invalid UTF-8 at byte 15"):
        ParseJson("value", "a INT", mode="FAILFAST").apply(json_batch(values, pa.binary()))


def test_parse_json_pretty_printed_documents_and_surrounding_whitespace() -> None:
    pretty = json.dumps({"a": 1, "b": {"c": [1, 2]}}, indent=2)
    values = [pretty, '  {"a": 2}\n', '{"a": 3}', '\t{\r\n"a": 4\r\n}']
    out = ParseJson("value", "a INT, b STRUCT<c: ARRAY<INT>>", mode="FAILFAST").apply(
        json_batch(values)
    )
    assert out.column("a").to_pylist() == [1, 2, 3, 4]
    assert out.column("b").to_pylist() == [{"c": [1, 2]}, None, None, None]


def test_parse_json_keep_original_and_placement() -> None:
    batch = pa.record_batch({"before": [1], "value": ['{"x": 5}'], "after": [2]})
    out = ParseJson("value", "x INT").apply(batch)
    assert out.schema.names == ["before", "x", "after"]
    out = ParseJson("value", "x INT", keep_original=True).apply(batch)
    assert out.schema.names == ["before", "value", "x", "after"]
    assert out.column("value").to_pylist() == ['{"x": 5}']


def test_parse_json_accepts_an_arrow_schema() -> None:
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    step = ParseJson("value", schema)
    out = step.apply(json_batch(['{"x": 1}', "{}"]))
    assert out.column("x").to_pylist() == [1, None]
    assert out.schema.field("x").nullable
    assert step.describe() == "ParseJson value -> x BIGINT NOT NULL (PERMISSIVE)"


def test_parse_json_on_an_empty_batch() -> None:
    out = ParseJson("value", "a INT, m MAP<STRING, INT>").apply(json_batch([]))
    assert out.num_rows == 0
    assert out.schema.names == ["key", "a", "m"]


def test_parse_json_finds_few_bad_rows_in_a_large_batch() -> None:
    values = [json.dumps({"id": i, "ts": "2024-01-02T03:04:05Z"}) for i in range(20_000)]
    for row in (3, 7_777, 19_999):
        values[row] = json.dumps({"id": "wrong", "ts": "2024-01-02T03:04:05Z"})
    step = ParseJson("value", "id BIGINT, ts TIMESTAMP", corrupt_column="c")
    out = step.apply(json_batch(values))
    ids = out.column("id").to_pylist()
    assert [row for row, value in enumerate(ids) if value is None] == [3, 7_777, 19_999]
    assert ids[:3] == [0, 1, 2]
    assert ids[19_998] == 19_998
    assert out.column("ts").null_count == 0
    assert out.column("c").null_count == 20_000 - 3


def test_parse_json_configuration_errors() -> None:
    with pytest.raises(TransformError, match="unknown mode 'LENIENT'"):
        ParseJson("value", "a INT", mode="LENIENT")
    with pytest.raises(TransformError, match="corrupt_column only applies in PERMISSIVE"):
        ParseJson("value", "a INT", mode="FAILFAST", corrupt_column="c")
    with pytest.raises(TransformError, match="corrupt_column 'a' is also a schema field"):
        ParseJson("value", "a INT", corrupt_column="a")
    with pytest.raises(TransformError, match="MAP<INT, STRING> cannot hold a JSON object"):
        ParseJson("value", "m MAP<INT, STRING>")
    with pytest.raises(SchemaError, match="unknown type"):
        ParseJson("value", "a INTT")


def test_parse_json_batch_errors() -> None:
    with pytest.raises(TransformError, match="column 'value' has type int64; it must be string"):
        ParseJson("value", "a INT").apply(pa.record_batch({"value": [1]}))
    with pytest.raises(TransformError, match="column 'value' not found among"):
        ParseJson("value", "a INT").apply(pa.record_batch({"other": ["{}"]}))
    with pytest.raises(TransformError, match=r"the column.s. key twice"):
        ParseJson("value", "key INT").apply(json_batch(['{"key": 1}']))


# -- Pipeline --------------------------------------------------------------------------------
def pipeline() -> Pipeline:
    return (
        Pipeline()
        .then(ParseJson("value", "a INT, b STRING"))
        .then(Filter(pc.field("a") > 1))
        .then(WithColumn("a2", pc.field("a") * 2))
        .then(Select.of("key", "a2", "b"))
    )


def test_pipeline_applies_steps_in_order() -> None:
    batch = json_batch(['{"a": 1, "b": "x"}', '{"a": 2, "b": "y"}', None])
    out = pipeline().apply(batch)
    assert out.to_pylist() == [{"key": 1, "a2": 4, "b": "y"}]


def test_pipeline_is_immutable() -> None:
    empty = Pipeline()
    longer = empty.then(Drop(("x",)))
    assert len(empty) == 0
    assert not empty
    assert len(longer) == 1
    assert [type(step) for step in pipeline()] == [ParseJson, Filter, WithColumn, Select]
    assert all(isinstance(step, Transform) for step in pipeline())


def test_pipeline_output_schema() -> None:
    schema = pipeline().output_schema(pa.schema([("key", pa.int64()), ("value", pa.binary())]))
    assert schema == pa.schema([("key", pa.int64()), ("a2", pa.int32()), ("b", pa.string())])
    assert Pipeline().output_schema(people().schema) == people().schema


def test_pipeline_explain_lines() -> None:
    assert pipeline().explain_lines() == [
        "ParseJson value -> a INT, b STRING (PERMISSIVE)",
        "Filter (a > 1)",
        "WithColumn a2 = multiply_checked(a, 2)",
        "Select key, a2, b",
    ]


def test_pipeline_rejects_non_transforms() -> None:
    with pytest.raises(TransformError, match=r"need apply.batch. and describe.*got int"):
        Pipeline().then(3)  # type: ignore[arg-type]

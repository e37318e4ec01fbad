"""Tests of microbatch.spark_json_schema: the schema Spark 4's JSON reader infers.

The expected schemas are PySpark 4.3.0's (``spark.read.options(...).json(path).schema`` of a
file holding the records, one per line), but where a test says Spark fails.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from microbatch.spark_json import SparkJsonOptions
from microbatch.spark_json_schema import (
    canonical_type,
    compatible_type,
    infer_record_type,
    root_struct,
)
from microbatch.types import parse_ddl

CORRUPT = pa.struct([pa.field("_corrupt_record", pa.string())])


def infer(records: list[bytes], drop_null: bool = False, **options: bool) -> str | None:
    """The schema of ``records`` as DDL, inferred as Spark does in PERMISSIVE mode."""
    merged: pa.DataType = pa.null()
    for record in records:
        found = infer_record_type(record, SparkJsonOptions(**options))
        root = None if found is None else root_struct(found)
        merged = compatible_type(merged, CORRUPT if root is None else root)
    final = canonical_type(merged, drop_null)
    if final is None:
        return None
    return ", ".join(f"{f.name} {f.type}" for f in final)


def ddl(text: str) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in parse_ddl(text))


MIXED = [
    b'{"b": 1, "a": "", "n": null, "e": {}, "l": []}',
    b'{"b": 2.5, "a": 3, "d": 123456789012345678901234}',
    b"{'q': true, x: 1}",
    b"[1, 2]",
]


def test_values_merge_as_in_spark() -> None:
    assert infer(MIXED) == ddl(
        "_corrupt_record STRING, a BIGINT, b DOUBLE, d DECIMAL(24,0), l ARRAY<STRING>, n STRING"
    )
    assert infer(MIXED, drop_null=True) == ddl(
        "_corrupt_record STRING, a BIGINT, b DOUBLE, d DECIMAL(24,0)"
    )
    assert infer([*MIXED[:2], b"{'q': true, x: 1}"], allow_unquoted_field_names=True) == ddl(
        "a BIGINT, b DOUBLE, d DECIMAL(24,0), l ARRAY<STRING>, n STRING, q BOOLEAN, x BIGINT"
    )


def test_nested_values_and_conflicts() -> None:
    assert infer(
        [
            b'{"a": [{"y": 1}, {"x": "s"}], "b": {"z": [1, 2.5], "y": null}}',
            b'{"a": [], "b": {"z": [], "w": [[1]]}, "c": [null]}',
            b'[{"d": 1}, {"d": 2}]',
        ]
    ) == ddl(
        "a ARRAY<STRUCT<x: STRING, y: BIGINT>>, "
        "b STRUCT<w: ARRAY<ARRAY<BIGINT>>, y: STRING, z: ARRAY<DOUBLE>>, c ARRAY<STRING>, d BIGINT"
    )
    assert infer(
        [
            b'{"a": 1}',
            b'{"a": "x"}',
            b'{"a": {"b": 1}}',
            b'{"c": [1, "x"]}',
            b'{"d": true}',
            b'{"d": 1}',
            b'{"e": 1}',
            b'{"e": 12345678901234567890}',
        ]
    ) == ddl("a STRING, c ARRAY<STRING>, d STRING, e DECIMAL(20,0)")
    assert infer([b'{"a": NaN, "b": 1}', b'{"a": 1, "b": Infinity}']) == ddl("a DOUBLE, b DOUBLE")
    assert infer([b'{"": 1, "a": 2}']) == ddl("a BIGINT")
    assert infer([b'{"a": [null], "b": [[]], "c": {"d": null}}'], drop_null=True) is None


def test_primitives_as_string() -> None:
    records = [b'{"a": 1.50, "b": "2.5", "c": true, "d": 1e3}', b'{"e": {"y": [1, 2.5]}}']
    assert infer(records, primitives_as_string=True) == ddl(
        "a STRING, b STRING, c STRING, d STRING, e STRUCT<y: ARRAY<STRING>>"
    )


def test_prefers_decimal() -> None:
    records = [
        b'{"a": 1.50, "b": "2.5", "c": true, "e": "0.001", "f": "1,234.5", "g": 0.0}',
        b'{"h": 1, "i": 1.5}',
        b'{"h": 2.25, "i": 12345678901234567890}',
        b'{"j": 1e-3, "k": "1E+2", "l": "-0.5", "m": "+.5", "n": ".5"}',
    ]
    assert infer(records, prefers_decimal=True) == ddl(
        "a DECIMAL(3,2), b DECIMAL(2,1), c BOOLEAN, e STRING, f DECIMAL(5,1), g DECIMAL(1,1), "
        "h DECIMAL(22,2), i DECIMAL(21,1), j DECIMAL(3,3), k STRING, l DECIMAL(1,1), "
        "m DECIMAL(1,1), n DECIMAL(1,1)"
    )
    assert infer([b'{"d": NaN}'], prefers_decimal=True) == ddl("_corrupt_record STRING")
    # Spark fails with NEGATIVE_SCALE_DISALLOWED; here the digits the number needs
    assert infer([b'{"d": 1e3, "e": 1.5e3}'], prefers_decimal=True) == ddl(
        "d DECIMAL(4,0), e DECIMAL(4,0)"
    )


@pytest.mark.parametrize(
    ("left", "right", "merged"),
    [
        ("BIGINT", "DOUBLE", "DOUBLE"),
        ("DECIMAL(5,2)", "BIGINT", "DECIMAL(22,2)"),
        ("DECIMAL(38,0)", "DECIMAL(5,4)", "DOUBLE"),
        ("DECIMAL(5,2)", "DOUBLE", "DOUBLE"),
        ("BOOLEAN", "BIGINT", "STRING"),
        ("ARRAY<BIGINT>", "ARRAY<DOUBLE>", "ARRAY<DOUBLE>"),
        ("ARRAY<BIGINT>", "STRUCT<a: BIGINT>", "STRING"),
    ],
)
def test_compatible_types(left: str, right: str, merged: str) -> None:
    def one(text: str) -> pa.DataType:
        return parse_ddl(f"c {text}").field(0).type

    assert compatible_type(one(left), one(right)) == one(merged)
    assert compatible_type(one(right), one(left)) == one(merged)


def test_malformed_records_and_roots() -> None:
    options = SparkJsonOptions()
    assert infer_record_type(b"{broken", options) is None
    assert infer_record_type(b"", options) == pa.null()
    assert infer_record_type(b'{"a": 1} trailing', options) == pa.struct([("a", pa.int64())])
    assert root_struct(pa.list_(pa.list_(pa.struct([("a", pa.int64())])))) == pa.struct(
        [("a", pa.int64())]
    )
    assert root_struct(pa.list_(pa.int64())) is None

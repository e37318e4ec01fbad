"""Delta file statistics: what they say, and that no reader skipping files by them loses a row.

Every boundary test writes real files with the part writer, commits them with delta-rs, and
filters through four readers that skip files by ``minValues``/``maxValues`` (a pyarrow dataset
of the table, ``to_pyarrow_table(filters=...)``, DataFusion through ``QueryBuilder`` and Polars'
``scan_delta``), comparing with the same filter over the rows in memory.
``test_readers_do_skip_by_the_statistics`` shows the readers really use the statistics: a wrong
maximum loses rows in each of them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, Schema
from deltalake.transaction import create_table_with_add_actions

import microbatch as mb
from microbatch_delta._delta_schema import delta_arrow_schema
from microbatch_delta._part_writer import AddFile, DeltaPartWriter
from microbatch_delta._stats import file_stats
from microbatch_delta._table import DeltaTarget

UTC = dt.UTC
T0 = dt.datetime(2024, 1, 1, tzinfo=UTC)


def stats_of(table: pa.Table, nan_columns: Sequence[str] = (), **write: Any) -> dict[str, Any]:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **write)
    metadata = pq.read_metadata(io.BytesIO(buffer.getvalue()))
    result: dict[str, Any] = json.loads(file_stats(metadata, table.schema, nan_columns))
    return result


def test_stats_of_every_kind_of_column() -> None:
    table = pa.table(
        {
            "i": pa.array([3, None, -7], pa.int8()),
            "l": pa.array([2**62, 0, -(2**63)], pa.int64()),
            "f": [1.5, None, -0.25],
            "dec": pa.array(
                [
                    decimal.Decimal("123456789012345678901234567890123.45"),
                    None,
                    decimal.Decimal("-0.01"),
                ],
                pa.decimal128(38, 2),
            ),
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), None]),
            "ts": pa.array(
                [T0 + dt.timedelta(microseconds=1), T0 - dt.timedelta(microseconds=1), None],
                pa.timestamp("us", "UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2024, 5, 6, 7, 8, 9, 999999), None, None], pa.timestamp("us")
            ),
            "s": ["b", "a", None],
            "b": [True, False, None],
            "bin": [b"\x00", None, b"\xff"],
            "st": pa.array(
                [{"x": 1, "y": {"z": "q"}}, None, {"x": None, "y": None}],
                pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.string())]))]),
            ),
            "li": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
            "m": pa.array([[("k", 1)], None, None], pa.map_(pa.string(), pa.int32())),
            "void": pa.nulls(3),
        }
    )
    stats = stats_of(table)
    assert stats["numRecords"] == 3
    assert stats["minValues"] == {
        "i": -7,
        "l": -(2**63),
        "f": -0.25,
        "dec": -0.01,
        "d": "0001-01-01",
        "ts": "2023-12-31T23:59:59.999Z",
        "ntz": "2024-05-06T07:08:09.999",
        "s": "a",
        "b": False,
        "st": {"x": 1, "y": {"z": "q"}},
    }
    assert stats["maxValues"] == {
        "i": 3,
        "l": 2**62,
        "f": 1.5,
        "dec": float("123456789012345678901234567890123.45"),
        "d": "9999-12-31",
        "ts": "2024-01-01T00:00:00.001Z",
        "ntz": "2024-05-06T07:08:10.000",
        "s": "b",
        "b": True,
        "st": {"x": 1, "y": {"z": "q"}},
    }
    assert stats["nullCount"] == {
        "i": 1,
        "l": 0,
        "f": 1,
        "dec": 1,
        "d": 1,
        "ts": 1,
        "ntz": 2,
        "s": 1,
        "b": 1,
        "bin": 1,
        "st": {"x": 2, "y": {"z": 2}},
        "void": 3,
    }
    # decimals keep every digit in the JSON text
    text = file_stats(pq.read_metadata(_buffer(table)), table.schema)
    assert '"dec":123456789012345678901234567890123.45' in text


def _buffer(table: pa.Table, **write: Any) -> io.BytesIO:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **write)
    return io.BytesIO(buffer.getvalue())


def bounds(values: list[Any], type: pa.DataType | None = None, **write: Any) -> tuple[Any, Any]:
    """(min, max) of a one-column file of ``values`` (None where the stats give none)."""
    stats = stats_of(pa.table({"v": pa.array(values, type)}), **write)
    return stats.get("minValues", {}).get("v"), stats.get("maxValues", {}).get("v")


def test_long_strings_are_cut_safely() -> None:
    high = "m" + "z" * 31 + "tail"
    low, top = bounds(["a" * 40, high, "b"])
    assert low == "a" * 32
    assert top == "m" + "z" * 30 + "{"  # the last 'z' raised to the next character
    assert top > high
    assert bounds(["\ud7ff" * 40])[1] == "\ud7ff" * 31 + "\ue000"  # no surrogates
    assert bounds(["x" + "\U0010ffff" * 40])[1] == "y"
    # nothing is above a run of U+10FFFF: no maximum, so no bounds in the file at all
    assert bounds(["\U0010ffff" * 33, "x"]) == (None, None)
    assert bounds(["short", "é" * 32]) == ("short", "é" * 32)


def test_strings_too_long_for_parquet_statistics_have_no_bounds() -> None:
    # parquet-cpp writes no statistics for a row group with a value over 4 KiB; with other
    # row groups that have them, the file's bounds are unknown, not those groups' bounds
    stats = stats_of(pa.table({"s": ["b", "a" * 5000, "c", "d"]}), row_group_size=2)
    assert "minValues" not in stats and "maxValues" not in stats
    assert stats["nullCount"] == {"s": 0}
    # the bounds parquet does write are exact values, never cut ones
    exact = "q" * 4000
    assert bounds([exact + "a", exact + "b"]) == ("q" * 32, "q" * 31 + "r")


def test_float_bounds_leave_out_nan_and_infinity() -> None:
    assert bounds([1.0, -2.0, 0.1]) == (-2.0, 1.0)
    assert bounds([1.0, float("inf")]) == (None, None)
    assert bounds([float("-inf"), 3.0]) == (None, None)
    assert bounds([-0.0, 0.0], pa.float32()) == (-0.0, 0.0)
    assert bounds([0.1], pa.float32()) == (pytest.approx(0.1), pytest.approx(0.1))
    # a column where the part wrote a NaN (parquet leaves NaN out of its bounds)
    stats = stats_of(pa.table({"n": [float("nan"), 1.0], "i": [1, 2]}), nan_columns=["n"])
    assert "minValues" not in stats and stats["nullCount"] == {"n": 0, "i": 0}
    # a float inside a struct: NaNs there are not tracked, so no bounds for it
    nested = pa.table({"st": pa.array([{"x": 1.0, "y": 2}])})
    assert stats_of(nested)["minValues"] == {"st": {"y": 2}}


def test_timestamp_bounds_round_outwards() -> None:
    type = pa.timestamp("us", "UTC")
    at = T0 + dt.timedelta(milliseconds=5)
    assert bounds([at], type) == ("2024-01-01T00:00:00.005Z", "2024-01-01T00:00:00.005Z")
    assert bounds([at + dt.timedelta(microseconds=1)], type) == (
        "2024-01-01T00:00:00.005Z",
        "2024-01-01T00:00:00.006Z",
    )
    before = dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert bounds([before], type) == ("1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00.000Z")
    naive = dt.datetime(2024, 2, 29, 23, 59, 59, 999500)
    assert bounds([naive], pa.timestamp("us")) == (
        "2024-02-29T23:59:59.999",
        "2024-03-01T00:00:00.000",
    )
    # a maximum that rounds past year 9999 cannot be written: no bounds
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert bounds([last], pa.timestamp("us")) == (None, None)


def test_row_groups_combine_and_all_null_groups_do_not_hide_bounds() -> None:
    table = pa.table({"v": [None, None, 5, 1, 9, None], "w": pa.array([None] * 6, pa.int64())})
    stats = stats_of(table, row_group_size=2)
    assert stats["minValues"] == {"v": 1} and stats["maxValues"] == {"v": 9}
    assert stats["nullCount"] == {"v": 3, "w": 6}


def test_columns_without_statistics() -> None:
    # one column without statistics: no bounds for the file (see _bounded_everywhere)
    stats = stats_of(pa.table({"a": [1, 2], "b": [3, 4]}), write_statistics=["a"])
    assert "minValues" not in stats and stats["nullCount"] == {"a": 0}
    # a binary column never has bounds, and does not take the others' away
    stats = stats_of(pa.table({"a": [1, 2], "b": [b"x", b"y"]}))
    assert stats["minValues"] == {"a": 1} and stats["nullCount"] == {"a": 0, "b": 0}


def test_num_indexed_cols() -> None:
    table = pa.table({"a": [1], "st": pa.array([{"x": 1, "y": 2}]), "c": [[3]], "d": [b"x"]})
    buffer = _buffer(table)
    stats = json.loads(file_stats(pq.read_metadata(buffer), table.schema, num_indexed_cols=2))
    assert stats["minValues"] == {"a": 1, "st": {"x": 1}}
    assert stats["nullCount"] == {"a": 0, "st": {"x": 0}}
    # an integer column left out is a column without bounds: none for the file
    table = pa.table({"a": [1], "b": [2]})
    stats = json.loads(
        file_stats(pq.read_metadata(_buffer(table)), table.schema, num_indexed_cols=1)
    )
    assert "minValues" not in stats


# --- readers skipping files by the statistics -------------------------------------------------


@dataclass
class Filter:
    """One filter in each reader's language."""

    arrow: pc.Expression
    polars: pl.Expr
    sql: str
    dnf: tuple[str, str, Any] | None = None  # for to_pyarrow_table(filters=[...])


def write_table(
    folder: Path, parts: Sequence[pa.Table], partition_by: tuple[str, ...] = ()
) -> list[AddFile]:
    schema = delta_arrow_schema(parts[0].schema)
    writer = DeltaPartWriter(DeltaTarget(str(folder)), schema, partition_by)
    files: list[AddFile] = []
    for index, part in enumerate(parts):
        reader = pa.RecordBatchReader.from_batches(part.schema, part.to_batches())
        files += writer.write(reader, mb.PartContext(0, index, len(parts), "q")).files
    create_table_with_add_actions(
        str(folder),
        Schema.from_arrow(schema),
        [f.to_action() for f in files],
        partition_by=list(partition_by) or None,
    )
    return files


def ids(table: Any) -> list[int]:
    return sorted(pa.table(table).column("id").to_pylist())


READERS: dict[str, Callable[[Path, Filter], list[int] | None]] = {
    "dataset": lambda folder, f: ids(
        DeltaTable(str(folder)).to_pyarrow_dataset().to_table(filter=f.arrow)
    ),
    "filters": lambda folder, f: (
        None if f.dnf is None else ids(DeltaTable(str(folder)).to_pyarrow_table(filters=[f.dnf]))
    ),
    "datafusion": lambda folder, f: ids(
        QueryBuilder()
        .register("t", DeltaTable(str(folder)))
        .execute(f"select * from t where {f.sql}")
        .read_all()
    ),
    "polars": lambda folder, f: sorted(
        pl.scan_delta(str(folder)).filter(f.polars).collect()["id"].to_list()
    ),
}


def assert_no_rows_lost(
    folder: Path, rows: pa.Table, filters: Sequence[Filter], skip: Sequence[str] = ()
) -> None:
    """Each reader (but ``skip``) finds the rows the filter matches in memory."""
    frame = pl.from_arrow(rows)
    assert isinstance(frame, pl.DataFrame)
    matching = 0
    for f in filters:
        in_arrow = ids(ds.dataset(rows).to_table(filter=f.arrow))
        in_polars = sorted(frame.filter(f.polars)["id"].to_list())
        for name, read in READERS.items():
            if name in skip:
                continue
            found = read(folder, f)
            if found is None:
                continue
            # Arrow compares NaN as false; Polars and DataFusion order NaN above every number
            expected = in_arrow if name in ("dataset", "filters") else in_polars
            assert found == expected, f"{name} with {f.sql}: {found} != {expected}"
        matching += bool(in_arrow or in_polars)
    assert matching >= len(filters) // 2, "most filters should match rows: not boundaries"


def boundary_filters(
    column: str, values: Sequence[Any], type: pa.DataType, sql: Callable[[Any], str]
) -> list[Filter]:
    """==, >=, <=, > and < at each given value, in every reader's language."""
    result = []
    field = pc.field(column)
    for value in values:
        lit = pa.scalar(value, type)
        polars_lit = pl.lit(value) if not isinstance(value, str) else pl.lit(value, dtype=pl.String)
        for op, arrow, polars in (
            ("=", field == lit, pl.col(column) == polars_lit),
            (">=", field >= lit, pl.col(column) >= polars_lit),
            ("<=", field <= lit, pl.col(column) <= polars_lit),
            (">", field > lit, pl.col(column) > polars_lit),
            ("<", field < lit, pl.col(column) < polars_lit),
        ):
            result.append(Filter(arrow, polars, f"{column} {op} {sql(value)}", (column, op, value)))
    return result


def two_parts(
    column: str, low: list[Any], high: list[Any], type: pa.DataType
) -> tuple[pa.Table, list[pa.Table]]:
    first = pa.table({"id": list(range(len(low))), column: pa.array(low, type)})
    second = pa.table(
        {"id": list(range(len(low), len(low) + len(high))), column: pa.array(high, type)}
    )
    return pa.concat_tables([first, second]), [first, second]


def test_integer_bounds(tmp_path: Path) -> None:
    rows, parts = two_parts("v", [-5, 0, 7], [8, 100, 2**63 - 1], pa.int64())
    write_table(tmp_path, parts)
    filters = boundary_filters("v", [7, 8, 100, 2**63 - 1, -5], pa.int64(), str)
    assert_no_rows_lost(
        tmp_path, rows, [f for f in filters if not f.sql.startswith(("v < -5", "v > 9223"))]
    )


def _ts_sql(value: dt.datetime) -> str:
    if value.tzinfo is None:
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    return f"TIMESTAMP '{value.astimezone(UTC).replace(tzinfo=None).isoformat()}Z'"


@pytest.mark.parametrize("zone", [UTC, None], ids=["timestamp", "timestamp_ntz"])
def test_timestamp_bounds_keep_microseconds(tmp_path: Path, zone: dt.timezone | None) -> None:
    base = dt.datetime(2024, 1, 1, tzinfo=zone)
    low = [
        base - dt.timedelta(microseconds=1500),
        base + dt.timedelta(milliseconds=9, microseconds=500),
    ]
    high = [
        base + dt.timedelta(milliseconds=10, microseconds=1),
        base + dt.timedelta(seconds=5, microseconds=999),
    ]
    type = pa.timestamp("us", "UTC" if zone else None)
    rows, parts = two_parts("ts", low, high, type)
    files = write_table(tmp_path, parts)
    # the first file's maximum, 00:00:00.009500, is written rounded up to .010
    stats = json.loads(files[0].stats)
    assert stats["maxValues"]["ts"] == (
        "2024-01-01T00:00:00.010Z" if zone else "2024-01-01T00:00:00.010"
    )
    assert stats["minValues"]["ts"] == (
        "2023-12-31T23:59:59.998Z" if zone else "2023-12-31T23:59:59.998"
    )
    probes = [
        low[1],
        low[1] - dt.timedelta(microseconds=1),
        base + dt.timedelta(milliseconds=9, microseconds=1),
        low[0],
        low[0] + dt.timedelta(microseconds=1),
        high[0],
        high[1],
    ]
    filters = boundary_filters("ts", probes, type, _ts_sql)
    assert_no_rows_lost(tmp_path, rows, filters)
    # The readers do skip by these bounds: with the first file's maximum said to be .008 they
    # lose the row at .009500 for a filter just above .009. (A maximum cut to .009, as
    # delta-rs's own writer writes it, loses nothing: these readers widen a timestamp maximum
    # by a millisecond.)
    cut = json.loads(files[0].stats)
    cut["maxValues"]["ts"] = cut["maxValues"]["ts"].replace(".010", ".008")
    folder = tmp_path / "cut"
    recommit(tmp_path, folder, [dataclasses.replace(files[0], stats=json.dumps(cut)), files[1]])
    above = base + dt.timedelta(milliseconds=9, microseconds=1)
    probe = Filter(
        pc.field("ts") > pa.scalar(above, type), pl.col("ts") > above, f"ts > {_ts_sql(above)}"
    )
    assert READERS["polars"](tmp_path, probe) == [1, 2, 3]
    for name, read in READERS.items():
        assert read(folder, probe) in ([2, 3], None), name


def test_long_string_bounds(tmp_path: Path) -> None:
    prefix = "p" * 32
    low = [prefix + "a", prefix + "z" * 10, "a" * 33]
    high = [prefix + "\U0010ffff" + "x", "q" + "\U0010ffff" * 40, "zz"]
    rows, parts = two_parts("s", low, high, pa.string())
    write_table(tmp_path, parts)
    probes = [
        prefix + "z" * 10,
        prefix + "z" * 11,
        prefix + "a",
        prefix,
        prefix + "\U0010ffff" + "x",
        "q" + "\U0010ffff" * 40,
    ]
    filters = boundary_filters("s", probes, pa.string(), lambda v: "'" + v.replace("'", "''") + "'")
    assert_no_rows_lost(tmp_path, rows, filters)


def test_decimal_bounds(tmp_path: Path) -> None:
    type = pa.decimal128(38, 2)
    below = decimal.Decimal("123456789012345678901234567890123.44")
    big = decimal.Decimal("123456789012345678901234567890123.45")
    above = decimal.Decimal("123456789012345678901234567890123.46")
    low = [decimal.Decimal("-0.01"), below]
    high = [big, above]
    rows, parts = two_parts("v", low, high, type)
    write_table(tmp_path, parts)
    filters = boundary_filters(
        "v",
        [below, big, decimal.Decimal("-0.01")],
        type,
        lambda v: f"CAST('{v}' AS DECIMAL(38, 2))",
    )
    assert_no_rows_lost(tmp_path, rows, filters)


def test_float_bounds_with_nan_and_infinity(tmp_path: Path) -> None:
    rows, parts = two_parts("f", [1.0, float("nan"), 2.5], [float("inf"), 3.0, -0.0], pa.float64())
    files = write_table(tmp_path, parts)
    assert "minValues" not in json.loads(files[0].stats)  # a NaN: no bounds
    assert "minValues" not in json.loads(files[1].stats)  # infinity: no bounds
    filters = boundary_filters("f", [2.5, 3.0, 0.0, 1.0], pa.float64(), repr)
    # DataFusion orders NaN above every number but prunes row groups by parquet's statistics,
    # which leave NaN out: it misses the NaN row for "f > 2.5" even in a file without Delta
    # statistics, so it is not a check of these statistics here
    assert_no_rows_lost(tmp_path, rows, filters, skip=["datafusion"])


def test_boolean_bounds(tmp_path: Path) -> None:
    rows, parts = two_parts("b", [True, True, None], [False, None, False], pa.bool_())
    write_table(tmp_path, parts)
    filters = [
        Filter(
            pc.field("b") == value,
            pl.col("b") == value,
            f"b = {str(value).lower()}",
            ("b", "=", value),
        )
        for value in (True, False)
    ]
    filters.append(Filter(pc.field("b").is_null(), pl.col("b").is_null(), "b IS NULL"))
    filters.append(Filter(~pc.field("b"), ~pl.col("b"), "NOT b"))
    assert_no_rows_lost(tmp_path, rows, filters)


def test_date_and_nested_bounds(tmp_path: Path) -> None:
    low = [{"d": dt.date(2024, 1, 1), "n": 1}, {"d": dt.date(2024, 1, 31), "n": 5}]
    high = [{"d": dt.date(2024, 2, 1), "n": 6}, None]
    type = pa.struct([("d", pa.date32()), ("n", pa.int32())])
    rows, parts = two_parts("st", low, high, type)
    write_table(tmp_path, parts)
    filters = []
    for value in [5, 6, 1]:
        filters.append(
            Filter(
                pc.field("st", "n") == value,
                pl.col("st").struct.field("n") == value,
                f"st['n'] = {value}",
            )
        )
        filters.append(
            Filter(
                pc.field("st", "n") > value - 1,
                pl.col("st").struct.field("n") > value - 1,
                f"st['n'] > {value - 1}",
            )
        )
    for day in [dt.date(2024, 1, 31), dt.date(2024, 2, 1)]:
        filters.append(
            Filter(
                pc.field("st", "d") == pa.scalar(day),
                pl.col("st").struct.field("d") == day,
                f"st['d'] = DATE '{day}'",
            )
        )
    filters.append(
        Filter(
            pc.field("st", "n").is_null(),
            pl.col("st").struct.field("n").is_null(),
            "st['n'] IS NULL",
        )
    )
    assert_no_rows_lost(tmp_path, rows, filters)


def test_partitioned_table_statistics(tmp_path: Path) -> None:
    rows = pa.table(
        {
            "id": list(range(6)),
            "day": ["a", "a", "a", "b", "b", "b"],
            "v": [1.0, float("nan"), 3.0, 4.0, 5.0, 6.0],
            "ts": pa.array(
                [T0 + dt.timedelta(microseconds=i * 1001) for i in range(6)],
                pa.timestamp("us", "UTC"),
            ),
        }
    )
    files = write_table(tmp_path, [rows.slice(0, 3), rows.slice(3)], ("day",))
    for file in files:
        stats = json.loads(file.stats)
        # partition columns are not in the files
        assert stats["nullCount"] == {"id": 0, "v": 0, "ts": 0}
        # the first part wrote a NaN in column v: its files have no bounds
        assert ("maxValues" in stats) == (file.partition_values == (("day", "b"),))
    filters = boundary_filters(
        "ts",
        [T0 + dt.timedelta(microseconds=2002), T0 + dt.timedelta(microseconds=5005)],
        pa.timestamp("us", "UTC"),
        _ts_sql,
    )
    assert_no_rows_lost(tmp_path, rows, filters)
    # DataFusion prunes NaN rows by parquet's own statistics (see the float test)
    filters = boundary_filters("v", [3.0, 6.0], pa.float64(), repr)
    assert_no_rows_lost(tmp_path, rows, filters, skip=["datafusion"])


def recommit(source: Path, folder: Path, files: Sequence[AddFile]) -> None:
    """A new table at ``folder`` holding copies of ``files`` of the table at ``source``."""
    schema = DeltaTable(str(source)).schema()
    folder.mkdir()
    for file in files:
        (folder / file.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / file.path).write_bytes((source / file.path).read_bytes())
    create_table_with_add_actions(str(folder), schema, [f.to_action() for f in files])


def test_readers_do_skip_by_the_statistics(tmp_path: Path) -> None:
    rows, parts = two_parts("v", [1, 2, 3], [10, 11, 12], pa.int64())
    files = write_table(tmp_path / "good", parts)
    wrong = json.loads(files[1].stats)
    wrong["maxValues"]["v"] = 11  # claims a bound below the real maximum, 12
    bad = [files[0], dataclasses.replace(files[1], stats=json.dumps(wrong))]
    folder = tmp_path / "bad"
    folder.mkdir()
    for file in bad:
        (folder / file.path).write_bytes((tmp_path / "good" / file.path).read_bytes())
    schema = delta_arrow_schema(rows.schema)
    create_table_with_add_actions(
        str(folder), Schema.from_arrow(schema), [f.to_action() for f in bad]
    )
    probe = Filter(pc.field("v") == 12, pl.col("v") == 12, "v = 12", ("v", "=", 12))
    for name, read in READERS.items():
        assert read(tmp_path / "good", probe) == [5], name
        assert read(folder, probe) == [], f"{name} does not skip files by their statistics"

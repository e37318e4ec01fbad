from __future__ import annotations

import datetime
import decimal
import io
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, PartContext, WriteContext
from microbatch.errors import OptionError
from microbatch_console import ConsoleSink, ConsoleWriter, show_string
from microbatch_console._render import cell_text

RULE = "-" * 43
HEADER = RULE + "\nBatch: {}\n" + RULE + "\n"


def make_sink(**options: Any) -> ConsoleSink:
    parsed = ConsoleSink.options.parse(options, connector="console")
    return ConsoleSink(parsed)


def make_console(schema: pa.Schema, **options: Any) -> tuple[ConsoleWriter, io.StringIO]:
    """The stream writer of one run of a console sink printing into a string buffer."""
    sink = make_sink(**options)
    stream = io.StringIO()
    sink.stream = stream
    return sink.stream_writer(WriteContext(schema=schema)), stream


def deliver(sink: ConsoleWriter, batch_id: int, *parts: pa.Table) -> None:
    part_writer = sink.part_writer()
    messages = [
        part_writer.write(
            pa.RecordBatchReader.from_stream(part), PartContext(batch_id, index, len(parts))
        )
        for index, part in enumerate(parts)
    ]
    sink.commit(messages, batch_id)


SMALL = pa.table(
    {
        "timestamp": pa.array(
            [1_700_000_000_740_000, 1_700_000_000_990_000], pa.timestamp("us", tz="UTC")
        ),
        "value": pa.array([0, 1], pa.int64()),
        "word": ["hello", None],
    }
)


@pytest.mark.parametrize(
    ("options", "batch_id", "table"),
    [
        pytest.param(
            {},
            0,
            "+--------------------+-----+-----+\n"
            "|           timestamp|value| word|\n"
            "+--------------------+-----+-----+\n"
            "|2023-11-14 22:13:...|    0|hello|\n"
            "|2023-11-14 22:13:...|    1| NULL|\n"
            "+--------------------+-----+-----+\n",
            id="truncated-and-right-aligned",
        ),
        pytest.param(
            {"truncate": "false", "numRows": 1},
            7,
            "+----------------------+-----+-----+\n"
            "|timestamp             |value|word |\n"
            "+----------------------+-----+-----+\n"
            "|2023-11-14 22:13:20.74|0    |hello|\n"
            "+----------------------+-----+-----+\n"
            "only showing top 1 row\n",
            id="without-truncate-whole-and-left-aligned",
        ),
    ],
)
def test_prints_a_small_batch_like_spark(
    options: dict[str, Any], batch_id: int, table: str
) -> None:
    sink, out = make_console(SMALL.schema, **options)
    deliver(sink, batch_id, SMALL)
    assert out.getvalue() == HEADER.format(batch_id) + table + "\n"


def test_parts_of_a_batch_are_printed_together_in_order() -> None:
    schema = pa.schema([("n", pa.int64())])
    sink, out = make_console(schema, numRows=3)
    first = pa.table({"n": [1, 2]}, schema=schema)
    second = pa.table({"n": [3, 4, 5]}, schema=schema)
    deliver(sink, 2, first, second)
    assert out.getvalue() == (
        HEADER.format(2) + "+---+\n|  n|\n+---+\n|  1|\n|  2|\n|  3|\n+---+\n"
        "only showing top 3 rows\n\n"
    )


def test_an_empty_batch_prints_the_header_row() -> None:
    sink, out = make_console(SMALL.schema)
    sink.commit([], 3)
    assert out.getvalue() == (
        HEADER.format(3) + "+---------+-----+----+\n"
        "|timestamp|value|word|\n"
        "+---------+-----+----+\n"
        "+---------+-----+----+\n\n"
    )


def test_num_rows_zero_prints_no_rows() -> None:
    text = show_string(SMALL.select(["value"]), num_rows=0)
    assert text == "+-----+\n|value|\n+-----+\n+-----+\nonly showing top 0 rows\n"


def test_prints_to_sys_stdout_at_the_time_of_printing(capsys: pytest.CaptureFixture[str]) -> None:
    sink = make_sink().stream_writer(WriteContext(schema=SMALL.schema))
    deliver(sink, 0, SMALL)
    printed = capsys.readouterr().out
    assert printed.startswith(HEADER.format(0))
    assert "|hello|" in printed


def test_capabilities_and_options() -> None:
    capabilities = ConsoleSink.capabilities
    assert capabilities.output_modes == {OutputMode.APPEND, OutputMode.UPDATE, OutputMode.COMPLETE}
    assert not capabilities.needs_checkpoint
    sink = make_sink()
    assert (sink.num_rows, sink.truncate) == (20, True)
    assert sink.describe() == "ConsoleSink[numRows=20, truncate=true]"
    with pytest.raises(OptionError, match="numRows"):
        make_console(SMALL.schema, numRows=-1)
    with pytest.raises(OptionError, match="truncate"):
        make_console(SMALL.schema, truncate="sometimes")
    with pytest.raises(OptionError, match="did you mean 'numRows'"):
        make_console(SMALL.schema, numRow=3)


def test_long_text_and_control_characters() -> None:
    table = pa.table({"text": ["line one\nline two", "x" * 21, "y" * 20, "日本語"]})
    assert show_string(table) == (
        "+--------------------+\n"
        "|                text|\n"
        "+--------------------+\n"
        "|  line one\\nline two|\n"
        "|xxxxxxxxxxxxxxxxx...|\n"
        "|yyyyyyyyyyyyyyyyyyyy|\n"
        "|              日本語|\n"
        "+--------------------+\n"
    )


@pytest.mark.parametrize(
    ("value", "type_", "expected"),
    [
        (None, pa.int64(), "NULL"),
        (True, pa.bool_(), "true"),
        (1.0, pa.float64(), "1.0"),
        (1e20, pa.float64(), "1.0E20"),
        (-1.5e-7, pa.float64(), "-1.5E-7"),
        (12_345_678.0, pa.float64(), "1.2345678E7"),
        (float("nan"), pa.float64(), "NaN"),
        (float("-inf"), pa.float64(), "-Infinity"),
        (0.10000000149011612, pa.float32(), "0.1"),
        (decimal.Decimal("1.50"), pa.decimal128(5, 2), "1.50"),
        (b"ab\x00", pa.binary(), "[61 62 00]"),
        ([1, None], pa.list_(pa.int64()), "[1, NULL]"),
        ([("a", 1), ("b", None)], pa.map_(pa.string(), pa.int64()), "{a -> 1, b -> NULL}"),
        (
            {"x": 1, "y": [True]},
            pa.struct([("x", pa.int64()), ("y", pa.list_(pa.bool_()))]),
            "{1, [true]}",
        ),
        (datetime.date(2024, 2, 29), pa.date32(), "2024-02-29"),
        (datetime.datetime(2024, 1, 1, 12, 0, 0), pa.timestamp("us"), "2024-01-01 12:00:00"),
        (
            datetime.datetime(2024, 1, 1, 12, 0, 0, 500_000, tzinfo=datetime.UTC),
            pa.timestamp("us", tz="UTC"),
            "2024-01-01 12:00:00.5",
        ),
    ],
)
def test_cell_text(value: Any, type_: pa.DataType, expected: str) -> None:
    assert cell_text(value, type_) == expected


def test_nanosecond_timestamps_are_shown_to_the_microsecond() -> None:
    table = pa.table({"t": pa.array([1_000_001_999], pa.timestamp("ns"))})
    assert "|1970-01-01 00:00:01.000001|" in show_string(table, truncate=False)

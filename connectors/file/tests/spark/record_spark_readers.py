"""Read the cases of ``reader_cases.py`` with PySpark's JSON and CSV readers, and record them.

A development script, not a test: the tests compare the file source's reader with its
recordings without Spark. Run it from the repository root with a Python that has ``pyspark``
(and ``pyarrow``) installed, on Java 17::

    SPARK_VENV/bin/python connectors/file/tests/spark/record_spark_readers.py [--only NAME]

Each case's text is written to a file of its own and read with
``spark.read.format(fmt).schema(ddl).options(**options).load(path)`` in one local[1] session
whose time zone (``spark.sql.session.timeZone``), process ``TZ`` and JVM ``user.timezone`` are
all UTC. The result goes to ``recorded/<name>.json``: the case, the pyspark version, the column
types and the rows, or the error when the read fails. Datetime values never pass through
Python's datetime conversion: Spark turns them into integers first (``unix_micros``,
``unix_date``), which are exact, and this script formats those, then checks each against
Spark's own ``CAST(... AS STRING)`` of the column.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
sys.path.insert(0, str(HERE))
from reader_cases import CASES, ReaderCase, case_by_name  # noqa: E402

UNWRAPPED = re.compile(r"^FAILED_READ_FILE\b")
"""Conditions that only wrap the real error with the file's path; the error below them counts."""
QUIET_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")
"""Loggers that print each failed task's stack trace at ERROR."""


def spark_session() -> Any:
    """One quiet local[1] session, everything in UTC."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("microbatch-file-reader-recording")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    for name in QUIET_LOGGERS:  # the failed tasks of FAILFAST reads are expected
        log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    return spark


def exact_frame(frame: Any) -> Any:
    """``frame`` with datetimes as integers and decimals as text, so collecting is exact.

    TIMESTAMP becomes microseconds since the epoch, TIMESTAMP_NTZ too (cast to TIMESTAMP in a
    UTC session, which keeps its wall-clock value), DATE days since the epoch. Every column is
    kept, in order, so the reader parses the same columns as a plain read.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = []
    for field in frame.schema.fields:
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, T.TimestampType):
            column = F.unix_micros(column)
        elif isinstance(field.dataType, T.TimestampNTZType):
            column = F.unix_micros(column.cast("timestamp"))
        elif isinstance(field.dataType, T.DateType):
            column = F.unix_date(column)
        elif isinstance(field.dataType, T.DecimalType):
            column = column.cast("string")
        elif isinstance(field.dataType, T.MapType):
            column = F.map_entries(column)  # every entry, a repeated key too
        columns.append(column.alias(field.name))
    return frame.select(*columns)


DATETIMES = ("timestamp", "timestamp_ntz", "date")


def encode(value: Any, type_name: str) -> Any:
    """One collected value of ``exact_frame`` in the recordings' canonical form (README.md)."""
    if value is None:
        return None
    if type_name == "timestamp":
        return _timestamp_text(value) + "Z"
    if type_name == "timestamp_ntz":
        return _timestamp_text(value)
    if type_name == "date":
        return _date_text(value)
    if type_name in ("double", "float"):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if type_name.startswith("decimal") or type_name in ("string", "boolean"):
        return value
    if type_name in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if type_name == "binary" or type_name.startswith(("array<", "struct<", "map<")):
        return encode_nested(value, type_name)
    raise TypeError(f"no canonical encoding for Spark type {type_name}")


def encode_nested(value: Any, type_name: str) -> Any:
    """A BINARY, ARRAY, STRUCT or MAP value (or a value inside one) in canonical form: binary
    as base64 text, an array as a list, a struct as an object, a map as a list of
    ``[key, value]`` pairs in order (from ``map_entries``), a decimal as plain text; other
    values as :func:`encode` has them (datetimes inside are not supported)."""
    from pyspark.sql import types as T

    if value is None:
        return None
    data_type = T._parse_datatype_string(type_name)
    if isinstance(data_type, T.BinaryType):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(data_type, T.ArrayType):
        return [encode_nested(item, data_type.elementType.simpleString()) for item in value]
    if isinstance(data_type, T.StructType):
        return {
            f.name: encode_nested(value[f.name], f.dataType.simpleString())
            for f in data_type.fields
        }
    if isinstance(data_type, T.MapType):
        entries = value.items() if isinstance(value, dict) else [tuple(e) for e in value]
        return [[k, encode_nested(v, data_type.valueType.simpleString())] for k, v in entries]
    if isinstance(data_type, T.DecimalType):
        return format(value, "f")
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        raise TypeError("no canonical encoding for datetimes inside arrays, structs or maps")
    return encode(value, type_name)


def _date_text(days: int) -> str:
    """Days since 1970-01-01 as ISO text in the proleptic Gregorian calendar, for any year.

    Python's ``date`` stops at year 9999, so the civil date is computed here. Years outside
    0000-9999 get a sign (``+57386-01-01``), as ISO 8601's expanded years and Spark's own text.
    """
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return f"{year_text}-{month:02d}-{day:02d}"


def _timestamp_text(micros: int) -> str:
    """Microseconds since the epoch as ISO text without a zone, with 6 fraction digits."""
    days, rest = divmod(micros, 86_400_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    return f"{_date_text(days)}T{hours:02d}:{minutes:02d}:{seconds:02d}.{fraction:06d}"


def check_datetimes(frame: Any, types: list[str], rows: list[list[Any]]) -> None:
    """Fail unless the encoded datetimes are Spark's own text of them (cast to STRING, UTC)."""
    from pyspark.sql import functions as F

    wanted = [i for i, t in enumerate(types) if t in DATETIMES]
    if not wanted:
        return
    texts = frame.select(*(F.col(f"`{frame.columns[i]}`").cast("string") for i in wanted))
    for row, spark_row in zip(rows, texts.collect(), strict=True):
        for i, spark_value in zip(wanted, spark_row, strict=True):
            ours = row[i]
            if ours is not None and types[i] != "date":
                ours = ours.removesuffix("Z").replace("T", " ").rstrip("0").removesuffix(".")
            if ours != spark_value:
                raise AssertionError(f"{ours!r} is not Spark's {spark_value!r} in {row}")


def error_record(exc: BaseException, path: str) -> dict[str, Any]:
    """The failure as ``class`` and ``message`` of the first real error, and the whole chain."""
    chain = []
    java = getattr(exc, "java_exception", None)
    while java is not None:
        chain.append({"class": _condition(java), "message": _first_line(java.getMessage())})
        java = java.getCause()
    if not chain:
        condition = getattr(exc, "getCondition", lambda: None)()
        chain.append({"class": condition or type(exc).__name__, "message": _first_line(str(exc))})
    where = re.compile(rf"(file:(//)?)?{re.escape(path)}")
    for link in chain:
        link["message"] = where.sub("<path>", link["message"])
    real = next((link for link in chain if not UNWRAPPED.match(link["class"])), chain[0])
    return {**real, "chain": chain}


def _condition(java: Any) -> str:
    """A Java exception's error condition, or its class name when it has none."""
    for method in ("getCondition", "getErrorClass"):
        try:
            condition = getattr(java, method)()
        except Exception:  # py4j: no such method on this exception class
            continue
        if condition:
            return str(condition)
    return str(java.getClass().getName())


def _first_line(message: str | None) -> str:
    return (message or "").strip().splitlines()[0] if (message or "").strip() else ""


def record_case(spark: Any, case: ReaderCase, work: Path, version: str) -> dict[str, Any]:
    """Read one case with Spark; the recording as plain data."""
    path = work / f"{case.name}.{case.format}"
    path.write_bytes(case.data())
    frame = spark.read.format(case.format).schema(case.schema).options(**case.options)
    frame = frame.load(str(path))
    types = [field.dataType.simpleString() for field in frame.schema.fields]
    result: dict[str, Any] = {**case.to_dict(), "pyspark": version}
    result["columns"] = [field.name for field in frame.schema.fields]
    result["types"] = types
    try:
        exact = [list(row) for row in exact_frame(frame).collect()]
    except Exception as exc:  # a FAILFAST read, or anything else Spark refuses
        del result["columns"], result["types"]
        result["error"] = error_record(exc, str(path))
        return result
    rows = [[encode(v, t) for v, t in zip(row, types, strict=True)] for row in exact]
    check_datetimes(frame, types, rows)
    result["rows"] = rows
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="record only this case (repeatable)"
    )
    args = parser.parse_args()
    cases = [case_by_name(name) for name in args.only] if args.only else CASES
    os.environ["TZ"] = "UTC"
    time.tzset()

    import pyspark

    spark = spark_session()
    RECORDED.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spark-readers-") as work:
        for case in cases:
            result = record_case(spark, case, Path(work), pyspark.__version__)
            text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
            (RECORDED / f"{case.name}.json").write_text(text, encoding="utf-8")
            if "error" in result:
                print(f"{case.name}: error {result['error']['class']}")
            else:
                print(f"{case.name}: {len(result['rows'])} rows")
    spark.stop()
    if not args.only:
        known = {f"{case.name}.json" for case in CASES}
        for stale in sorted(p for p in RECORDED.glob("*.json") if p.name not in known):
            stale.unlink()
            print(f"removed {stale.name}: no such case")
    print(f"recorded {len(cases)} cases into {RECORDED} (pyspark {pyspark.__version__})")


if __name__ == "__main__":
    main()

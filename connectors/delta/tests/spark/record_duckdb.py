"""Read tables written by the ``delta`` sink with DuckDB's ``delta_scan``, and record it.

A development script, not a test, like ``record_spark.py``: ``tests/test_readers_delta.py``
compares with its recording (``recorded/duckdb_rows.json``) without DuckDB's extension. The
project's DuckDB cannot load the ``delta`` extension here (it is not downloadable from
DuckDB's extension site); a Python with ``duckdb`` and a matching ``delta`` extension file can,
for example ``pip install duckdb==1.5.5 duckdb-extension-delta==1.5.5 pytz`` in a virtualenv
of its own::

    .venv/bin/python connectors/delta/tests/spark/record_duckdb.py \\
        --duckdb-python /path/to/duck-venv/bin/python --extension /path/to/delta.duckdb_extension

It writes the reader table and the merged table with the sink (``tests/scripts/reader_table.py``)
and, in a child process of ``--duckdb-python``, reads each with ``delta_scan``: every row, the
column types DuckDB sees, and the filtered reads of ``record_spark.FILTERS``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
sys.path.insert(0, str(HERE.parent / "scripts"))
import reader_table  # noqa: E402

FILTERS = {
    "region": "region = 'é=%#?'",
    "null region": "region IS NULL",
    "day": "day = DATE '2024-03-01'",
    "id range": "id BETWEEN 40 AND 43",
    "timestamp": "ts > TIMESTAMPTZ '2024-02-29 00:00:30+00'",
    "decimal null": "amount IS NULL",
    "local timestamp": "local_ts < TIMESTAMP '1999-12-31 23:20:00'",
    "long string": "note >= 'row 5'",
}


def duckdb_read(con: Any, path: str, filters: dict[str, str]) -> dict[str, Any]:
    scan = f"delta_scan('{path}')"
    cursor = con.execute(f"SELECT * FROM {scan}")
    names = [column[0] for column in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    types = {
        name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
    }
    return {
        "rows": reader_table.plain_rows(rows),
        "types": types,
        "filtered_ids": {
            name: [
                r[0]
                for r in con.execute(f"SELECT id FROM {scan} WHERE {text} ORDER BY id").fetchall()
            ]
            for name, text in filters.items()
        },
    }


def duckdb_main(work: str, extension: str, out: str) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    con.execute("SET TimeZone = 'UTC'")
    result = {
        "duckdb": duckdb.__version__,
        "tables": {
            "reader": duckdb_read(con, f"{work}/reader", FILTERS),
            "merged": duckdb_read(con, f"{work}/merged", {}),
        },
    }
    Path(out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duckdb-python", required=True, help="a Python with duckdb (and pytz)")
    parser.add_argument("--extension", required=True, help="the delta.duckdb_extension file")
    parser.add_argument("--duckdb-side", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.duckdb_side:
        duckdb_main(args.duckdb_side[0], args.extension, args.duckdb_side[1])
        return
    work = Path(tempfile.mkdtemp(prefix="delta-duckdb-"))
    reader_table.write_table(work / "reader", work / "reader-checkpoint")
    reader_table.write_merged_table(work / "merged", work / "merged-checkpoint")
    out = work / "duckdb.json"
    command = [args.duckdb_python, __file__, "--duckdb-python", args.duckdb_python]
    command += ["--extension", args.extension, "--duckdb-side", str(work), str(out)]
    subprocess.run(command, check=True, env={**os.environ, "TZ": "UTC"})
    result = json.loads(out.read_text(encoding="utf-8"))
    RECORDED.mkdir(exist_ok=True)
    (RECORDED / "duckdb_rows.json").write_text(
        json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"recorded into {RECORDED} (duckdb {result['duckdb']})")


if __name__ == "__main__":
    main()

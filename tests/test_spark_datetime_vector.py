"""DatetimeParser's vectorised path (pyarrow compute) against its per-value path, which is the
reference: the same values, row by row, and the rows each path takes."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch.spark_datetime import DatetimeKind, DatetimeParser

sys.path.insert(0, str(Path(__file__).parent))
from _spark_datetime_default_cases import (
    DATE_DEFAULT,
    NTZ_DEFAULT,
    TIMESTAMP_DEFAULT,
)
from _spark_datetime_pattern_cases import DATE_PATTERN, NTZ_PATTERN, TIMESTAMP_PATTERN
from _spark_datetime_testing import numbers, spark_value


def _groups() -> dict[tuple[DatetimeKind, str | None, str], list[tuple[str, str | None]]]:
    groups: dict[tuple[DatetimeKind, str | None, str], list[tuple[str, str | None]]] = {}
    tables: list[tuple[DatetimeKind, list[Any]]] = [
        ("timestamp", [(None, *row) for row in TIMESTAMP_DEFAULT] + TIMESTAMP_PATTERN),
        ("timestamp_ntz", [(None, *row) for row in NTZ_DEFAULT] + NTZ_PATTERN),
        ("date", [(None, *row) for row in DATE_DEFAULT] + DATE_PATTERN),
    ]
    for kind, rows in tables:
        for pattern, zone, text, shown in rows:
            groups.setdefault((kind, pattern, zone), []).append((text, shown))
    return groups


def test_a_batch_mixing_both_paths_gives_each_row_its_own_value() -> None:
    """One array per option set: rows parsed vectorised and one by one land in place."""
    for (kind, pattern, zone), rows in _groups().items():
        texts = [None, *(text for text, _ in rows), None]
        values, bad = DatetimeParser(kind, pattern, zone).parse(pa.array(texts))
        want = [None, *(spark_value(kind, shown) for _, shown in rows), None]
        assert numbers(kind, values) == want, (kind, pattern, zone)
        assert bad.to_pylist() == [False, *(w is None for w in want[1:-1]), False]


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]  # fmt: skip
GENERATED = [
    ("timestamp", "yyyy-MM-dd HH:mm:ss", "America/New_York"),
    ("timestamp", "yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]", "Europe/Paris"),
    ("timestamp", "yyyy-MM-dd[ HH:mm[:ss]]", "UTC"),
    ("timestamp", "d/M/y", "UTC"),
    ("timestamp", "MM/dd/yyyy hh:mm a", "Asia/Kolkata"),
    ("timestamp", "yyyyMMddHHmmssS", "UTC"),
    ("timestamp", "dd-MMM-yy kk:mm", "UTC"),
    ("timestamp", "dd MMMM yyyy KK a", "UTC"),
    ("timestamp", "yyyy-MM-dd'T'HH:mm:ssx", "UTC"),
    ("timestamp", "yyyy-MM-dd'T'HH:mm:ssXXXXX", "UTC"),
    ("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSSSSZ", "UTC"),
    ("timestamp", "yyyyy-M-d H:m:s", "UTC"),
    ("timestamp_ntz", "yyyy-MM-dd HH:mm:ss[XXX]", "UTC"),
    ("date", "dd.MM.yyyy HH:mm", "UTC"),
    ("timestamp", None, "America/New_York"),
    ("timestamp_ntz", None, "UTC"),
    ("date", None, "UTC"),
]


VALUES = {
    "y": [2020, 1, 0, 9999, 12345, 2038, 1582],
    "M": [1, 2, 3, 10, 11, 12, 13, 0],
    "d": [1, 8, 25, 28, 29, 30, 31, 32, 0],
    "H": [0, 2, 9, 12, 23, 24],
    "h": [1, 9, 12, 13, 0],
    "K": [0, 5, 11, 12],
    "k": [1, 12, 24, 0],
    "m": [0, 30, 59, 60],
    "s": [0, 30, 59, 60],
}


def _generated_text(pattern: str, rng: random.Random) -> str:
    """Text shaped like the pattern, with values and widths that are often out of range."""

    def field(run: str) -> str:
        c, n = run[0], len(run)
        if c == "'":
            return run[1:-1] or "'"
        if c in "yMdHhKkms" and not (c == "M" and n > 2):
            value = rng.choice(VALUES[c])
            text = f"{value:0{n if rng.random() < 0.8 else 1}d}"
            return text[-2:] if run == "yy" else text
        if c == "M":
            name = MONTHS[rng.randrange(12)]
            return rng.choice([name, name.upper(), name[:3]])
        if c == "S":
            return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, n + 1)))
        if c == "a":
            return rng.choice(["AM", "pm", "Pm"])
        if c in "XxZ":
            return rng.choice(["Z", "z", "+01:00", "+0100", "+01", "-08:00", "+0030", "+19:00"])
        return run

    if pattern == "":  # no pattern: ISO-like text
        pattern = rng.choice(
            [
                "yyyy-MM-dd'T'HH:mm:ss.SSSX",
                "yyyy-MM-dd HH:mm",
                "yyyy-M-d",
                " yyyy-MM-dd'T'HH:mm:ss ",
            ]
        )
    out, skipping = [], 0
    for match in re.finditer(r"'[^']*'|([A-Za-z])\1*|\[|\]|.", pattern):
        run = match.group(0)
        if run == "[":
            skipping += skipping or rng.random() < 0.4
        elif run == "]":
            skipping = max(0, skipping - 1)
        elif not skipping:
            out.append(field(run))
    text = "".join(out)
    if text and rng.random() < 0.15:  # a wrong character somewhere
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["", "0", " ", "-"]) + text[i + 1 :]
    return text


@pytest.mark.parametrize(("kind", "pattern", "zone"), GENERATED)
def test_vectorised_and_per_value_parsing_agree(
    kind: DatetimeKind, pattern: str | None, zone: str
) -> None:
    rng = random.Random(f"{kind}{pattern}{zone}")
    texts = [_generated_text(pattern or "", rng) for _ in range(500)]
    parser = DatetimeParser(kind, pattern, zone)
    values, bad = parser.parse(pa.array(texts))
    reference = [parser._parse_value(text) for text in texts]
    assert numbers(kind, values) == reference
    assert bad.to_pylist() == [value is None for value in reference]
    assert 5 < sum(value is not None for value in reference) < 500  # both kinds are covered


def _iso_rows(shapes: list[str], n: int) -> pa.Array:
    rows = [
        shapes[k % len(shapes)].format(m=1 + k % 12, d=1 + k % 24, h=k % 24, i=k % 60, f=k)
        for k in range(1000)
    ]
    return pa.array(rows * (n // 1000))


ZONED = ["2021-{m:02d}-{d:02d}T{h:02d}:{i:02d}:{i:02d}.{f:06d}Z", "2021-{m}-{d}T{h}:{i}:{i}+05:30"]
LOCAL = ["2021-{m:02d}-{d:02d} {h:02d}:{i:02d}:{i:02d}", "2021-{m}-{d}", "2021-{m}-{d}T{h:02d}"]


@pytest.mark.parametrize(
    ("kind", "pattern", "shapes", "n"),
    [
        ("timestamp", None, ZONED + LOCAL, 1_000_000),
        ("timestamp_ntz", None, LOCAL, 100_000),
        ("date", None, ZONED + LOCAL, 100_000),
        ("timestamp", "yyyy-MM-dd HH:mm:ss", LOCAL[:1], 100_000),
    ],
)
def test_iso_texts_are_parsed_without_the_per_value_path(
    monkeypatch: pytest.MonkeyPatch,
    kind: DatetimeKind,
    pattern: str | None,
    shapes: list[str],
    n: int,
) -> None:
    """No day in the rows has a daylight-saving change, so every row is vectorised."""

    def refuse(self: DatetimeParser, text: str) -> int | None:
        raise AssertionError(f"{text!r} was parsed one by one")

    values = _iso_rows(shapes, n)
    expected = [
        DatetimeParser(kind, pattern, "Europe/Paris").parse_one(t)
        for t in values[:1000].to_pylist()
    ]
    monkeypatch.setattr(DatetimeParser, "_parse_value", refuse)
    parsed, bad = DatetimeParser(kind, pattern, "Europe/Paris").parse(values)
    assert bad.true_count == 0
    assert parsed.slice(0, 1000).to_pylist() == expected
    assert parsed.slice(n - 1000).to_pylist() == expected

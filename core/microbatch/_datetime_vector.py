"""Vectorised parsing with pyarrow compute, for ISO-like text and common pattern shapes."""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from ._datetime_calendar import _DAY_S, _MAX_OFFSET, _MONTH_DAYS, _US, _Zone
from ._datetime_elements import (
    _ALPHA,
    _DIGIT,
    _Frac,
    _Item,
    _Lit,
    _Num,
    _Offset,
    _Optional,
    _Text,
)
from ._datetime_pattern import _NUMBER_KEYS


# --- vectorised parsing ----------------------------------------------------------------------
class _NoVector(Exception):
    """The pattern has a shape the vectorised path does not handle."""


_END = frozenset({"<end>"})
_HOUR_RANGES = (("hour", 0, 23), ("clock_hour", 1, 24), ("clock_ampm", 1, 12), ("hour_ampm", 0, 11))


class _Plan:
    """A regular expression with named groups, whose matches are parsed with Arrow compute."""

    def __init__(self, regex: str, roles: set[str], months: str = "", no_offset: str = "") -> None:
        self.regex, self.roles, self.no_offset = regex, roles, no_offset
        self.months = pa.array(months.split("|") if months else [], pa.string())


def _first(items: list[_Item], follow: frozenset[str]) -> frozenset[str]:
    """What the text of ``items`` may start with (``follow``: what comes after them)."""
    if not items:
        return follow
    if isinstance(items[0], _Optional):
        return _first(items[0].items, frozenset()) | _first(items[1:], follow)
    return items[0].first


def _overlap(a: frozenset[str], b: frozenset[str]) -> bool:
    def alpha(x: frozenset[str], y: frozenset[str]) -> bool:
        return x >= _ALPHA and any(len(c) == 1 and c.isalpha() for c in y)

    return bool(a & b) or alpha(a, b) or alpha(b, a)


def _re_char(c: str) -> str:
    return c if c.isalnum() or not c.isascii() else f"\\x{{{ord(c):02x}}}"


def _role(roles: set[str], role: str) -> str:
    if role in roles:
        raise _NoVector
    roles.add(role)
    return role


def _number_regex(num: _Num, follower: bool, roles: set[str]) -> str:
    if isinstance(num, _Frac):
        role, low, high = "frac", 1, num.high
    elif num.base:
        role, low, high = "year2", 2, 2
    elif num.key == "year":
        role, low, high = "year", num.low, max(num.low, 4)
    elif num.key in _NUMBER_KEYS.values() or num.key == "month":
        role, low, high = num.key, num.low, min(num.high, 2)
    else:
        raise _NoVector
    if follower:
        low = high = num.low
    return f"(?P<{_role(roles, role)}>\\d{{{low},{high}}})"


def _item_regex(item: _Item, roles: set[str], plan: dict[str, str]) -> str:
    if isinstance(item, _Lit):
        return "".join(map(_re_char, item.literal))
    if isinstance(item, _Text) and item.key in ("month", "ampm"):
        role = _role(roles, "month_name" if item.key == "month" else "ampm")
        if role == "month_name":
            plan["months"] = "|".join(n.lower() for n, _ in sorted(item.names, key=lambda x: x[1]))
        return f"(?P<{role}>{'|'.join(name for name, _ in item.names)})"
    if isinstance(item, _Offset):
        roles.update((_role(roles, "offset"), "oh"))
        plan["no_offset"] = item.no_offset
        colon = "\\x{3a}" if item.colon else ""
        letters = item.style.replace(":", "")
        body = r"(?P<oh>\d\d)"
        for group, letter in (("om", letters[3:4]), ("osec", letters[5:6])):
            if letter:
                part = f"{colon}(?P<{group}>\\d\\d)"
                body += part if letter.isupper() else f"(?:{part})?"
                roles.add(group)
        zero = "".join(map(_re_char, item.no_offset))
        return f"(?:(?P<oz>{zero})|(?P<ot>(?P<os>[+-]){body}))"
    raise _NoVector


def _sequence_regex(
    items: list[_Item], follow: frozenset[str], roles: set[str], plan: dict[str, str]
) -> str:
    """Optional sections only at the end, and numbers never followed by a digit."""
    k = next((i for i, it in enumerate(items) if isinstance(it, _Optional)), len(items))
    tail = ""
    for item in reversed(items[k:]):
        if not isinstance(item, _Optional):
            raise _NoVector
        first = _first(item.items, frozenset())
        if _overlap(first, follow):
            raise _NoVector
        tail = f"(?:{_sequence_regex(item.items, follow, roles, plan)})?{tail}"
        follow = follow | first
    out: list[str] = []
    i = 0
    while i < k:
        j = i + 1
        while isinstance(items[i], _Num) and j < k and isinstance(items[j], _Num):
            j += 1
        after = _first(items[j:k], follow)
        if isinstance(items[i], _Num | _Offset) and after >= _DIGIT:
            raise _NoVector
        run = [n for n in items[i:j] if isinstance(n, _Num)]
        if run:  # adjacent numbers: only the first may have a variable width
            if len(run) > 1 and (
                isinstance(run[0], _Frac) or any(n.low != n.high for n in run[1:])
            ):
                raise _NoVector
            out.extend(_number_regex(n, x > 0, roles) for x, n in enumerate(run))
        else:
            out.append(_item_regex(items[i], roles, plan))
        i = j
    return "".join(out) + tail


def _pattern_plan(items: list[_Item]) -> _Plan | None:
    roles: set[str] = set()
    plan: dict[str, str] = {}
    try:
        regex = _sequence_regex(items, _END, roles, plan)
    except _NoVector:
        return None
    if len(roles.intersection(role for role, _, _ in _HOUR_RANGES)) > 1:
        return None
    return _Plan(f"(?i)^{regex}\\z", roles, plan.get("months", ""), plan.get("no_offset", ""))


_WS = r"[\x00-\x20\x7f]*"
_ISO_DATE = r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
_ISO_TIME = (
    r"[T ](?P<hour>\d{1,2})(?::(?P<minute>\d{1,2})(?::(?P<second>\d{1,2})(?:\.(?P<frac>\d*))?{zone}"
    r")?)?"
)
_ISO_ZONE = r"(?: ?(?:(?P<oz>Z)|(?P<ot>(?P<os>[+-])(?P<oh>\d\d)(?::?(?P<om>\d\d))?)))?"
_DATE_ROLES = {"year", "month", "day"}
_TIME_ROLES = _DATE_ROLES | {"hour", "minute", "second", "frac"}
_DEFAULT_PLANS = {
    "timestamp": _Plan(
        f"^{_WS}{_ISO_DATE}(?:{_ISO_TIME.replace('{zone}', _ISO_ZONE)})?{_WS}\\z",
        _TIME_ROLES | {"offset", "oh", "om"}),
    "timestamp_ntz": _Plan(
        f"^{_WS}{_ISO_DATE}(?:{_ISO_TIME.replace('{zone}', '')})?{_WS}\\z", _TIME_ROLES),
    "date": _Plan(f"^{_WS}{_ISO_DATE}(?:[T ][\\s\\S]*|{_WS})\\z", _DATE_ROLES),
}  # fmt: skip
_I64 = pa.int64()
_EMPTY = pa.scalar("")
_NULL = pa.scalar(None, _I64)
_LENGTHS = pa.array(_MONTH_DAYS, _I64)


def _i(value: int) -> pa.Scalar:
    return pa.scalar(value, _I64)


def _within(values: pa.Array, low: int, high: int) -> pa.Array:
    return pc.and_(pc.greater_equal(values, _i(low)), pc.less_equal(values, _i(high)))


def _mod(values: pa.Array, n: int) -> pa.Array:
    return pc.subtract(values, pc.multiply(pc.divide(values, _i(n)), _i(n)))


def _divides(values: pa.Array, n: int) -> pa.Array:
    return pc.equal(_mod(values, n), _i(0))


def _vector_days(y: pa.Array, m: pa.Array, d: pa.Array) -> pa.Array:
    """Days since 1970-01-01 for years 0 to 9999 (civil-from-days arithmetic)."""
    early = pc.cast(pc.less_equal(m, _i(2)), _I64)
    yy = pc.add(pc.subtract(y, early), _i(400))
    era = pc.divide(yy, _i(400))
    yoe = pc.subtract(yy, pc.multiply(era, _i(400)))
    mp = pc.if_else(pc.greater(m, _i(2)), pc.subtract(m, _i(3)), pc.add(m, _i(9)))
    doy = pc.add(pc.divide(pc.add(pc.multiply(mp, _i(153)), _i(2)), _i(5)), pc.subtract(d, _i(1)))
    doe = pc.add(pc.multiply(yoe, _i(365)), pc.divide(yoe, _i(4)))
    doe = pc.add(pc.subtract(doe, pc.divide(yoe, _i(100))), doy)
    return pc.subtract(pc.add(pc.multiply(era, _i(146_097)), doe), _i(719_468 + 146_097))


def _zone_offsets(zone: _Zone, days: pa.Array) -> pa.Array | pa.Scalar:
    """Seconds east of UTC per local day; null on a day with a transition."""
    if zone.region is None:
        return _i(zone.fixed or 0)
    unique = pc.unique(days)
    offsets: list[int | None] = []
    for day in unique.to_pylist():
        start = None if day is None else zone.local_offset(day * _DAY_S)
        end = None if day is None else zone.local_offset(day * _DAY_S + _DAY_S - 1)
        offsets.append(start if start == end else None)
    return pa.array(offsets, _I64).take(pc.index_in(days, value_set=unique))


def _vector(plan: _Plan, values: pa.Array, kind: str, zone: _Zone) -> pa.Array:
    """Values of the rows the plan's regex matches and whose fields are valid, else null."""
    match = pc.extract_regex(values, plan.regex)
    roles = plan.roles
    checks = [pc.is_valid(match), pc.not_equal(values, _EMPTY)]
    zero = pc.multiply(pc.cast(checks[0], _I64), _i(0))

    def given(role: str) -> pa.Array:
        return pc.not_equal(match.field(role), _EMPTY)

    def number(role: str, low: int, high: int, default: int = 0) -> pa.Array:
        if role not in roles:
            return pc.add(zero, _i(default))
        value = pc.cast(pc.utf8_lpad(match.field(role), 1, "0"), _I64)  # "" (absent) is 0
        checks.append(pc.or_(pc.invert(given(role)), _within(value, low, high)))
        return pc.if_else(given(role), value, _i(default)) if default else value

    year = number("year", 0, 9999, 1970)
    if "year2" in roles:
        year = pc.if_else(given("year2"), pc.add(number("year2", 0, 99), _i(2000)), _i(1970))
    month = number("month", 1, 12, 1)
    if "month_name" in roles:
        found = pc.index_in(pc.utf8_lower(match.field("month_name")), value_set=plan.months)
        month = pc.fill_null(pc.add(pc.cast(found, _I64), _i(1)), _i(1))
    month = pc.if_else(_within(month, 1, 12), month, _i(1))  # checked; kept valid for take
    day = number("day", 1, 31, 1)
    leap = pc.and_(_divides(year, 4), pc.or_(pc.invert(_divides(year, 100)), _divides(year, 400)))
    february = pc.cast(pc.and_(leap, pc.equal(month, _i(2))), _I64)
    checks.append(pc.less_equal(day, pc.add(_LENGTHS.take(pc.subtract(month, _i(1))), february)))
    pm = pc.equal(pc.utf8_lower(match.field("ampm")), "pm") if "ampm" in roles else None
    noon = zero if pm is None else pc.if_else(pm, _i(12), _i(0))
    hour = noon
    for role, low, high in _HOUR_RANGES:
        if role in roles:
            value = _mod(number(role, low, high), 24 if high > 12 else 12)
            if high > 12 and pm is not None:  # an hour of the day and AM/PM must agree
                agree = pc.equal(pc.greater_equal(value, _i(12)), pm)
                checks.append(pc.or_(pc.invert(given("ampm")), agree))
            hour = pc.if_else(given(role), value if high > 12 else pc.add(value, noon), noon)
    micros = zero
    if "frac" in roles:
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(match.field("frac"), 6, "0"), 0, 6)
        micros = pc.cast(fraction, _I64)
    days = _vector_days(year, month, day)
    local = pc.add(pc.multiply(days, _i(_DAY_S)), pc.multiply(hour, _i(3600)))
    local = pc.add(
        local, pc.add(pc.multiply(number("minute", 0, 59), _i(60)), number("second", 0, 59))
    )
    offset = None
    if "offset" in roles:
        size = pc.add(pc.multiply(number("oh", 0, 23), _i(3600)), number("osec", 0, 59))
        size = pc.add(size, pc.multiply(number("om", 0, 59), _i(60)))
        checks.append(pc.less_equal(size, _i(_MAX_OFFSET)))
        if plan.no_offset[:1] == "+":  # java.time reads a text starting like it as zero offset
            checks.append(pc.invert(pc.starts_with(match.field("ot"), plan.no_offset)))
        has_offset = pc.or_(given("oz"), given("os"))
        if kind == "timestamp_ntz":
            checks.append(pc.invert(has_offset))
        signed = pc.if_else(pc.equal(match.field("os"), "-"), pc.negate(size), size)
        offset = pc.if_else(has_offset, signed, _NULL)
    ok = reduce(pc.and_, checks)
    if kind == "date":
        result = days
    elif kind == "timestamp_ntz":
        result = pc.add(pc.multiply(local, _i(_US)), micros)
    else:
        seconds = _zone_offsets(zone, pc.if_else(ok, days, _NULL))
        if offset is not None:
            seconds = pc.if_else(pc.is_null(offset), seconds, offset)
        result = pc.add(pc.multiply(pc.subtract(local, seconds), _i(_US)), micros)
    return pc.if_else(ok, result, _NULL)

"""Text without a pattern, read as Spark's ``CAST(text AS TIMESTAMP | TIMESTAMP_NTZ | DATE)``."""

from __future__ import annotations

from ._datetime_calendar import (
    _DAY_S,
    _INT_MAX,
    _INT_MIN,
    _date_ok,
    _days,
    _java_micros,
    _spark_zone,
    _Zone,
)


# --- text without a pattern (Spark's DateTimeUtils) -----------------------------------------
def _trim(raw: bytes) -> tuple[int, int]:
    start, end = 0, len(raw)
    while start < end and (raw[start] <= 0x20 or raw[start] == 0x7F):
        start += 1
    while end > start + 1 and (raw[end - 1] <= 0x20 or raw[end - 1] == 0x7F):
        end -= 1
    return start, end


def _segment_ok(i: int, digits: int) -> bool:
    if i == 0:
        return 4 <= digits <= 6
    return i == 6 or (digits <= 2 if i == 7 else 1 <= digits <= 2)


def _ts_fields(text: str) -> tuple[list[int], _Zone | None, bool] | None:
    """Spark's parseTimestampString: fields, zone and whether the text is a time only."""
    raw = text.encode()
    j, end = _trim(raw)
    if j == end:
        return None
    seg = [1, 1, 1, 0, 0, 0, 0, 0, 0]
    i = value = digits = fraction_digits = 0
    just_time = False
    sign = 0
    zone: str | None = None
    if raw[j] in b"+-":
        sign = -1 if raw[j] == 0x2D else 1
        j += 1
    while j < end:
        b = raw[j]
        if 0x30 <= b <= 0x39:
            fraction_digits += i == 6
            if i != 6 or digits < 6:
                value = value * 10 + b - 0x30
            digits += 1
            j += 1
            continue
        if j == 0 and b == 0x54:  # T
            just_time = True
            i += 3
        elif i < 2:
            if b == 0x2D or (i == 0 and b == 0x3A and not sign):
                k = i if b == 0x2D else 3
                if not _segment_ok(k, digits):
                    return None
                seg[k], value, digits = value, 0, 0
                just_time = just_time or b == 0x3A
                i = k + 1
            else:
                return None
        elif i in (2, 3, 4):
            if (i == 2 and b not in b" T") or (i > 2 and b != 0x3A) or not _segment_ok(i, digits):
                return None
            seg[i], value, digits = value, 0, 0
            i += 1
        elif i in (5, 6):
            if not _segment_ok(i, digits):
                return None
            seg[i], value, digits = value, 0, 0
            i += 1
            if not (b == 0x2E and i == 6):
                zone = raw[j:end].decode("utf-8", "replace")
                j = end - 1
            if i == 6 and b != 0x2E:
                i += 1
        else:
            return None
        j += 1
    if not _segment_ok(i, digits):
        return None
    seg[i] = value
    seg[6] *= 10 ** max(0, 6 - fraction_digits)
    seg[0] *= sign or 1
    parsed_zone = None
    if zone is not None:
        parsed_zone = _spark_zone(zone.strip("".join(map(chr, range(33)))))
        if parsed_zone is None:
            return None
    return seg, parsed_zone, just_time


def _cast_timestamp(text: str, zone: _Zone | None) -> int | None:
    """CAST(text AS TIMESTAMP) in ``zone``, or AS TIMESTAMP_NTZ when ``zone`` is None."""
    fields = _ts_fields(text)
    if fields is None:
        return None
    seg, parsed_zone, just_time = fields
    if zone is None and (parsed_zone is not None or just_time):
        return None
    zone = parsed_zone or zone
    y, mo, d = zone.today() if just_time and zone is not None else seg[:3]
    h, mi, s, micros = seg[3:7]
    if not _date_ok(y, mo, d) or h > 23 or mi > 59 or s > 59:
        return None
    local = _days(y, mo, d) * _DAY_S + h * 3600 + mi * 60 + s
    return _java_micros(local - (zone.local_offset(local) if zone else 0), micros)


def _cast_date(text: str) -> int | None:
    """Spark's stringToDate: days since 1970-01-01."""
    raw = text.encode()
    j, end = _trim(raw)
    if j == end:
        return None
    sign = 1
    if raw[j] in b"+-":
        sign = -1 if raw[j] == 0x2D else 1
        j += 1
    seg = [1, 1, 1]
    i = value = digits = 0
    while j < end and raw[j] not in b" T":
        b = raw[j]
        if i < 2 and b == 0x2D:
            if not (4 <= digits <= 7 if i == 0 else 1 <= digits <= 2):
                return None
            seg[i], value, digits = value, 0, 0
            i += 1
        elif 0x30 <= b <= 0x39:
            value, digits = value * 10 + b - 0x30, digits + 1
        else:
            return None
        j += 1
    if not (4 <= digits <= 7 if i == 0 else 1 <= digits <= 2) or (i < 2 and j < end):
        return None
    seg[i] = value
    y, m, d = sign * seg[0], seg[1], seg[2]
    days = _days(y, m, d) if _date_ok(y, m, d) else _INT_MAX + 1
    return days if _INT_MIN <= days <= _INT_MAX else None

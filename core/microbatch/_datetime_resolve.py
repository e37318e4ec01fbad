"""The fields a pattern parsed, resolved into a date or timestamp as java.time and Spark do."""

from __future__ import annotations

from ._datetime_calendar import (
    _DAY_S,
    _INT_MAX,
    _INT_MIN,
    _LONG_MAX,
    _LONG_MIN,
    _MAX_OFFSET,
    _US,
    _YEAR_LIMIT,
    _date_ok,
    _days,
    _java_micros,
    _leap,
    _Zone,
)
from ._datetime_elements import _State


# --- patterns: resolving parsed fields (java.time strict, then Spark's defaults) -------------
def _civil(days: int) -> tuple[int, int, int]:
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, doy - (153 * mp + 2) // 5 + 1


def _year_day(year: int, day: int) -> tuple[int, int, int] | None:
    if abs(year) > _YEAR_LIMIT or not 1 <= day <= 365 + _leap(year):
        return None
    return _civil(_days(year, 1, 1) + day - 1)


def _resolve(st: _State, kind: str, zone: _Zone) -> int | None:
    f = st.fields
    year = f.get("year")
    if "year_of_era" in f:
        if not 1 <= f["year_of_era"] <= _YEAR_LIMIT:
            return None
        if "era" in f:
            year = f["year_of_era"] if f["era"] else 1 - f["year_of_era"]
    hour, hour_ampm, ampm = f.get("hour"), f.get("hour_ampm"), f.get("ampm")
    if "clock_hour" in f:
        value = f["clock_hour"] % 24
        if not 1 <= f["clock_hour"] <= 24 or hour not in (None, value):
            return None
        hour = value
    if "clock_ampm" in f:
        value = f["clock_ampm"] % 12
        if not 1 <= f["clock_ampm"] <= 12 or hour_ampm not in (None, value):
            return None
        hour_ampm = value
    if ampm is not None and hour_ampm is not None:
        value = ampm * 12 + hour_ampm
        if not 0 <= hour_ampm <= 11 or hour not in (None, value):
            return None
        hour, ampm, hour_ampm = value, None, None
    month, day, day_of_year = f.get("month"), f.get("day"), f.get("day_of_year")
    ymd: tuple[int, int, int] | None = None
    if year is not None and month is not None and day is not None:
        if not _date_ok(year, month, day):
            return None
        ymd = (year, month, day)
        if day_of_year not in (None, _days(*ymd) - _days(year, 1, 1) + 1):
            return None
    elif year is not None and day_of_year is not None:
        ymd = _year_day(year, day_of_year)
        if ymd is None or month not in (None, ymd[1]):
            return None
    minute, second, nano = f.get("minute"), f.get("second"), f.get("nano")
    hms: tuple[int, int, int, int] | None = None
    if hour is not None and not (
        (minute is None and (second, nano) != (None, None))
        or (minute is not None and second is None and nano is not None)
    ):
        hms = (hour, minute or 0, second or 0, nano or 0)
        if not (0 <= hour <= 23 and 0 <= hms[1] <= 59 and 0 <= hms[2] <= 59):
            return None
        if ampm not in (None, int(hour >= 12)) or hour_ampm not in (None, hour % 12):
            return None
    else:
        for field, high in ((hour, 23), (minute, 59), (second, 59), (hour_ampm, 11)):
            if field is not None and not 0 <= field <= high:
                return None
    offset = f.get("offset")
    if offset is not None and abs(offset) > _MAX_OFFSET and (kind != "date" or (ymd and hms)):
        return None
    if ymd is None:  # Spark's defaults: 1970, January, the first
        year = 1970 if year is None else year
        if day_of_year is not None:
            ymd = _year_day(year, day_of_year)
            if ymd is None or month not in (None, ymd[1]):
                return None
        else:
            ymd = (year, 1 if month is None else month, 1 if day is None else day)
            if not _date_ok(*ymd):
                return None
    days = _days(*ymd)
    if kind == "date":
        return days if _INT_MIN <= days <= _INT_MAX else None
    if kind == "timestamp_ntz" and (st.zone is not None or offset is not None):
        return None
    if hms is None:  # Spark: an hour of AM/PM alone, noon for PM alone, else midnight
        if hour is None:
            hour = hour_ampm if hour_ampm is not None else 12 * (ampm == 1)
        hms = (hour, minute or 0, second or 0, nano or 0)
    local = days * _DAY_S + hms[0] * 3600 + hms[1] * 60 + hms[2]
    if kind == "timestamp_ntz":
        return _java_micros(local, hms[3] // 1000)
    if st.zone is None and offset is not None:
        zone = _Zone(offset)
    secs = local - (st.zone or zone).local_offset(local)
    total = secs * _US + hms[3] // 1000
    return total if secs * _US >= _LONG_MIN and total <= _LONG_MAX else None

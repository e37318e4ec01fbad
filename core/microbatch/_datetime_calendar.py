"""The proleptic Gregorian calendar and time zones, as java.time and Spark 4 use them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

_US = 1_000_000
_DAY_S = 86_400
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_MIN_SECONDS = _LONG_MIN // _US
_YEAR_LIMIT = 999_999_999  # java.time's year range
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_MAX_OFFSET = 18 * 3600
_EPOCH = datetime(1970, 1, 1)
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


# --- calendar --------------------------------------------------------------------------------
def _leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _month_len(y: int, m: int) -> int:
    return 29 if m == 2 and _leap(y) else _MONTH_DAYS[m - 1]


def _date_ok(y: int, m: int, d: int) -> bool:
    return -_YEAR_LIMIT <= y <= _YEAR_LIMIT and 1 <= m <= 12 and 1 <= d <= _month_len(y, m)


def _days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doe = yoe * 365 + yoe // 4 - yoe // 100 + (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146_097 + doe - 719_468


def _julian_to_gregorian(days: int) -> int:
    """Spark's rebase of a hybrid-calendar day number (Julian before 1582-10-15)."""
    if days >= -141_427:
        return days
    c = days + 2_440_588 + 32_082
    d = (4 * c + 3) // 1461
    e = c - (1461 * d) // 4
    m = (5 * e + 2) // 153
    return _days(d - 4800 + m // 10, m + 3 - 12 * (m // 10), 1) + e - (153 * m + 2) // 5


# --- zones -----------------------------------------------------------------------------------
class _Zone:
    """A fixed offset in seconds, or a tz database region."""

    __slots__ = ("fixed", "region")

    def __init__(self, fixed: int | None = None, region: ZoneInfo | None = None) -> None:
        self.fixed = fixed
        self.region = region

    def local_offset(self, local: int) -> int:
        """The offset of a local wall time in seconds, resolved as java.time does."""
        if self.region is None:
            return self.fixed or 0
        if local < _PY_FIRST:  # before year 1: the zone's first (local mean time) offset
            local = _PY_FIRST
        elif local > _PY_LAST:  # the rules repeat every 400 years
            local -= ((local - _PY_LAST) // _CYCLE + 1) * _CYCLE
        wall = (_EPOCH + timedelta(seconds=local)).replace(tzinfo=self.region)
        offset = wall.utcoffset()  # fold=0: a gap takes the offset before it, an overlap the first
        return int(offset.total_seconds()) if offset is not None else 0

    def today(self) -> tuple[int, int, int]:
        now = datetime.now(UTC)
        if self.region is None:
            now += timedelta(seconds=self.fixed or 0)
        else:
            now = now.astimezone(self.region)
        return now.year, now.month, now.day


_PY_FIRST = _days(1, 1, 2) * _DAY_S
_PY_LAST = _days(9999, 12, 30) * _DAY_S
_CYCLE = 146_097 * _DAY_S
_UTC = _Zone(0)
_SHORT_IDS = {  # java.time's ZoneId.SHORT_IDS, which Spark passes to ZoneId.of
    "EST": "-05:00", "HST": "-10:00", "MST": "-07:00", "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires", "ART": "Africa/Cairo",
    "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago",
    "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia", "NET": "Asia/Yerevan", "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi", "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}  # fmt: skip
_NOT_JAVA_IDS = frozenset({"EST", "MST", "HST", "ROC", "Factory", "localtime", "posixrules"})
_REGION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+\Z")
_NAMED_ZONES = {  # names of pattern letters z (short) and zzzz (long), as Spark 4 reads them
    "America/Los_Angeles": "PST PDT PT|Pacific Standard Time|Pacific Daylight Time|Pacific Time",
    "America/New_York": "EST EDT ET|Eastern Standard Time|Eastern Daylight Time|Eastern Time",
    "America/Chicago": "CST CDT CT|Central Standard Time|Central Daylight Time|Central Time",
    "America/Denver": "MST MDT|Mountain Standard Time|Mountain Daylight Time|Mountain Time",
    "America/Anchorage": "AKST AKDT|Alaska Standard Time|Alaska Daylight Time|Alaska Time",
    "America/Halifax": "AST ADT|Atlantic Standard Time|Atlantic Time",
    "Pacific/Honolulu": "HST|Hawaii-Aleutian Standard Time|Hawaii-Aleutian Daylight Time"
    "|Hawaii-Aleutian Time",
    "Europe/Paris": "CET CEST|Central European Standard Time|Central European Summer Time"
    "|Central European Time",
    "Europe/Bucharest": "EET EEST|Eastern European Standard Time|Eastern European Summer Time"
    "|Eastern European Time",
    "Europe/Lisbon": "WET WEST|Western European Standard Time|Western European Summer Time"
    "|Western European Time",
    "Europe/Moscow": "MSK|Moscow Standard Time|Moscow Summer Time|Moscow Time",
    "Australia/Sydney": "AEST AEDT|Australian Eastern Standard Time"
    "|Australian Eastern Daylight Time",
    "Pacific/Auckland": "NZST NZDT|New Zealand Standard Time|New Zealand Daylight Time"
    "|New Zealand Time",
    "GMT": "GMT|Greenwich Mean Time", "UTC": "UTC|Coordinated Universal Time",
    "Asia/Tokyo": "JST|Japan Standard Time|Japan Time", "Asia/Kolkata": "|India Standard Time",
    "Asia/Seoul": "KST|Korean Standard Time|Korean Time", "Africa/Maputo": "CAT|",
    "Asia/Shanghai": "|China Standard Time|China Time", "Asia/Hong_Kong": "HKT|Hong Kong "
    "Standard Time", "Asia/Singapore": "SGT|Singapore Standard Time", "Africa/Lagos": "WAT|",
    "America/St_Johns": "NST NDT|", "America/Argentina/Buenos_Aires": "ART|", "Asia/Jakarta":
    "WIB|", "America/Sao_Paulo": "BRT|", "Pacific/Pago_Pago": "SST|", "Pacific/Guam": "ChST|",
    "Africa/Johannesburg": "SAST|", "Africa/Nairobi": "EAT|", "Asia/Karachi": "PKT|",
    "Asia/Bangkok": "ICT|", "Australia/Perth": "AWST|", "Pacific/Bougainville": "BST|",
}  # fmt: skip


@lru_cache(maxsize=1)
def _region_ids() -> dict[str, str]:
    """Region IDs java.time knows, keyed by their lower-case spelling."""
    return {i.lower(): i for i in available_timezones() - _NOT_JAVA_IDS}


@lru_cache(maxsize=1)
def _zone_names() -> tuple[dict[str, str], dict[str, str]]:
    """Lower-case zone names to region IDs, for ``z`` (short) and ``zzzz`` (long)."""
    ids = {k: v for k, v in _region_ids().items() if not re.match(r"etc/gmt[+-]", k)}
    short, full = dict(ids), dict(ids)
    for zone, names in _NAMED_ZONES.items():
        abbreviations, *long_names = names.split("|")
        short.update((n.lower(), zone) for n in abbreviations.split())
        full.update((n.lower(), zone) for n in long_names)
    return short, full


@lru_cache(maxsize=512)
def _region(zone_id: str) -> _Zone | None:
    if _REGION_NAME.match(zone_id) is None or _region_ids().get(zone_id.lower()) != zone_id:
        return None
    return _Zone(region=ZoneInfo(zone_id))


def _offset_of(text: str) -> int | None:
    """java.time's ZoneOffset.of: ±h, ±hh, ±hhmm, ±hh:mm, ±hhmmss or ±hh:mm:ss, within ±18:00."""
    n = len(text)
    body = text[1:]
    if n < 2 or text[0] not in "+-":
        return None
    if n <= 3:
        parts = [body]
    elif n in (5, 7):
        parts = [body[i : i + 2] for i in range(0, n - 1, 2)]
    elif n in (6, 9) and body[2] == ":" and body[5:6] in ("", ":"):
        parts = body.split(":")
    else:
        return None
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    h, m, s = [int(p) for p in parts] + [0] * (3 - len(parts))
    if h > 18 or m > 59 or s > 59 or (h == 18 and (m or s)):
        return None
    return (h * 3600 + m * 60 + s) * (-1 if text[0] == "-" else 1)


def _java_zone(zone_id: str) -> _Zone | None:
    """java.time's ZoneId.of."""
    if zone_id == "Z":
        return _UTC
    if len(zone_id) <= 1 or zone_id[0] in "+-":
        offset = _offset_of(zone_id)
        return None if offset is None else _Zone(offset)
    for prefix in ("UTC", "GMT", "UT"):
        if zone_id.startswith(prefix):
            rest = zone_id[len(prefix) :]
            if not rest:
                return _UTC
            if rest[0] in "+-":
                offset = _offset_of(rest)
                return None if offset is None else _Zone(offset)
            break
    return _region(zone_id)


_SINGLE_HOUR = re.compile(r"([+-])([0-9]):")
_SINGLE_MINUTE = re.compile(r"([+-])([0-9][0-9]):([0-9])\Z")


def _spark_zone(text: str) -> _Zone | None:
    """Spark's getZoneId: java.time's ZoneId.of with SHORT_IDS, plus ±h:mm and ±hh:m."""
    text = _SINGLE_HOUR.sub(r"\g<1>0\g<2>:", text, count=1)
    text = _SINGLE_MINUTE.sub(r"\1\2:0\3", text, count=1)
    return _java_zone(_SHORT_IDS.get(text, text))


def _java_micros(secs: int, micros: int) -> int | None:
    """Spark's instantToMicros, None when it overflows a long."""
    if secs == _MIN_SECONDS:
        base, micros = (secs + 1) * _US, micros - _US
    else:
        base = secs * _US
    total = base + micros
    return total if _LONG_MIN <= base <= _LONG_MAX and _LONG_MIN <= total <= _LONG_MAX else None

"""Spark's datetime patterns compiled into java.time's parser elements."""

from __future__ import annotations

import re

from ._datetime_elements import (
    _EXCEEDS_PAD,
    _NORMAL,
    _NOT_NEGATIVE,
    _Frac,
    _GmtOffset,
    _Item,
    _Lit,
    _Num,
    _Offset,
    _Optional,
    _Text,
    _ZoneParse,
)

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip


# --- patterns: compiling ---------------------------------------------------------------------
class _Builder:
    """java.time's DateTimeFormatterBuilder, as far as parsing needs it."""

    def __init__(self) -> None:
        self.levels: list[tuple[list[_Item], list[int]]] = [([], [-1])]

    def add(self, item: _Item) -> None:
        items, active = self.levels[-1]
        items.append(item)
        active[0] = -1

    def number(self, num: _Num) -> None:
        """appendValue: adjacent numbers reserve fixed widths from the first one."""
        items, active = self.levels[-1]
        index = active[0]
        fixed = num.low == num.high and num.sign == _NOT_NEGATIVE
        if index >= 0:
            base = items[index]
            assert isinstance(base, _Num)
            items[index] = base.copy(base.sub + num.high if fixed else -1)
        items.append(num.copy(-1) if index >= 0 and fixed else num)
        active[0] = index if index >= 0 and fixed else len(items) - 1

    def open(self) -> None:
        self.levels.append(([], [-1]))

    def close(self) -> None:
        items, _ = self.levels.pop()
        if items:
            self.add(_Optional(items))


def _split_quotes(pattern: str) -> list[str]:
    """Java's String.split("'"): trailing empty parts dropped."""
    if "'" not in pattern:
        return [pattern]
    parts = pattern.split("'")
    while parts and not parts[-1]:
        parts.pop()
    return parts


_NUMBER_KEYS = {"d": "day", "h": "clock_ampm", "H": "hour", "k": "clock_hour", "K": "hour_ampm",
                "m": "minute", "s": "second"}  # fmt: skip
_OFFSET_STYLES = ("", "+HHmm", "+HHMM", "+HH:MM", "+HHMMss", "+HH:MM:ss")


def _letters(b: _Builder, c: str, count: int) -> None:
    """One run of a pattern letter (java.time's appendPattern rules)."""
    if c in "yu":
        key = "year" if c == "u" else "year_of_era"
        if count == 2:
            b.number(_Num(key, 2, 2, _NOT_NEGATIVE, base=2000))
        else:
            b.number(_Num(key, count, 19, _NORMAL if count < 4 else _EXCEEDS_PAD))
    elif c in "ML" and count <= 2:
        b.number(_Num("month", count, 19 if count == 1 else 2, _NORMAL if count == 1 else 1))
    elif c in "ML" and count <= 4:
        names = _MONTHS if count == 4 else [m[:3] for m in _MONTHS]
        b.add(_Text("month", {n: i + 1 for i, n in enumerate(names)}))
    elif c in _NUMBER_KEYS and count <= 2:
        b.number(_Num(_NUMBER_KEYS[c], count, 19 if count == 1 else 2, count - 1))
    elif c == "D" and count <= 3:
        b.number(_Num("day_of_year", count, 19 if count == 1 else 3, min(count, 2) - 1))
    elif c == "a" and count == 1:
        b.add(_Text("ampm", {"AM": 0, "PM": 1}))
    elif c == "G" and count <= 4:
        eras = ("Before Christ", "Anno Domini") if count == 4 else ("BC", "AD")
        b.add(_Text("era", {eras[0]: 0, eras[1]: 1}))
    elif c == "z" and count <= 4:
        b.add(_ZoneParse(2 if count == 4 else 1))
    elif c == "V" and count == 2:
        b.add(_ZoneParse(0))
    elif c == "O" and count in (1, 4):
        b.add(_GmtOffset(count == 4))
    elif c == "Z" and count <= 5:
        b.add(_GmtOffset(True) if count == 4 else _Offset(*(
            ("+HH:MM:ss", "Z") if count == 5 else ("+HHMM", "+0000"))))  # fmt: skip
    elif c in "Xx" and count <= 5:
        zero = "Z" if c == "X" else "+00" if count == 1 else ("+0000", "+00:00")[count % 2]
        b.add(_Offset(_OFFSET_STYLES[count], zero))
    elif c in "vg":
        raise ValueError(f"pattern letter {c!r} is not supported")
    elif c in "yuMLdhHkKmsDaGzVOZXx":
        raise ValueError(f"too many or too few pattern letters: {c * count!r}")
    else:
        raise ValueError(f"unknown pattern letter {c!r}")


def _append_pattern(b: _Builder, pattern: str) -> None:
    pos, n = 0, len(pattern)
    while pos < n:
        c = pattern[pos]
        if c.isascii() and c.isalpha():
            start = pos
            while pos < n and pattern[pos] == c:
                pos += 1
            _letters(b, c, pos - start)
            continue
        if c == "'":
            start = pos
            pos += 1
            while pos < n and (pattern[pos] != "'" or pattern[pos + 1 : pos + 2] == "'"):
                pos += 1 + (pattern[pos] == "'")
            if pos >= n:
                raise ValueError("the pattern ends inside a quoted literal")
            b.add(_Lit(pattern[start + 1 : pos].replace("''", "'") or "'"))
        elif c == "[":
            b.open()
        elif c == "]":
            if len(b.levels) == 1:
                raise ValueError("the pattern has a ']' without a '['")
            b.close()
        elif c in "{}#":
            raise ValueError(f"the pattern has the reserved character {c!r}")
        else:
            b.add(_Lit(c))
        pos += 1


def _compile(pattern: str) -> list[_Item]:
    """Spark's checks and rewrites, then java.time's parser elements."""
    parts = (pattern + " ").split("'")
    for part in parts[::2]:
        for c in part:
            if c in "YWwuec":
                raise ValueError(f"week-based pattern letter {c!r} is not supported since Spark 3")
            if c in "ABnNpEFqQ":
                raise ValueError(f"pattern letter {c!r} cannot be used to parse")
        for run in ("GGGGG", "MMMMM", "LLLLL", "yyyyyyy"):
            if run in part:
                raise ValueError(f"too many pattern letters: {run!r}")
    if not any("G" in part for part in _split_quotes(pattern)[::2]):
        parts[::2] = [part.replace("y", "u") for part in parts[::2]]
    pattern = "'".join(parts)[:-1]
    b = _Builder()
    if "S" not in pattern:
        _append_pattern(b, pattern)
    else:  # Spark's own handling: a run of S is a fraction of 1 to n digits
        for index, part in enumerate(_split_quotes(pattern)):
            if not part and index:
                b.add(_Lit("'"))
            elif index % 2:
                b.add(_Lit(part))
            else:
                for letters, fraction in re.findall(r"([^S]*)(S*)", part)[:-1]:
                    _append_pattern(b, letters)
                    if len(fraction) > 9:
                        raise ValueError("a fraction of second has at most 9 digits (S)")
                    if len(fraction) == 1:
                        b.number(_Frac("nano", 1, 1, _NOT_NEGATIVE))
                    elif fraction:
                        b.add(_Frac("nano", 1, len(fraction), _NOT_NEGATIVE))
    while len(b.levels) > 1:
        b.close()
    return b.levels[0][0]

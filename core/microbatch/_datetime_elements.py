"""The elements of java.time's parser that a compiled datetime pattern is made of."""

from __future__ import annotations

from ._datetime_calendar import (
    _LONG_MAX,
    _LONG_MIN,
    _MAX_OFFSET,
    _UTC,
    _java_zone,
    _region,
    _region_ids,
    _Zone,
    _zone_names,
)


# --- patterns: elements of java.time's parser ------------------------------------------------
class _Fail(Exception):
    """java.time threw while parsing: the whole text fails, even inside an optional section."""


class _State:
    __slots__ = ("fields", "zone")

    def __init__(self) -> None:
        self.fields: dict[str, int] = {}
        self.zone: _Zone | None = None

    def set(self, key: str, value: int, start: int, end: int) -> int:
        old = self.fields.get(key)
        self.fields[key] = value
        return ~start if old is not None and old != value else end


def _char_eq(a: str, b: str) -> bool:
    if a == b:
        return True
    ua, ub, la, lb = a.upper(), b.upper(), a.lower(), b.lower()
    return (len(ua) == 1 and ua == ub) or (len(la) == 1 and la == lb)


def _starts(text: str, pos: int, word: str) -> bool:
    end = pos + len(word)
    return end <= len(text) and all(map(_char_eq, text[pos:end], word))


_DIGIT, _ALPHA = frozenset({"<digit>"}), frozenset({"<alpha>"})


class _Item:
    """One element of a compiled pattern."""

    first = _ALPHA  # what its text may start with: a digit, a letter or one of these characters

    def parse(self, st: _State, text: str, pos: int) -> int:
        """The position after the element, or ``~pos`` when it does not match."""
        raise NotImplementedError


class _Lit(_Item):
    def __init__(self, literal: str) -> None:
        self.literal = literal
        self.first = _DIGIT if "0" <= literal[0] <= "9" else frozenset({literal[0].lower()})

    def parse(self, st: _State, text: str, pos: int) -> int:
        return pos + len(self.literal) if _starts(text, pos, self.literal) else ~pos


_NORMAL, _NOT_NEGATIVE, _EXCEEDS_PAD = 0, 1, 2


class _Num(_Item):
    """A number; ``sub`` is java.time's width reserved for adjacent fixed-width numbers, and
    ``base`` 2000 makes a two-digit year."""

    first = _DIGIT

    def __init__(
        self, key: str, low: int, high: int, sign: int, sub: int = 0, base: int = 0
    ) -> None:
        self.key, self.low, self.high, self.sign = key, low, high, sign
        self.sub, self.base = sub, base

    def copy(self, sub: int) -> _Num:
        return type(self)(self.key, self.low, self.high, self.sign, sub, self.base)

    def parse(self, st: _State, text: str, pos: int) -> int:
        n, start = len(text), pos
        if pos == n:
            return ~pos
        negative = positive = False
        if text[pos] in "+-":
            positive = text[pos] == "+"
            negative = not positive
            if (positive and self.sign != _EXCEEDS_PAD) or self.sign == _NOT_NEGATIVE:
                return ~pos
            pos += 1
        min_end, width = pos + self.low, self.high + max(self.sub, 0)
        if min_end > n:
            return ~pos
        end = pos
        for attempt in range(2):
            end = pos
            stop = min(pos + width, n)
            while end < stop and "0" <= text[end] <= "9":
                end += 1
            if end < min_end:
                return ~pos
            if self.sub <= 0 or attempt:
                break
            width = max(self.low, end - pos - self.sub)
        value = int(text[pos:end])
        if negative:
            if value == 0:
                return ~start
            value = -value
        elif self.sign == _EXCEEDS_PAD and (end - pos <= self.low) == positive:
            return ~start
        if not _LONG_MIN <= value <= _LONG_MAX:
            value, end = (abs(value) // 10) * (1 if value > 0 else -1), end - 1
        return st.set(self.key, value + self.base, start, end)


class _Frac(_Num):
    """Fraction of second: 1 to ``high`` digits, as nanoseconds."""

    def parse(self, st: _State, text: str, pos: int) -> int:
        end, stop = pos, min(pos + self.high, len(text))
        while end < stop and "0" <= text[end] <= "9":
            end += 1
        if end - pos < self.low:
            return ~pos
        return st.set("nano", int(text[pos:end]) * 10 ** (9 - end + pos), pos, end)


class _Text(_Item):
    def __init__(self, key: str, names: dict[str, int]) -> None:
        self.key = key
        self.names = sorted(names.items(), key=lambda kv: -len(kv[0]))

    def parse(self, st: _State, text: str, pos: int) -> int:
        for name, value in self.names:
            if _starts(text, pos, name):
                return st.set(self.key, value, pos, pos + len(name))
        return ~pos


class _Offset(_Item):
    """A numeric offset such as +HH:MM; ``style`` is java.time's pattern, e.g. "+HHmm"."""

    def __init__(self, style: str, no_offset: str) -> None:
        self.style, self.no_offset = style, no_offset
        self.colon = ":" in style
        self.first = frozenset({"+", "-", no_offset[0].lower()})

    def parse(self, st: _State, text: str, pos: int) -> int:
        if pos >= len(text):
            return ~pos
        if _starts(text, pos, self.no_offset):
            return st.set("offset", 0, pos, pos + len(self.no_offset))
        if text[pos] not in "+-":
            return ~pos
        at = [pos + 1, 0, 0, 0]
        if not self._digits(text, 1, at):
            return ~pos
        letters = self.style.replace(":", "")
        for index, letter in ((2, letters[3:4]), (3, letters[5:6])):
            if letter and not self._digits(text, index, at) and letter.isupper():
                return ~pos
        if at[1] > 23 or at[2] > 59 or at[3] > 59:
            raise _Fail
        value = at[1] * 3600 + at[2] * 60 + at[3]
        return st.set("offset", -value if text[pos] == "-" else value, pos, at[0])

    def _digits(self, text: str, index: int, at: list[int]) -> bool:
        p = at[0]
        if self.colon and index > 1:
            if p >= len(text) or text[p] != ":":
                return False
            p += 1
        pair = text[p : p + 2]
        if len(pair) != 2 or not ("0" <= pair[0] <= "9" and "0" <= pair[1] <= "9"):
            return False
        if int(pair) > 59:
            return False
        at[index], at[0] = int(pair), p + 2
        return True


def _at(text: str, i: int) -> str:
    if i >= len(text):
        raise _Fail  # java.time reads past the end here
    return text[i]


def _digit(text: str, i: int) -> int:
    return int(_at(text, i)) if "0" <= _at(text, i) <= "9" else -1


class _GmtOffset(_Item):
    """A localized offset: GMT, GMT+h[:mm[:ss]] (O) or GMT+hh:mm[:ss] (OOOO, ZZZZ)."""

    def __init__(self, full: bool) -> None:
        self.full = full

    def parse(self, st: _State, text: str, pos: int) -> int:
        if not _starts(text, pos, "GMT"):
            return ~pos
        p = pos + 3
        if p == len(text) or text[p] not in "+-":
            return st.set("offset", 0, pos, p)
        sign, p = (-1 if text[p] == "-" else 1), p + 1
        if self.full:
            h1, h2 = _digit(text, p), _digit(text, p + 1)
            if h1 < 0 or h2 < 0 or _at(text, p + 2) != ":":
                return ~pos
            m1, m2 = _digit(text, p + 3), _digit(text, p + 4)
            if m1 < 0 or m2 < 0:
                return ~pos
            h, m, p = h1 * 10 + h2, m1 * 10 + m2, p + 5
        else:
            h, p = _digit(text, p), p + 1
            if h < 0:
                return ~pos
            if p != len(text) and _digit(text, p) >= 0:
                h, p = h * 10 + _digit(text, p), p + 1
            m, after = self._pair(text, p)
            if after == p:
                return st.set("offset", sign * h * 3600, pos, p)
            p = after
        s, p = self._pair(text, p)
        return st.set("offset", sign * (h * 3600 + m * 60 + s), pos, p)

    @staticmethod
    def _pair(text: str, p: int) -> tuple[int, int]:
        """The number of a ``:dd`` at ``p`` and the position after it, or 0 and ``p``."""
        if p + 2 < len(text) and text[p] == ":":
            a, b = _digit(text, p + 1), _digit(text, p + 2)
            if a >= 0 and b >= 0:
                return a * 10 + b, p + 3
        return 0, p


class _ZoneParse(_Item):
    """A zone ID (VV) or zone name (z, zzzz), then its zone is the text's zone."""

    def __init__(self, names: int) -> None:
        self.names = names  # 0: region IDs, 1: short names, 2: long names

    def parse(self, st: _State, text: str, pos: int) -> int:
        n = len(text)
        if pos >= n:
            return ~pos
        c = text[pos]
        if c in "+-":
            return self._prefixed(st, text, pos, pos)
        if n >= pos + 2 and _char_eq(c, "U") and _char_eq(text[pos + 1], "T"):
            utc = n >= pos + 3 and _char_eq(text[pos + 2], "C")
            return self._prefixed(st, text, pos, pos + 2 + utc)
        if n >= pos + 3 and _starts(text, pos, "GMT"):
            if n >= pos + 4 and text[pos + 3] == "0":
                st.zone = _region("GMT0") or _UTC
                return pos + 4
            return self._prefixed(st, text, pos, pos + 3)
        table = _region_ids() if self.names == 0 else _zone_names()[self.names - 1]
        for end in range(min(n, pos + 40), pos, -1):
            zone_id = table.get(text[pos:end].lower())
            if zone_id is not None:
                st.zone = _java_zone(zone_id)
                return end
        if _char_eq(c, "Z"):
            st.zone = _UTC
            return pos + 1
        return ~pos

    @staticmethod
    def _prefixed(st: _State, text: str, start: int, pos: int) -> int:
        if pos >= len(text) or text[pos] == "0" or _char_eq(text[pos], "Z"):
            st.zone = _UTC
            return pos
        inner = _State()
        end = _Offset("+HH:MM:ss", "Z" if start == pos else "0").parse(inner, text, pos)
        if end < 0:
            if start == pos:
                return ~start
            st.zone = _UTC
            return pos
        offset = inner.fields["offset"]
        if abs(offset) > _MAX_OFFSET:
            return ~start
        st.zone = _Zone(offset)
        return end


class _Optional(_Item):
    def __init__(self, items: list[_Item]) -> None:
        self.items = items

    def parse(self, st: _State, text: str, pos: int) -> int:
        saved = dict(st.fields), st.zone
        end = pos
        for item in self.items:
            end = item.parse(st, text, end)
            if end < 0:
                st.fields, st.zone = saved
                return pos
        return end

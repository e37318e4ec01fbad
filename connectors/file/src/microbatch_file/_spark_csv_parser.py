"""univocity-parsers' ``CsvParser`` as Spark 4 sets it up: the tokenizer behind
:func:`microbatch_file._spark_csv.records`.

It runs character by character in Python, with univocity's shortcuts where they change what
comes out. Spark reads a file with one parser whose state carries from one line to the next;
an error fails the whole read.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from microbatch.errors import SourceError

if TYPE_CHECKING:
    from ._spark_csv import SparkCsvOptions

__all__ = ["BOM", "BREAK", "CsvSyntaxError", "Parser", "blank", "strip_line_end", "units"]

_NUL = "\0"
BOM = "\ufeff"
BREAK = re.compile(r"\r\n|\r|\n")
_SPACES = "".join(map(chr, range(33)))  # what Java trims


class CsvSyntaxError(SourceError):
    """Text Spark cannot tokenise: it fails the whole read whatever the parse mode (an
    unescaped quote with ``unescapedQuoteHandling=RAISE_ERROR``, more than ``maxColumns``
    values, a value longer than ``maxCharsPerColumn``, univocity's own failures). ``line`` is
    the record's first line, ``reason`` the message without it."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(f"Malformed CSV record at line {line}: {reason}")
        self.line = line
        self.reason = reason


def strip_line_end(raw: str) -> str:
    return raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith(("\n", "\r")) else raw


def blank(text: str) -> bool:
    """Whether Java's ``String.trim`` leaves nothing: every character is U+0020 or less."""
    return all(char <= " " for char in text)


def units(text: str) -> int:
    """Length in UTF-16 code units (Java characters)."""
    return len(text) + sum(char > "\uffff" for char in text)


class _End(Exception):
    """The input ran out."""


class _Broken(Exception):
    """univocity throws: the read fails."""


_SCANNERS: dict[str, re.Pattern[str]] = {}


class _Input:
    """The characters of one input buffer. A line separator comes out as ``nl`` while
    ``normalize`` is on; ``lines`` counts separators."""

    __slots__ = ("i", "last_sep", "lines", "n", "nl", "normalize", "s", "sep1", "sep2")

    def __init__(self, text: str, sep: str, nl: str, start: int = 0) -> None:
        self.s, self.n, self.i = text, len(text), start
        self.sep1, self.sep2, self.nl = sep[0], sep[1:], nl
        self.last_sep = self.sep1  # what the last character is compared with
        self.normalize = True
        self.lines = 0

    def next(self) -> str:
        if self.i >= self.n:
            raise _End
        char = self.s[self.i]
        self.i += 1
        sep1 = self.sep1 if self.i < self.n else self.last_sep
        if char == sep1 and (not self.sep2 or (self.i < self.n and self.s[self.i] == self.sep2)):
            self.lines += 1
            if self.normalize:
                char = self.nl
                self.i += len(self.sep2)
        return char

    def scan(self, stops: str, start: int | None = None) -> int:
        """Where the next character in ``stops`` or starting a line separator is (or the end)."""
        chars = stops + self.sep1 + self.last_sep
        pattern = _SCANNERS.get(chars)
        if pattern is None:
            pattern = _SCANNERS[chars] = re.compile(f"[{re.escape(chars)}]")
        found = pattern.search(self.s, self.i if start is None else start)
        return found.start() if found else self.n


class _Value:
    """The text of the value being read (univocity's appender); ``skipped`` while a value is
    skipped, ``trailing`` white space characters are left out once trimmed."""

    __slots__ = ("limit", "skipped", "text", "trailing", "units")

    def __init__(self, limit: int) -> None:
        self.limit, self.skipped = limit, False
        self.text, self.trailing, self.units = "", 0, 0

    def length(self) -> int:
        return -1 if self.skipped else len(self.text) - self.trailing

    def add(self, chars: str, *, before: bool = False) -> None:
        if self.skipped:
            return
        self.text = chars + self.text if before else self.text + chars
        if self.limit >= 0:
            self.units += units(chars)
            if self.units > self.limit:
                raise _Broken(f"a value is longer than maxCharsPerColumn={self.limit}")

    def trim(self) -> None:
        self.trailing = len(self.text) - len(self.text.rstrip(_SPACES))

    def reset(self) -> None:
        self.text, self.trailing, self.units = "", 0, 0

    def take(self, empty: str) -> str | None:
        if self.skipped:
            self.skipped = False
            return None
        size = len(self.text) - self.trailing
        out = self.text[:size] if size > 0 else empty
        self.reset()
        return out


_FAIL = object()  # univocity's shortcut does not apply: read character by character


class Parser:
    """univocity's ``CsvParser`` as Spark sets it up. As in Spark, one parser reads a file and
    its state carries from one line to the next."""

    def __init__(self, o: SparkCsvOptions) -> None:
        self.o, self.q, self.e = o, o.quote or _NUL, o.escape or _NUL
        ee = o.char_to_escape_quote_escaping
        self.ee = ee or (_NUL if self.q == self.e else self.e)
        self.md = o.sep if len(o.sep) > 1 else ""
        self.d = _NUL if self.md else o.sep
        self.comment = o.comment or "#"
        self.lead, self.trail = o.ignore_leading_white_space, o.ignore_trailing_white_space
        self.handling = o.unescaped_quote_handling
        self.until_sep = self.handling in ("STOP_AT_DELIMITER", "SKIP_VALUE", "BACK_TO_DELIMITER")
        self.norm_in_quotes = not (o.line_sep and o.multi_line)
        self.sep = o.line_sep or "\n"
        self.nl = self.sep if len(self.sep) == 1 else "\n"
        self._input("", self.sep)
        self._reset()
        self.text_before = False
        """The input holds text up to U+0020 or more before the text given (the text
        continues a stream)."""

    def _input(self, text: str, sep: str, start: int = 0) -> _Input:
        self.inp = _Input(text, sep, self.nl, start)
        self.plain_stop = re.compile(f"{re.escape(self.d)}|{re.escape(sep)}")
        return self.inp

    def _reset(self) -> None:
        """The state of a new univocity parser (it starts afresh after an error)."""
        self.value = _Value(self.o.max_chars_per_column)
        self.values: list[str | None] = []
        self.pending: deque[list[str | None]] = deque()
        self.ch = self.prev = self.plain_end = _NUL
        self.unescaped = self.trim = self.started = False
        self.first_row = True
        self.match = self.record_start = 0

    # -- drivers -----------------------------------------------------------------------------
    def line(self, line: str, number: int) -> tuple[list[str | None], str]:
        """A line as Spark's ``parseLine`` reads it: its tokens (none for a comment) and raw
        text."""
        start = 1 if not self.started and line.startswith(BOM) else 0
        self.started = True
        self._input(line, self.sep, start)
        try:
            tokens = self._line()
        except _Broken as error:
            self._reset()
            raise CsvSyntaxError(str(error), number) from None
        return tokens or [], strip_line_end(line[self.record_start : self.inp.i])

    def _line(self) -> list[str | None] | None:
        try:
            while True:
                self.record_start = self.inp.i
                self.ch = self.inp.next()
                if self.o.comment and self.ch == self.comment:
                    return None
                if not self.pending:
                    self._record()
                row = self._row()
                if row is not None:
                    return row
        except _End:
            return self._at_end()

    def stream(
        self,
        text: str,
        first_line: int,
        *,
        sep: str | None = None,
        whole: bool = True,
        after_cr: bool = False,
    ) -> Iterator[tuple[list[str | None], int, int, int]]:
        """The records of ``text`` read as one stream (``multiLine``), each as ``(tokens,
        first line, start, end)``: ``text[start:end]`` is the record with its line end.

        ``sep`` is the line separator univocity took at the start of the input (by default the
        first line break of ``text``); ``whole`` says ``text`` is all of the input (univocity
        guesses again when a short input ends); ``after_cr`` that the input before ``text``
        ends with ``\\r`` (a ``\\n`` starting ``text`` ends no further line).
        """
        start = 1 if first_line == 1 and not self.started and text.startswith(BOM) else 0
        if sep is None:
            found = BREAK.search(text)  # univocity's guess: the first line break
            sep = self.o.line_sep or (found.group() if found else "\n")
        inp = self._input(text, sep, start)
        if whole and not self.o.line_sep and units(text) <= 4:
            inp.last_sep = "\n"  # univocity guesses again when a short input ends
        done, counted, line = False, 0, first_line
        while not done:
            self.record_start = start = inp.i
            if start > counted:  # count line breaks up to here (a \r\n split counts once)
                pair = text[counted - 1 : counted + 1] if counted else "\r" + text[:1]
                skip = int(pair == "\r\n" and (counted > 0 or after_cr))
                line += len(BREAK.findall(text, counted + skip, start))
                counted = start
            try:
                row, done = self._next_record()
            except _Broken as error:
                raise CsvSyntaxError(str(error), line) from None
            if row is not None:
                yield row, line, start, inp.i
        if self.values:  # left behind by BACK_TO_DELIMITER, returned once the input is done
            yield self.values, line, inp.i, inp.i

    def _next_record(self) -> tuple[list[str | None] | None, bool]:
        """univocity's ``parseNext``: the next row, if any, and whether the input is done."""
        try:
            self.ch = self.inp.next()
            if self.o.comment and self.ch == self.comment:
                lines = self.inp.lines
                try:
                    while self.inp.lines == lines:
                        self.inp.next()
                except _End:
                    pass
                return None, False
            if not self.pending:
                self._record()
            return self._row(), False
        except _End:
            return self._at_end(), not self.pending

    # -- output ------------------------------------------------------------------------------
    def _emit(self, token: str | None) -> None:
        if len(self.values) >= self.o.max_columns:
            raise _Broken(f"a record has more than maxColumns={self.o.max_columns} values")
        self.values.append(token)
        self.value.skipped = False

    def _take(self) -> None:
        if self.trim:
            self.value.trim()
        self._emit(self.value.take(self.o.empty_value))

    def _row(self) -> list[str | None] | None:
        if self.pending:
            return self.pending.popleft()
        if not self.values:
            return None
        row, self.values = self.values, []
        if self.first_row:  # univocity trims a parser's first row as header names
            self.first_row = False
            if self.trail and not self.lead:
                for token in row:
                    text = self.o.null_value if token is None else token
                    if text and blank(text):
                        raise _Broken("univocity failed on a value of only white space")
        return row

    def _at_end(self) -> list[str | None] | None:
        """univocity's ``handleEOF``: the row the end of the input completes."""
        consume = self._consume_at_end()
        length, consumed = self.value.length(), self.inp.i > self.record_start
        if not (self.values or consume or length > 0 or consumed):
            return self.pending.popleft() if self.pending else None
        if length > 0 or consume or (length < 0 and not self.values):
            self._take()
        elif consumed:
            self._emit(None)
        return self._row()

    def _consume_at_end(self) -> bool:
        if self.ch == self.q:
            if self.prev == self.q:
                return True
            if not self.unescaped:
                self.value.add(self.q)
        out = self.prev != _NUL and self.ch not in (self.d, self.nl, self.comment)
        self.ch = self.prev = _NUL
        if self.match > 0:
            self._save_match()
            return True
        return out

    # -- reading -----------------------------------------------------------------------------
    def _append_until(self, char: str, stops: str) -> str:
        inp, value = self.inp, self.value
        while char not in stops:
            value.add(char)
            end = inp.scan(stops)
            if end > inp.i:
                value.add(inp.s[inp.i : end])
                inp.i = end
            char = inp.next()
        return char

    def _skip_spaces(self) -> None:
        char = self.ch
        while char <= " " and char not in (self.d, self.nl, self.q):
            char = self.inp.next()
        self.ch = char

    def _record(self) -> None:
        if self.md:
            self._record_multi()
            return
        inp, d, nl, q = self.inp, self.d, self.nl, self.q
        if self.lead and self.ch <= " ":
            self._skip_spaces()
        while self.ch != nl:
            if self.lead and self.ch <= " ":
                self._skip_spaces()
            if self.ch in (d, nl):
                self._emit(None)
            elif self.ch == q:
                self.unescaped, self.prev = False, _NUL
                inp.normalize = self.norm_in_quotes
                quoted = self._quick_quoted() if self.value.length() == 0 else _FAIL
                if not isinstance(quoted, str):
                    self._quoted_field(multi=False)
                else:
                    self._emit(quoted or self.o.empty_value)
                    inp.normalize = True
                    if self._after_quick_quoted():
                        return
                    continue
            else:
                self.unescaped, self.prev = False, _NUL
                plain = self._quick_plain() if self.value.length() == 0 else _FAIL
                if plain is _FAIL:
                    self.trim = self.trail
                    self.ch = self._append_until(self.ch, d + nl)
                    self._take()
                else:
                    self._emit(plain)  # type: ignore[arg-type]
                    self.ch = self.plain_end
            if self.ch != nl:
                self.ch = inp.next()
                if self.ch == nl:
                    self._emit(None)

    def _after_quick_quoted(self) -> bool:
        """Past the separator after a quoted value read at once; whether the input ended."""
        try:
            self.ch = self.inp.next()
            if self.ch == self.d:
                self.ch = self.inp.next()
                if self.ch == self.nl:
                    self._emit(None)
            return False
        except _End:
            if self.ch == self.d:  # a separator at the very end: one more empty value
                self._emit(None)
            return True

    def _quoted_field(self, *, multi: bool) -> None:
        self.trim = False
        self._quoted(multi=multi)
        self.inp.normalize = True
        if not (self.unescaped and self.handling == "BACK_TO_DELIMITER" and not self.value.text):
            self._take()

    def _quick_plain(self) -> object:
        """univocity's shortcut for an unquoted value ending inside the buffer: the text up to
        the separator or a line separator (``None`` for an empty value)."""
        inp = self.inp
        s, start = inp.s, inp.i - 1
        found = self.plain_stop.search(s, start)
        if found is None or (found.group() != self.d and found.start() == inp.n - 1):
            return _FAIL
        end = found.start()
        limit = self.o.max_chars_per_column
        if limit != -1 and units(s[start:end]) > limit:
            return _FAIL
        size = end - start
        if self.trail:  # univocity looks back past the value's start, to the buffer's start
            k = end - 1
            while k < 0 or s[k] <= " ":
                if k < 0:
                    if self.text_before:  # the input goes on before this text
                        break
                    raise _Broken("univocity failed on white space at the start of the input")
                size, k = size - 1, k - 1
        inp.i = end
        self.plain_end = inp.next()
        return s[start : start + size] if size > 0 else None

    def _quick_quoted(self) -> object:
        """univocity's shortcut for a quoted value without escapes, closed inside the buffer
        and followed by the separator or a line break."""
        inp, q, e = self.inp, self.q, self.e
        s, n, j = inp.s, inp.n, inp.i
        while True:
            j = inp.scan(q + e, j)
            if j >= n:
                return _FAIL
            char = s[j]
            if char == q:
                if s[j - 1] == e or j + 1 >= n or s[j + 1] not in (self.d, self.nl):
                    return _FAIL
                break
            if char == e:
                if j + 1 < n and s[j + 1] in (q, self.ee):
                    return _FAIL
            elif (
                char == inp.sep1
                and inp.normalize
                and (not inp.sep2 or s[j + 1 : j + 2] == inp.sep2)
            ):
                return _FAIL
            j += 1
        limit = self.o.max_chars_per_column
        if limit != -1 and units(s[inp.i : j]) > limit:
            return _FAIL
        out, inp.i = s[inp.i : j], j + 1
        return out

    def _quoted(self, *, multi: bool) -> None:
        """A quoted value, from its opening quote or from an unescaped quote inside it."""
        inp, q, e, d, nl = self.inp, self.q, self.e, self.d, self.nl
        if self.prev != _NUL and self.until_sep:
            if self.handling == "SKIP_VALUE":
                self._skip_value()
                return
            self.value.add(q, before=True)
            self.ch = inp.next()
            self.trim = self.trail
            if multi:
                self._append_until_separator()
            else:
                self.ch = self._append_until(self.ch, d + nl)
            return
        self.ch = inp.next()
        while True:
            if self.prev == q and (self.ch <= " " or self.ch == nl or (self.ch == d and not multi)):
                break
            if multi and self.prev == q and self._match():
                return
            char = self.ch
            if char != q and char != e:
                if self.prev == q:
                    if self._unescaped_quote() and self.handling == "SKIP_VALUE":
                        break
                    return
                if self.prev == e and e != _NUL:
                    self.value.add(e)
                self.ch = self.prev = self._append_until(char, q + e + self.ee)
                self.ch = inp.next()
            else:
                self._quote_escape()
                self.prev = self.ch
                self.ch = inp.next()
                if self.unescaped and (self.ch == nl or (self._match() if multi else self.ch == d)):
                    return
        self._after_closing_quote(multi)

    def _after_closing_quote(self, multi: bool) -> None:
        """White space after a closing quote is dropped; other text continues the value."""
        inp, d, nl = self.inp, self.d, self.nl
        char = self.ch
        if (
            char != nl
            and char <= " "
            and ((not multi and char != d) or (multi and not self._match_after_quote()))
        ):
            spaces = ""
            while True:
                spaces += self.ch
                self.ch = inp.next()
                if self.ch == nl or (multi and self._match_after_quote()):
                    return
                if not (self.ch <= " " and (multi or self.ch != d)):
                    break
            if self.handling != "RAISE_ERROR" and (
                not self._match_after_quote() if multi else self.ch != d
            ):
                self.value.add(self.q + spaces)
                if self.until_sep or self.ch not in (self.q, self.e):
                    self.value.add(self.ch)
                self.prev = self.ch
                self._quoted(multi=False)
        if not multi and self.ch not in (d, nl):
            raise _Broken(f"unexpected character {self.ch!r} after a quoted value")

    def _quote_escape(self) -> None:
        char, prev, q, e = self.ch, self.prev, self.q, self.e
        if char == e and prev == self.ee and self.ee != _NUL:
            self.value.add(e)
            self.ch = _NUL
        elif prev == e:
            self.value.add(q if char == q else prev)
            if char == q:
                self.ch = _NUL
        elif char == q and prev == q:
            self.value.add(q)
        elif prev == q:
            self._unescaped_in_value()

    def _unescaped_in_value(self) -> None:
        """A quote, then an escape or quote character, inside a quoted value."""
        if self.handling in ("SKIP_VALUE", "RAISE_ERROR"):
            self._value_skipping(quoted=False)
            return
        self.value.add(self.q)
        self.prev = self.ch
        q, e = self.q, self.e
        while self.ch != self.d and self.ch != self.nl:
            if self.ch != q and self.ch != e:
                if self.prev == q:
                    self._unescaped_in_value()
                    return
                self.value.add(self.ch)
            else:
                self._quote_escape()
            self.prev = self.ch
            self.ch = self.inp.next()

    def _value_skipping(self, *, quoted: bool) -> None:
        if self.handling == "SKIP_VALUE":
            self._skip_value()
        elif self.handling == "RAISE_ERROR":
            where = "a quoted value" if quoted else "a value"
            raise _Broken(
                f"unescaped quote character {self.q!r} inside {where} "
                "(unescapedQuoteHandling=RAISE_ERROR)"
            )

    def _skip_value(self) -> None:
        inp, md = self.inp, self.md
        self.value.reset()
        self.value.skipped = True
        if not md:
            char = self.ch
            while char not in (self.d, self.nl):
                char = inp.next()
            self.ch = char
            return
        while self.match < len(md) and self.ch != self.nl:
            self.match = self.match + 1 if md[self.match] == self.ch else 0
            self.ch = inp.next()

    def _unescaped_quote(self) -> bool:
        """A quote inside a quoted value followed by an ordinary character."""
        self.unescaped = True
        if self.handling == "BACK_TO_DELIMITER":
            while (pos := self._next_separator()) != -1:
                text = self.value.text
                self._emit(text[:pos])
                if text[pos] == self.nl:
                    self.pending.append(self._row() or [])
                self.value.text = text[pos + (1 if text[pos] == self.nl else len(self.md) or 1) :]
                self.value.units = units(self.value.text)
            self.value.add(self.ch)
            self.prev = _NUL
        elif self.handling in ("STOP_AT_CLOSING_QUOTE", "STOP_AT_DELIMITER"):
            self.value.add(self.q + self.ch)
            self.prev = self.ch
        else:
            self._value_skipping(quoted=True)
            return False
        self._quoted(multi=bool(self.md))
        return True

    def _next_separator(self) -> int:
        text = self.value.text
        if not self.md:
            return min((i for i in (text.find(self.d), text.find(self.nl)) if i >= 0), default=-1)
        at_nl, at_sep = text.find(self.nl), text.find(self.md)
        return at_nl if at_nl != -1 and at_nl < at_sep else at_sep

    # -- separators of several characters ----------------------------------------------------
    def _match(self, *, keep_partial: bool = True) -> bool:
        """Whether the separator starts at the current character (read through it); a partial
        match becomes text of the value."""
        md = self.md
        while True:
            if self.match >= len(md):
                raise _Broken("univocity failed on a skipped value before a separator")
            if self.ch != md[self.match]:
                break
            self.match += 1
            if self.match == len(md):
                self.match = 0
                return True
            self.ch = self.inp.next()
        if keep_partial:
            self._save_match()
        return False

    def _match_after_quote(self) -> bool:
        return self._match(keep_partial=False)

    def _save_match(self) -> None:
        if 0 < self.match < len(self.md):
            self.value.add(self.md[: self.match])
        self.match = 0

    def _record_multi(self) -> None:
        inp, nl = self.inp, self.nl
        if self.lead and self.ch <= " ":
            self._skip_spaces_multi()
        while self.ch != nl:
            if self.lead and self.ch <= " ":
                self._skip_spaces_multi()
            if self.ch == nl or self._match():
                self._emit(None)
            elif self.ch == self.q and self.value.length() == 0:
                self.unescaped, self.prev = False, _NUL
                inp.normalize = self.norm_in_quotes
                self._quoted_field(multi=True)
            else:
                self.unescaped, self.prev = False, _NUL
                self._append_until_separator()
                if self.trail:
                    self.value.trim()
                self._take()
            if self.ch != nl:
                self.ch = inp.next()
                if self.ch == nl:
                    self._emit(None)

    def _skip_spaces_multi(self) -> None:
        md = self.md
        while self.ch <= " " and self.match < len(md) and self.ch not in (self.nl, self.q):
            self.ch = self.inp.next()
            if md[self.match] == self.ch and self._match():
                self._emit(None)
                self.ch = self.inp.next()
        self._save_match()

    def _append_until_separator(self) -> None:
        md = self.md
        while self.match < len(md) and self.ch != self.nl:
            if md[self.match] == self.ch:
                self.match += 1
                if self.match == len(md):
                    break
            elif self.match > 0:
                self._save_match()
                continue
            else:
                self.value.add(self.ch)
            self.ch = self.inp.next()
        self._save_match()

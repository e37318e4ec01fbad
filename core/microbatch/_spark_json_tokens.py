"""The tokenizer of :mod:`microbatch.spark_json`: Jackson's JSON grammar, as Spark sets it up.

:class:`Lexer` pulls tokens from one record's text (bytes decoded with ``surrogateescape``, so
that bytes which are not UTF-8 stay visible to it) with the leniencies of
:class:`~microbatch.spark_json.SparkJsonOptions`, in Jackson's order and with Jackson's state
after an error; :class:`Bad` is the problem it (or the reader) found.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import string
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from microbatch import _json_decode as engine

if TYPE_CHECKING:
    from microbatch.spark_json import SparkJsonOptions

# tokens (Jackson's JsonToken) and contexts
START_OBJECT, END_OBJECT, START_ARRAY, END_ARRAY, FIELD_NAME = 1, 2, 3, 4, 5
VALUE_STRING, VALUE_INT, VALUE_FLOAT, VALUE_TRUE, VALUE_FALSE, VALUE_NULL = 6, 7, 8, 9, 10, 11
_ROOT, _ARRAY, _OBJECT = 0, 1, 2
STARTS, ENDS, NUMBERS = (START_OBJECT, START_ARRAY), (END_OBJECT, END_ARRAY), (VALUE_INT, 8)
BAD_VALUE, INVALID_JSON, INVALID_UTF8 = engine.BAD_VALUE, engine.INVALID_JSON, engine.INVALID_UTF8
NOT_AN_OBJECT, OUT_OF_RANGE = engine.NOT_AN_OBJECT, engine.OUT_OF_RANGE

MAX_DEPTH = 1000
"""Jackson's nesting limit, which Spark keeps: values nested deeper are malformed."""
MAX_NUMBER_DIGITS = 1000
"""Jackson's limit on the digits of one number."""
MAX_NAME_BYTES = 50_000
"""Jackson's limit on the UTF-8 length of a field name."""

_WS = re.compile(r"[ \t\n\r]*")
PLAIN = {q: re.compile(rf"[^{q}\\\x00-\x1f\udc80-\udcff]*") for q in "\"'"}
_ENTRY = r'[ \t\n\r]*"([^"\\\x00-\x1f\udc80-\udcff]*)"[ \t\n\r]*:[ \t\n\r]*(?=[^ \t\n\r/])'
_FIRST_ENTRY, _NEXT_ENTRY = re.compile(_ENTRY), re.compile(r"[ \t\n\r]*," + _ENTRY)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_NUMBER_GOES_ON, _DIGITS = frozenset("0123456789.eE"), re.compile("[0-9]*")
_RAW_BYTES = re.compile(r"[\udc80-\udcff]")  # bytes that are not UTF-8 (surrogateescape)
_SURROGATES = re.compile(r"[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
_LINE_END = re.compile(r"[\n\r]")
_COMMENT_BAD = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\udc80-\udcff]")
BIG_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
"""The text of a number as Java's BigDecimal reads it."""
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "/": "/", "\\": "\\"}
_HEX = frozenset(string.hexdigits)
_B64 = {
    c: i for i, c in enumerate(string.ascii_uppercase + string.ascii_lowercase + "0123456789+/")
}
_IDENT_PART = frozenset(["Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Nd", "Mn", "Mc", "Pc", "Sc", "Cf"])
_IDENT_START = frozenset(["Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Pc", "Sc"])
_ASCII = string.ascii_letters + string.digits
_ASCII_IDENT = frozenset(_ASCII + "_$" + "".join(map(chr, [*range(9), *range(14, 28), 127])))
_NAME_ASCII = frozenset(_ASCII + "_$@#*+-\x7f")
_TEXT = {VALUE_TRUE: "true", VALUE_FALSE: "false", VALUE_NULL: "null"}
_TEXT |= {END_OBJECT: "'}'", END_ARRAY: "']'"}
SPECIAL = {"NaN": math.nan, "-Infinity": -math.inf, "-INF": -math.inf}
SPECIAL |= dict.fromkeys(("Infinity", "+Infinity", "+INF"), math.inf)


def _ident_part(c: str) -> bool:
    """Java's ``Character.isJavaIdentifierPart``."""
    code = ord(c)
    if code < 128 or 0xDC80 <= code <= 0xDCFF:  # (an invalid byte is none)
        return c in _ASCII_IDENT
    return code <= 0x9F or unicodedata.category(c) in _IDENT_PART


def _ident_start(c: str) -> bool:
    """Java's ``Character.isJavaIdentifierStart``."""
    if ord(c) < 128:
        return c.isalpha() or c in "_$"
    return unicodedata.category(c) in _IDENT_START


_NAME_HIGH_BYTES = frozenset(b for b in range(128, 256) if _ident_part(chr(b)))


def _name_char(c: str) -> bool:
    """Whether ``c`` goes into an unquoted field name (Jackson looks at each UTF-8 byte)."""
    if ord(c) < 128:
        return c in _NAME_ASCII
    try:
        return all(b in _NAME_HIGH_BYTES for b in c.encode())
    except UnicodeEncodeError:
        return False


class Bad(Exception):
    """A problem with the record: invalid text, or a value its type cannot hold."""

    def __init__(
        self, kind: str, message: str, column: str | None = None, position: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.column, self.position = kind, message, column, position


class Lexer:
    """A pull tokenizer with Jackson's grammar, token order and state after an error.

    Like Jackson it reads a string only when asked (or when it moves past it), reads a scalar
    after a field name together with the name, and stays where an error left it, so that the
    parser, which reads on after some errors as Spark's does, sees the tokens Spark sees.
    """

    def __init__(self, text: str, options: SparkJsonOptions) -> None:
        self.text, self.n, self.pos = text, len(text), 0
        self.comments = options.allow_comments
        self.unquoted = options.allow_unquoted_field_names
        self.single = options.allow_single_quotes
        self.zeros = options.allow_numeric_leading_zeros
        self.any_escape = options.allow_backslash_escaping_any_character
        self.control = options.allow_unquoted_control_chars
        self.nonnumeric = options.allow_non_numeric_numbers
        self.cur: int | None = None  # the current token
        self.pending: int | None = None  # the value token read with a field name
        self.incomplete = False  # the current string token is not read yet
        self.start = 0  # where the current value token starts
        self.num, self.sval = "", ""
        self.special: float | None = None  # the value of NaN or an infinity
        self.ctx: list[Any] = [_ROOT, -1, None]  # kind, entries begun, current field name
        self.stack: list[list[Any]] = [self.ctx]
        self.first: Bad | None = None  # the first problem the parser passed over

    def fail(self, message: str, at: int | None = None) -> Bad:
        at = self.pos - 1 if at is None else at
        found = self.text[at] if 0 <= at < self.n else ""
        if found and 0xDC80 <= ord(found) <= 0xDCFF:
            return Bad(INVALID_UTF8, f"invalid UTF-8 (byte 0x{ord(found) - 0xDC00:02x})", None, at)
        return Bad(INVALID_JSON, f"invalid JSON at character {at}: {message}", None, at)

    def eof(self, where: str) -> Bad:
        self.pos = self.n
        return Bad(INVALID_JSON, f"invalid JSON: unexpected end of input {where}", None, self.n)

    def next_token(self) -> int | None:
        """The next token (None at the end of the input); raises ``Bad`` for invalid text."""
        if self.cur == FIELD_NAME:
            token, self.pending = self.pending, None
            if token in STARTS:
                self.push(_OBJECT if token == START_OBJECT else _ARRAY)
            self.cur = token
            return token
        if self.incomplete:
            self.incomplete = False
            self.read_string('"', self.control, skip=True)
        ctx = self.ctx
        if ctx[0] == _OBJECT:  # the usual entry: [,] "name" : value
            entry = (_NEXT_ENTRY if ctx[1] >= 0 else _FIRST_ENTRY).match(self.text, self.pos)
            if entry is not None and entry.end(1) - entry.start(1) <= MAX_NAME_BYTES // 4:
                ctx[1] += 1
                ctx[2], self.cur, self.pos = entry.group(1), FIELD_NAME, entry.end() + 1
                return self.after_name(self.text[self.pos - 1])
        c = self.skip_ws()
        if c is None:
            if len(self.stack) > 1:
                raise self.eof("inside an " + ("object" if ctx[0] == _OBJECT else "array"))
            self.cur = None
            return None
        if c == "]" or c == "}":
            self.start = self.pos - 1
            if ctx[0] != (_ARRAY if c == "]" else _OBJECT):
                raise self.fail(f"unexpected '{c}'")
            self.stack.pop()
            self.ctx = self.stack[-1]
            self.cur = END_ARRAY if c == "]" else END_OBJECT
            return self.cur
        ctx[1] += 1
        if ctx[0] != _ROOT and ctx[1] > 0:
            if c != ",":
                close = "}" if ctx[0] == _OBJECT else "]"
                raise self.fail(f"expected ',' or '{close}', got {c!r}")
            c = self.more("after ','")
        if ctx[0] == _OBJECT:
            ctx[2], self.cur = self.name(c), FIELD_NAME
            return self.after_name(self.skip_colon())
        self.start = self.pos - 1
        if c == '"':
            self.incomplete, self.cur = True, VALUE_STRING
        elif c == "[" or c == "{":
            self.push(_ARRAY if c == "[" else _OBJECT)
            self.cur = START_ARRAY if c == "[" else START_OBJECT
        else:
            self.cur = self.scalar(c)
        return self.cur

    def after_name(self, c: str) -> int:
        """Jackson reads a field's value with its name: a scalar whole, a string or a
        container only by its first character ``c`` (consumed)."""
        self.start = self.pos - 1
        if c == '"':
            self.incomplete, self.pending = True, VALUE_STRING
        elif c == "[" or c == "{":
            self.pending = START_ARRAY if c == "[" else START_OBJECT
        else:
            self.pending = self.scalar(c)
        return FIELD_NAME

    def push(self, kind: int) -> None:
        self.ctx = [kind, -1, None]
        self.stack.append(self.ctx)
        if len(self.stack) > MAX_DEPTH + 1:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep")

    def current_name(self) -> str | None:
        """Jackson's ``currentName()``: the field the current token belongs to."""
        context = self.stack[-2] if self.cur in STARTS and len(self.stack) > 1 else self.ctx
        return cast("str | None", context[2])

    def skip_children(self) -> None:
        """Move past the object or array that the current token opens (else do nothing)."""
        if self.cur not in STARTS:
            return
        depth = 1
        while depth:
            token = self.next_token()
            if token is None:
                if len(self.stack) > 1:
                    raise self.eof("inside a value")
                return
            depth += 1 if token in STARTS else -1 if token in ENDS else 0

    def string(self) -> str:
        """The text of the current string token."""
        if self.incomplete:
            self.incomplete = False
            self.sval = self.read_string('"', self.control)
        return self.sval

    def raw(self, start: int) -> str:
        """The source text from ``start`` to here."""
        text = self.text[start : self.pos]
        if _RAW_BYTES.search(text):
            text = text.encode(errors="surrogateescape").decode(errors="replace")
        return text

    def binary(self) -> bytes | None:
        """The current string token as padded base64, or None. Like Jackson it decodes an
        unread string from the source, taking whitespace between groups of four, and stops
        after a bad character: the next token skips the rest of the string from there."""
        unread = self.incomplete
        source = None if unread else iter(self.sval)
        end = run_end(PLAIN['"'], self.text, self.pos) if unread else 0
        if not unread or self.text.startswith('"', end):  # the usual case first
            try:
                text = self.text[self.pos : end] if unread else self.sval
                decoded = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                pass
            else:
                if unread:
                    self.pos, self.incomplete = end + 1, False
                return decoded
        out, group = bytearray(), list[int]()
        while True:
            c, escaped = self.base64_char(source)
            if c is None or (c == '"' and unread and not escaped and len(group) != 1):
                if group:  # padding is missing; a quote still ends the string
                    self.pos -= c is not None
                    return None
                self.incomplete = False
                return bytes(out)
            if c <= " " and not group:
                continue
            if c == "=" and len(group) > 1:
                if len(group) == 2 and self.base64_char(source)[0] != "=":
                    return None
            elif c in _B64:
                group.append(_B64[c])
                if len(group) < 4:
                    continue
            else:
                return None
            out += sum(v << 18 - 6 * i for i, v in enumerate(group)).to_bytes(3, "big")[
                : len(group) - 1
            ]
            group = []

    def base64_char(self, source: Iterator[str] | None) -> tuple[str | None, bool]:
        """The next character of a base64 string and whether it was escaped."""
        if source is not None:
            return next(source, None), False
        if self.pos >= self.n:
            raise self.eof("inside a string")
        self.pos += 1
        if self.text[self.pos - 1] == "\\":
            return self.escape(), True
        return self.text[self.pos - 1], False

    def escape(self) -> str:
        """The character of the escape whose backslash was just consumed."""
        text, pos = self.text, self.pos
        if pos >= self.n:
            raise self.eof("inside a string")
        c = text[pos]
        self.pos = pos = pos + 1
        if c == "u":
            digits = text[pos : pos + 4]
            for i, digit in enumerate(digits):
                if digit not in _HEX:
                    self.pos = pos + i + 1
                    raise self.fail("expected a hex digit in a \\u escape")
            if len(digits) < 4:
                raise self.eof("inside a \\u escape")
            self.pos = pos + 4
            return chr(int(digits, 16))
        if c in _ESCAPES:
            return _ESCAPES[c]
        if self.any_escape or (c == "'" and self.single):
            return c
        raise self.fail(f"unrecognized escape '\\{c}'")

    def describe(self, token: int | None) -> str:
        """The current token, shortly, for messages."""
        if token in STARTS:
            return "an object" if token == START_OBJECT else "an array"
        if token in NUMBERS:
            return self.text[self.start : self.pos][:80]
        if token == VALUE_STRING:
            return engine.preview(self.sval)
        return _TEXT.get(token or 0, "")

    def skip_ws(self) -> str | None:
        """The next character that is no whitespace or comment (consumed), None at the end."""
        text, pos, n = self.text, self.pos, self.n
        while True:
            if pos < n and text[pos] > " " and text[pos] != "/":
                self.pos = pos + 1
                return text[pos]
            pos = run_end(_WS, text, pos)
            if pos >= n:
                self.pos = n
                return None
            self.pos = pos + 1
            if text[pos] == "/":
                pos = self.comment(pos)
            elif text[pos] < " ":
                raise self.fail("a control character between tokens")

    def comment(self, pos: int) -> int:
        """Skip the comment at ``pos`` (a '/'): the position after it."""
        text, kind = self.text, self.text[pos + 1 : pos + 2]
        if not self.comments or kind not in ("*", "/"):
            if self.comments and not kind:
                raise self.eof("in a comment")
            self.pos += bool(self.comments)
            raise self.fail("a '/' that starts no comment (or allowComments is off)")
        if kind == "*":
            close = text.find("*/", pos + 2)
            body, after = (self.n, -1) if close < 0 else (close, close + 2)
        else:
            line_end = _LINE_END.search(text, pos)
            body = after = line_end.start() if line_end else self.n
        bad = _COMMENT_BAD.search(text, pos + 2, body)
        if bad:
            self.pos = bad.start() + 1
            raise self.fail("a control character in a comment")
        if after < 0:
            raise self.eof("in a comment")
        return after

    def more(self, where: str) -> str:
        """The next character that is no whitespace or comment; the end is an error."""
        c = self.skip_ws()
        if c is None:
            raise self.eof(where)
        return c

    def skip_colon(self) -> str:
        if self.more("after a field name") != ":":
            raise self.fail("expected ':' after a field name")
        return self.more("after ':'")

    def name(self, c: str) -> str:
        """The field name that starts with ``c`` (consumed)."""
        start = self.pos - 1
        if c == '"' or (c == "'" and self.single):
            name = self.read_string(c, self.control, name=True)
        elif not self.unquoted:
            raise self.fail(f"expected '\"' to start a field name, got {c!r}")
        elif not _name_char(c):
            raise self.fail(f"expected a field name, got {c!r}")
        else:
            while self.pos < self.n and _name_char(self.text[self.pos]):
                self.pos += 1
            name = self.text[start : self.pos]
        if len(name) > MAX_NAME_BYTES // 4 and len(name.encode()) > MAX_NAME_BYTES:
            raise self.fail(f"a field name longer than {MAX_NAME_BYTES} bytes", start)
        return name

    def read_string(self, quote: str, control: bool, skip: bool = False, name: bool = False) -> str:
        """The string whose opening ``quote`` was just consumed, checked as Jackson does."""
        text, n, pos, plain = self.text, self.n, self.pos, PLAIN[quote]
        end = run_end(plain, text, pos)
        if end < n and text[end] == quote:
            self.pos = end + 1
            return "" if skip else text[pos:end]
        parts, pos, surrogates = [text[pos:end]], end, False
        while True:
            if pos >= n:
                raise self.eof("inside a string")
            c = text[pos]
            pos += 1
            if c == quote:
                break
            self.pos = pos
            if c == "\\":
                c = self.escape()
                pos = self.pos
                surrogates = surrogates or "\ud800" <= c <= "\udfff"
                parts.append(c)
            elif c < " " and not control:
                raise self.fail("a raw control character in a string (escape it)")
            elif "\udc80" <= c <= "\udcff":
                c, pos = self.utf8(ord(c) - 0xDC00, pos)
                parts.append(c)
            else:
                parts.append(c)
            end = run_end(plain, text, pos)
            parts.append(text[pos:end])
            pos = end
        self.pos = pos
        value = "".join(parts)
        if surrogates:
            lone: list[str] = []
            value = _SURROGATES.sub(lambda found: _pair(found.group(), lone), value)
            if name and lone:
                raise self.fail("a lone surrogate \\u escape in a field name", pos - 1)
        return value

    def utf8(self, lead: int, pos: int) -> tuple[str, int]:
        """The character of bytes Python's decoder refused, read as Jackson reads them: it
        takes overlong forms, refuses surrogates, bad lead bytes and missing continuations."""
        if not 0xC0 <= lead <= 0xF7:
            raise self.fail("")
        need = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
        code = lead & (0x1F, 0x0F, 0x07)[need - 1]
        for _ in range(need):
            if pos >= self.n:
                raise self.eof("inside a string")
            more = ord(self.text[pos]) - 0xDC00
            self.pos = pos = pos + 1
            if not 0x80 <= more <= 0xBF:
                raise Bad(INVALID_UTF8, "invalid UTF-8 (a truncated sequence)", None, pos - 1)
            code = code << 6 | more & 0x3F
        if need == 2 and 0xD800 <= code <= 0xDFFF:
            raise Bad(INVALID_UTF8, "invalid UTF-8 (an encoded surrogate)", None, pos - 3)
        return ("??" if need == 3 and not 0x10000 <= code <= 0x10FFFF else chr(code)), pos

    def scalar(self, c: str) -> int:
        """The number, literal or single-quoted string that starts with ``c`` (consumed)."""
        if c == "-" or "0" <= c <= "9":
            return self.number(c)
        for word, token in (("true", VALUE_TRUE), ("false", VALUE_FALSE), ("null", VALUE_NULL)):
            if c == word[0]:
                self.literal(word, 1)
                return token
        if c == "'" and self.single:
            self.sval = self.read_string("'", self.control)
            return VALUE_STRING
        if c == "N" or c == "I":
            word = "NaN" if c == "N" else "Infinity"
            self.literal(word, 1)
            return self.non_numeric(word)
        if c == "+":
            if self.pos >= self.n:
                raise self.eof("in a number")
            self.pos += 1
            return self.bad_number_start(self.text[self.pos - 1], negative=False)
        if _ident_start(c):
            self.bad_token(c)
        raise self.fail(f"expected a value, got {c!r}")

    def non_numeric(self, word: str) -> int:
        if not self.nonnumeric:
            raise self.fail(f"{word} is no number unless allowNonNumericNumbers is on")
        self.num, self.special = word, SPECIAL[word]
        return VALUE_FLOAT

    def literal(self, word: str, matched: int) -> None:
        """Match the rest of ``word``, whose first ``matched`` characters are consumed."""
        text, pos = self.text, self.pos
        if text.startswith(word[matched:], pos):
            self.pos = pos = pos + len(word) - matched
        else:
            while matched < len(word) and pos < self.n and text[pos] == word[matched]:
                pos, matched = pos + 1, matched + 1
            self.pos = pos
            self.bad_token(word[:matched])
        if pos < self.n and text[pos] >= "0" and text[pos] not in "]}" and _ident_part(text[pos]):
            self.bad_token(word)

    def bad_token(self, matched: str) -> None:
        """Jackson's "unrecognized token": it takes the rest of the word and one more."""
        text, pos, length = self.text, self.pos, len(matched)
        start = pos - length
        while pos < self.n:
            pos += 1
            if not _ident_part(text[pos - 1]):
                break
            length += 1
            if length >= 256:
                break
        self.pos = pos
        raise self.fail(f"unrecognized token {engine.preview(text[start:pos].rstrip())}", start)

    def bad_number_start(self, c: str, negative: bool) -> int:
        """After a sign comes ``c`` (consumed): an infinity, or an error."""
        if c == "I":
            if self.pos >= self.n:
                raise self.eof("in a number")
            c = self.text[self.pos]
            self.pos += 1
            if c == "N" or c == "n":
                word = ("-" if negative else "+") + ("INF" if c == "N" else "Infinity")
                self.literal(word, 3)
                return self.non_numeric(word)
        if not negative:
            raise self.fail("a number must not start with '+'")
        raise self.fail(f"expected a digit after '-', got {c!r}")

    def number(self, c: str) -> int:
        """The number that starts with ``c`` ('-' or a digit, consumed)."""
        text, start = self.text, self.pos - 1
        found = _NUMBER.match(text, start)
        if found:
            end = found.end()
            if (
                end >= self.n or text[end] not in _NUMBER_GOES_ON
            ) and end - start <= MAX_NUMBER_DIGITS:
                self.pos, self.num, self.special = end, text[start:end], None
                return VALUE_FLOAT if found.group(1) or found.group(2) else VALUE_INT
        return self.number_slowly(c, start)

    def number_slowly(self, c: str, start: int) -> int:
        """Jackson's number grammar step by step, with its errors and positions."""
        text, n, pos = self.text, self.n, self.pos
        sign = ""
        if c == "-":
            if pos >= n:
                raise self.eof("in a number")
            c, pos, sign = text[pos], pos + 1, "-"
            self.pos = pos
            if not "0" <= c <= "9":
                return self.bad_number_start(c, negative=True)
        first = pos - 1
        if c == "0" and pos < n and "0" <= text[pos] <= "9":
            if not self.zeros:
                self.pos = pos
                raise self.fail("a leading zero (allowNumericLeadingZeros is off)", pos)
            while pos < n and text[pos] == "0":
                pos += 1
            first = pos if pos < n and "1" <= text[pos] <= "9" else pos - 1
        pos = run_end(_DIGITS, text, pos)
        digits, fraction, exponent = text[first:pos], "", ""
        if pos < n and text[pos] == ".":
            end = run_end(_DIGITS, text, pos + 1)
            if end == pos + 1:
                self.pos = min(end + 1, n)
                raise self.fail("a decimal point must be followed by a digit", end)
            fraction, pos = text[pos:end], end
        if pos < n and text[pos] in "eE":
            begin = pos + 2 if pos + 1 < n and text[pos + 1] in "+-" else pos + 1
            end = run_end(_DIGITS, text, begin)
            if end == begin:
                self.pos = min(end + 1, n)
                raise self.fail("an exponent must have digits", end)
            exponent, pos = text[pos:end], end
        self.pos = pos
        if (
            len(digits) + max(len(fraction) - 1, 0) + len(exponent.lstrip("eE+-"))
            > MAX_NUMBER_DIGITS
        ):
            raise self.fail(f"a number of more than {MAX_NUMBER_DIGITS} digits", start)
        self.num, self.special = sign + digits + fraction + exponent, None
        return VALUE_FLOAT if fraction or exponent else VALUE_INT


def run_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where the (maybe empty) run of ``pattern`` at ``pos`` ends."""
    found = pattern.match(text, pos)
    return found.end() if found else pos


def _pair(found: str, lone: list[str]) -> str:
    """A UTF-16 surrogate pair joined, or '?' for a lone surrogate (as Java encodes it)."""
    if len(found) == 2:
        return chr(0x10000 + ((ord(found[0]) - 0xD800) << 10) + ord(found[1]) - 0xDC00)
    lone.append(found)
    return "?"

"""Apache Spark 4's CSV reading rules: its options, its records of tokens and its header check.

Spark reads CSV with univocity-parsers 2.9.1 as its ``CSVOptions`` set it up; this module
returns what that reader returns, quirks included. :func:`records` (and :class:`Tokenizer`,
which keeps one file's parser from block to block) splits text into Spark's records of tokens,
:func:`stream_records` does it for ``multiLine`` files read piece by piece,
:func:`header_problem` is Spark's header check, and :func:`arrow_fast_path_ok` says when
``pyarrow.csv`` reads the same tokens. The tokenizer (``_spark_csv_parser``) runs character by
character in Python: give it only the lines pyarrow cannot read as Spark does, or whole files
when the options have no pyarrow equivalent. Values are ``_spark_csv_values``' business.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv

from ._spark_csv_parser import BREAK, CsvSyntaxError, Parser, blank, strip_line_end

__all__ = [
    "QUOTE_HANDLINGS",
    "CsvSyntaxError",
    "Record",
    "SparkCsvOptions",
    "Tokenizer",
    "arrow_fast_path_ok",
    "arrow_parse_options",
    "header_problem",
    "records",
    "separator",
    "stream_records",
]

QUOTE_HANDLINGS = (
    "STOP_AT_DELIMITER",
    "BACK_TO_DELIMITER",
    "STOP_AT_CLOSING_QUOTE",
    "SKIP_VALUE",
    "RAISE_ERROR",
)
"""The values of Spark's ``unescapedQuoteHandling`` option."""

_ESCAPED = {"t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}

Record = tuple[list[str | None], int, str]
"""A record as ``(tokens, first line, raw text)``: see :func:`records`."""


@dataclass(frozen=True)
class SparkCsvOptions:
    """Spark's CSV reading options, in snake_case, with Spark's defaults.

    ``quote``, ``escape`` and ``comment`` are one character, or empty to turn them off;
    ``char_to_escape_quote_escaping`` unset means ``escape`` (none when ``escape`` is the
    quote); ``sep`` is the separator itself, one or more characters (Spark's option text
    ``\\t`` is a tab here); ``line_sep`` ``None`` ends lines at ``\\n``, ``\\r\\n`` or ``\\r``.
    """

    sep: str = ","
    quote: str = '"'
    escape: str = "\\"
    char_to_escape_quote_escaping: str | None = None
    comment: str | None = None
    ignore_leading_white_space: bool = False
    ignore_trailing_white_space: bool = False
    null_value: str = ""
    empty_value: str = ""
    nan_value: str = "NaN"
    positive_inf: str = "Inf"
    negative_inf: str = "-Inf"
    multi_line: bool = False
    line_sep: str | None = None
    unescaped_quote_handling: str = "STOP_AT_DELIMITER"
    max_columns: int = 20480
    max_chars_per_column: int = -1

    def __post_init__(self) -> None:
        problems = [] if self.sep else ["sep must not be empty"]
        for name in ("quote", "escape", "char_to_escape_quote_escaping", "comment"):
            if len(getattr(self, name) or "") > 1:
                problems.append(f"{name} must be one character (or empty to turn it off)")
        if self.line_sep is not None and not 1 <= len(self.line_sep) <= 2:
            problems.append("line_sep must be one or two characters")
        if self.unescaped_quote_handling not in QUOTE_HANDLINGS:
            problems.append(f"unescaped_quote_handling must be one of {', '.join(QUOTE_HANDLINGS)}")
        if self.max_columns < 1 or self.max_chars_per_column < -1:
            problems.append("max_columns must be 1 or more, max_chars_per_column -1 or more")
        if problems:
            raise ValueError("; ".join(problems))


def separator(text: str) -> str:
    """The separator an option ``sep`` (or ``delimiter``) names, read as Spark reads it: one
    or more characters, where a backslash and the next character stand for one (``\\t`` is a
    tab; also ``\\r``, ``\\b``, ``\\f``, ``\\"``, ``\\'`` and ``\\\\``). Raises
    ``ValueError`` with Spark's reason when it names none."""
    if not text:
        raise ValueError("Delimiter cannot be empty string")
    out, index = [], 0
    while index < len(text):
        chunk = text[index : index + 2] if text[index] == "\\" else text[index]
        if chunk == "\\":
            raise ValueError(
                "Single backslash is prohibited. It has special meaning as beginning of an "
                "escape sequence. To get the backslash character, pass a string with two "
                "backslashes as the delimiter."
            )
        if len(chunk) == 2:
            if chunk[1] not in _ESCAPED:
                raise ValueError(f"Unsupported special character for delimiter: {chunk}")
            chunk = _ESCAPED[chunk[1]]
        out.append(chunk)
        index += 2 if text[index] == "\\" else 1
    return "".join(out)


# -- records ---------------------------------------------------------------------------------
class Tokenizer:
    """One file's records, line by line, from one parser as Spark reads a file: its state
    carries from one call to the next (the first record is the header, if the file has
    one). Not for ``multi_line`` (see :func:`stream_records`).

    ``started`` says a line of the file was parsed already (univocity drops a byte order
    mark only from the first line it parses); set it when lines are read elsewhere.
    """

    def __init__(self, options: SparkCsvOptions, *, started: bool = False) -> None:
        self.options = options
        self._parser = Parser(options)
        self._parser.started = started

    @property
    def started(self) -> bool:
        return bool(self._parser.started)

    def start(self) -> None:
        """Lines of the file were parsed elsewhere."""
        self._parser.started = True

    def records(self, text: str, first_line: int = 1) -> Iterator[Record]:
        """The records of whole lines ``text``, the first being line ``first_line``: see
        :func:`records`."""
        options, parser = self.options, self._parser
        for line, number in _lines(text, options.line_sep, first_line):
            if not (blank(line) or (options.comment and line.startswith(options.comment))):
                tokens, raw = parser.line(line, number)
                yield tokens, number, raw


def records(text: str, options: SparkCsvOptions, *, first_line: int = 1) -> Iterator[Record]:
    """Spark's records of ``text``, each as ``(tokens, first line, raw text)``.

    ``text`` is a whole file, or whole lines of one from line ``first_line`` (a byte order
    mark is dropped only at line 1). Lines of only characters up to U+0020 and lines starting
    with ``comment`` are skipped as Spark skips them; with ``multi_line`` the text is one
    stream. The first record is the header line, if the file has one.

    A token is ``None`` where Spark sees null whatever ``null_value`` is (an unquoted empty
    field, a skipped value); an empty quoted field is already ``empty_value``. The raw text is
    what Spark puts in the corrupt record column. Raises :class:`CsvSyntaxError` where Spark
    fails the read.
    """
    if not options.multi_line:
        yield from Tokenizer(options, started=first_line != 1).records(text, first_line)
        return
    for tokens, line, start, end in Parser(options).stream(text, first_line):
        yield tokens, line, strip_line_end(text[start:end])


def stream_records(
    read: Callable[[int], str], options: SparkCsvOptions, *, piece: int = 16 << 20
) -> Iterator[Record]:
    """The records of a ``multi_line`` file whose text comes from ``read(size)`` (at least
    ``size`` characters unless the text ends, all of it for ``-1``; ``""`` at the end), as
    :func:`records` gives them for the whole text.

    Records may span lines, so the text cannot be cut at line ends: it is read about
    ``piece`` characters at a time, and a record is taken from a piece only when it ends with
    the line separator before the piece ends (what univocity decides near the end of its
    input may change with more input); the rest waits for the next piece, and so does an
    error found there. A record longer than a piece is read in pieces that double, so the
    work stays linear.
    """
    if options.unescaped_quote_handling == "BACK_TO_DELIMITER" or len(options.sep) > 1:
        piece = -1  # what a record holds depends on the one before: the text is read whole
    line, sep, first, before, after_cr = 1, options.line_sep, True, False, False
    text = read(piece)
    while True:
        more = read(max(piece, len(text))) if text and piece > 0 else ""
        if sep is None:  # univocity's guess: the first line break of the input
            match = BREAK.search(text)
            guess = match.group() if match else "\n"
        parser = Parser(options)
        if not first:
            parser.started, parser.first_row, parser.text_before = True, False, before
        found = parser.stream(
            text, line, sep=sep or guess, whole=first and not more, after_cr=after_cr
        )
        if not more:
            for tokens, number, start, end in found:
                yield tokens, number, strip_line_end(text[start:end])
            return
        separator, keep, keep_line = sep or guess, 0, line
        try:
            for tokens, number, start, end in found:
                if end >= len(text) - 1 or not text.endswith(separator, 0, end):
                    if not first:
                        keep, keep_line = start, number
                    break
                yield tokens, number, strip_line_end(text[start:end])
                sep, first = separator, False
                keep, keep_line = end, line + len(BREAK.findall(text, 0, end))
        except CsvSyntaxError:
            after = text.find(separator, parser.inp.i)
            if 0 <= after < len(text) - 1:
                raise  # not where more text could change it
        before = before or not blank(text[:keep])
        after_cr = text[keep - 1 : keep] == "\r" if keep else after_cr
        text, line = text[keep:] + more, keep_line


def _lines(text: str, line_sep: str | None, first_line: int) -> Iterator[tuple[str, int]]:
    """Hadoop's lines: ended by ``line_sep``, else by any of ``\\n``, ``\\r\\n`` and ``\\r``."""
    if line_sep is not None:
        for number, line in enumerate(text.split(line_sep), first_line):
            yield line, number
        return
    start, number = 0, first_line
    while start < len(text):
        match = BREAK.search(text, start)
        yield text[start : match.start() if match else len(text)], number
        start, number = match.end() if match else len(text), number + 1


# -- header ----------------------------------------------------------------------------------
def header_problem(
    tokens: list[str | None],
    schema: pa.Schema,
    options: SparkCsvOptions,
    *,
    case_sensitive: bool = False,
) -> str | None:
    """Spark's complaint about a header record that does not match ``schema`` (its columns
    without the corrupt record column), or ``None``: Spark logs it with ``enforceSchema=true``
    (the default) and fails the read with ``enforceSchema=false``."""
    header = [options.null_value if token is None else token for token in tokens]
    names = schema.names
    if len(header) != len(names):
        return (
            "Number of column in CSV header is not equal to number of fields in the schema: "
            f"Header length: {len(header)}, schema size: {len(names)}"
        )
    for found, expected in zip(header, names, strict=True):
        if found != expected and (case_sensitive or found.lower() != expected.lower()):
            return (
                f"CSV header does not conform to the schema. Header: {', '.join(header)}; "
                f"Schema: {', '.join(names)}; Expected: {expected} but found: {found}"
            )
    return None


# -- the pyarrow fast path -------------------------------------------------------------------
def arrow_fast_path_ok(options: SparkCsvOptions) -> bool:
    """Whether ``pyarrow.csv`` with :func:`arrow_parse_options` reads the same tokens as Spark
    from well-formed lines, with null values ``[""]`` and quoted strings never null: an
    unquoted empty field is then null (Spark: null) and a quoted empty one ``""`` (Spark:
    ``empty_value``, which the caller puts in; ``null_value`` is the caller's too).

    A line is well-formed when it has the schema's number of fields, it is not blank (not only
    characters up to U+0020), it does not start with ``comment``, no field starts with U+0000
    when quoting is off (Spark takes it for the quote), and each field starting with the quote
    character ends with a quote right before the separator or the line end and holds no other
    quote (doubled quotes are fine when ``escape`` is the quote) nor the escape character nor
    a line break. A block that does not start the file must not start with a byte order mark
    (pyarrow drops it), and the schema must not have more than ``max_columns`` columns.
    """
    o = options
    ascii_chars = all(len(c) <= 1 and c < "\x80" for c in (o.sep, o.quote, o.escape))
    return (
        len(o.sep) == 1
        and ascii_chars
        and o.sep not in (o.quote, o.escape, "\n", "\r", "\0")
        and bool(o.escape or not o.quote)  # with no escape, a closing "" is read as "
        and not (o.multi_line or o.line_sep or o.char_to_escape_quote_escaping)
        and not (o.ignore_leading_white_space or o.ignore_trailing_white_space)
        and o.max_chars_per_column == -1
    )


def arrow_parse_options(options: SparkCsvOptions) -> pacsv.ParseOptions:
    """The ``pyarrow.csv.ParseOptions`` equivalent to ``options``: see
    :func:`arrow_fast_path_ok` for when they read what Spark reads."""
    return pacsv.ParseOptions(
        delimiter=options.sep,
        quote_char=options.quote or False,
        escape_char=False,
        double_quote=bool(options.quote) and options.escape == options.quote,
        newlines_in_values=False,
        ignore_empty_lines=True,
    )

"""The options of the file sources, and the checks that need several of them at once
(:func:`flag` declares the boolean options of the sinks too).

Every check runs when the source is configured (``load()``), not on the query's thread: Spark
reports these errors only once the query runs.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from microbatch import Rule
from microbatch.options import Option, Options, OptionSpec

from ._datetimes import DATETIME_OPTIONS
from ._location import SourceLocation, archive_conflict
from ._records import is_utf8
from ._spark_csv import QUOTE_HANDLINGS, separator

__all__ = [
    "CSV_OPTIONS",
    "DEFAULT_IN_PROGRESS_SUFFIXES",
    "JSON_OPTIONS",
    "ORC_OPTIONS",
    "PARQUET_OPTIONS",
    "TEXT_OPTIONS",
    "FileSourceOptionSpec",
    "flag",
]

DEFAULT_IN_PROGRESS_SUFFIXES = (".tmp", ".part", ".crdownload", ".inprogress", "._COPYING_")


class FileSourceOptionSpec(OptionSpec):
    """An :class:`OptionSpec` that also checks, once the options are valid, that the path
    exists (Spark's ``PATH_NOT_FOUND``)."""

    def parse(self, raw: Mapping[str, Any], *, connector: str) -> Options:
        options = super().parse(raw, connector=connector)
        SourceLocation.resolve(options.path).check_exists()
        return options


# -- checks ----------------------------------------------------------------------------------
def _path_problem(path: str) -> str | None:
    if not path.strip():
        return "must not be empty: give the folder, file or glob to read"
    if "**" in path:
        return (
            "'**' is not supported; give the folder and set option recursiveFileLookup=true to "
            "read files in every subfolder"
        )
    try:
        SourceLocation.resolve(path)
    except (ImportError, ValueError) as error:
        return (
            f"names no usable filesystem ({error}); install the fsspec package for its "
            "protocol (e.g. s3fs for s3://)"
        )
    return None


def _archive_outside_source(options: Options) -> bool:
    if options.clean_source != "ARCHIVE" or not options.source_archive_dir:
        return True
    try:
        source = SourceLocation.resolve(options.path)
        archive = SourceLocation.resolve(str(options.source_archive_dir))
    except (ImportError, ValueError) as error:
        raise ValueError(f"option 'sourceArchiveDir' cannot be used: {error}") from None
    conflict = archive_conflict(source, archive)
    if conflict:
        raise ValueError(conflict)
    return True


def _one_char_or_empty(value: str) -> str | None:
    return None if len(value) <= 1 else "must be a single character (or empty to turn it off)"


def _utf8(encoding: str) -> str | None:
    if encoding.lower().replace("-", "").replace("_", "") == "utf8":
        return None
    return "is not supported: files must be UTF-8 (convert them first, e.g. with iconv)"


_SPARK_CHARSETS = {
    "iso8859-1": "iso-8859-1",
    "ascii": "us-ascii",
    "utf-16": "utf-16",
    "utf-16-be": "utf-16be",
    "utf-16-le": "utf-16le",
    "utf-32": "utf-32",
    "utf-8": "utf-8",
}
"""The charsets Spark 4 reads (spark.sql.legacy.javaCharsets off), by Python's name."""


def _charset(encoding: str) -> str | None:
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        name = None
    if name in _SPARK_CHARSETS:
        return None
    return (
        "is invalid: [INVALID_PARAMETER_VALUE.CHARSET] expects one of the "
        f"{', '.join(sorted(_SPARK_CHARSETS.values()))} (convert the files first, e.g. with "
        "iconv)"
    )


def _json_charset(o: Any) -> bool:
    """Spark's rules for JSON Lines in another charset than UTF-8: a byte order given for
    UTF-16 and UTF-32, and ``lineSep``."""
    if o.multi_line or not o.is_set("encoding") or is_utf8(o.encoding):
        return True
    if codecs.lookup(o.encoding).name in ("utf-16", "utf-32"):
        raise ValueError(
            f"The {o.encoding} encoding must not be included in the denyList when multiLine is "
            "disabled: UTF-16 and UTF-32 need their byte order (UTF-16LE, UTF-32BE...), or set "
            "multiLine"
        )
    if not o.is_set("lineSep"):
        raise ValueError(
            f"The lineSep option must be specified for the {o.encoding} encoding (as Spark "
            "requires): set lineSep, e.g. to '\\n'"
        )
    return True


_RULES = (
    Rule(
        lambda o: not (o.is_set("maxFilesPerTrigger") and o.is_set("maxBytesPerTrigger")),
        "Options 'maxFilesPerTrigger' and 'maxBytesPerTrigger' can't be both set at the same "
        "time: keep one of them",
        names=("maxFilesPerTrigger", "maxBytesPerTrigger"),
    ),
    Rule(
        lambda o: o.clean_source != "ARCHIVE" or o.source_archive_dir,
        "Archive mode must be used with 'sourceArchiveDir' option: set sourceArchiveDir to the "
        "folder that receives the archived files",
        names=("cleanSource", "sourceArchiveDir"),
    ),
    Rule(
        _archive_outside_source,
        "option 'sourceArchiveDir' must be outside the source path",
        names=("path", "cleanSource", "sourceArchiveDir"),
    ),
    Rule(
        lambda o: o.clean_source == "ARCHIVE" or not o.is_set("sourceArchiveDir"),
        "option 'sourceArchiveDir' only applies with cleanSource=archive",
        names=("cleanSource", "sourceArchiveDir"),
    ),
)


def _csv_separator(text: str) -> str | None:
    try:
        separator(text)
    except ValueError as error:
        return f"is not a separator: {error}"
    return None


def _csv_line_sep(sep: str) -> str | None:
    if not sep:
        return "cannot be an empty string: give the line separator, e.g. ';' or '\\r\\n'"
    return None if len(sep) <= 2 else "must be one or two characters (e.g. ';' or '\\r\\n')"


_CSV_RULES = (
    Rule(
        lambda o: not (o.is_set("sep") and o.is_set("delimiter")) or o.sep == o.delimiter,
        "options 'sep' and 'delimiter' name the same setting: give only one",
        names=("sep", "delimiter"),
    ),
)


# -- declarations ----------------------------------------------------------------------------
def flag(name: str, doc: str, **more: Any) -> Option:
    """A boolean option that is off unless set."""
    return Option(name=name, type="bool", default=False, doc=doc, **more)


_COMMON = (
    Option(
        name="path",
        required=True,
        validate=_path_problem,
        doc="Folder, file or glob pattern to read (an fsspec URL: a local path, memory://..., "
        "s3://... with s3fs installed). load(path) sets it.",
    ),
    Option(
        name="maxFilesPerTrigger",
        type="int",
        minimum=1,
        doc="Most new files taken per batch (default: all). Not with maxBytesPerTrigger.",
    ),
    Option(
        name="maxBytesPerTrigger",
        type="int",
        minimum=1,
        doc="Most bytes of new files taken per batch; a larger file still goes alone in one "
        "batch. Not with maxFilesPerTrigger.",
    ),
    flag(
        "latestFirst",
        "Take the newest files first (then maxFileAge does not apply when a max... limit is set).",
    ),
    Option(
        name="maxFileAge",
        type="duration",
        default=timedelta(days=7),
        doc="Files older than the newest file taken minus this age are not read; they are "
        "logged at WARNING and counted (metric numFilesSkippedForAge).",
    ),
    flag(
        "fileNameOnly",
        "Identify files by name only: a file whose name was taken before, in any folder, "
        "is not read.",
    ),
    Option(
        name="maxCachedFiles",
        type="int",
        default=10000,
        minimum=0,
        doc="On filesystems without change notifications: how many listed files not yet taken "
        "are kept for the next batches instead of listing again (0: list every trigger).",
    ),
    Option(
        name="discardCachedInputRatio",
        type="float",
        default=0.2,
        minimum=0,
        maximum=1,
        doc="List again when the cached files fall below this fraction of maxFilesPerTrigger.",
    ),
    Option(
        name="cleanSource",
        default="OFF",
        choices=("OFF", "ARCHIVE", "DELETE"),
        doc="What happens to the files of a batch once it is committed: OFF, ARCHIVE (moved "
        "under sourceArchiveDir) or DELETE.",
    ),
    Option(
        name="sourceArchiveDir",
        doc="Folder receiving archived files (cleanSource=archive), outside the source path; "
        "a file /a/b/f.json moves to <sourceArchiveDir>/a/b/f.json.",
    ),
    flag(
        "ignoreMissingFiles",
        "Skip (with a warning) a file that was removed between listing and reading, "
        "instead of failing the batch.",
    ),
    flag("recursiveFileLookup", "Read files in every subfolder (no partition columns)."),
    Option(
        name="pathGlobFilter",
        doc="Only read files whose name matches this glob pattern (e.g. '*.json').",
    ),
    Option(
        name="minFileAge",
        type="duration",
        default=timedelta(0),
        doc="Hold every file back until its size and modification time have not changed for "
        "this long (for writers that reopen a file to append to it); default off.",
    ),
    Option(
        name="settleTime",
        type="duration",
        default=timedelta(seconds=1),
        doc="A file that may still be written in place and whose writer's close was not seen "
        "(present when the query started, or on a filesystem without notifications) is taken "
        "once its size and modification time have not changed for this long; 0 turns it off. "
        "Files moved into place, and files on object stores, are taken at once.",
    ),
    Option(
        name="inProgressSuffixes",
        type="list",
        default=DEFAULT_IN_PROGRESS_SUFFIXES,
        doc="Files whose names end in one of these are being written and are never read.",
    ),
    Option(
        name="schemaInference",
        type="bool",
        doc="Infer the schema from the files present when the source starts (default: the "
        "session setting schemaInference).",
    ),
)

_MODES = (
    Option(
        name="mode",
        default="PERMISSIVE",
        choices=("PERMISSIVE", "DROPMALFORMED", "FAILFAST"),
        doc="Malformed lines: PERMISSIVE (bad values become null, the line goes to "
        "columnNameOfCorruptRecord when the schema has it), DROPMALFORMED (dropped), FAILFAST "
        "(the batch fails naming the file and line).",
    ),
    Option(
        name="columnNameOfCorruptRecord",
        default="_corrupt_record",
        doc="String column of the schema that receives malformed lines in PERMISSIVE mode.",
    ),
)

_ENCODING = Option(
    name="encoding",
    default="UTF-8",
    validate=_charset,
    doc="Character set of the files, one of Spark's: UTF-8, ISO-8859-1, US-ASCII, UTF-16, "
    "UTF-16BE, UTF-16LE, UTF-32; a file in another one than UTF-8 is read whole into memory. "
    "JSON: without it a multiLine file's UTF-16 or UTF-32 is detected; JSON Lines in another "
    "charset need lineSep.",
)
_TEXT_ENCODING = Option(
    name="encoding",
    default="UTF-8",
    validate=_utf8,
    doc="Character set of the files; only UTF-8 is supported.",
)


def _line_sep(sep: str) -> str | None:
    return None if sep else "cannot be an empty string: give the record separator, e.g. ';'"


_JSON_SYNTAX = (
    flag("allowComments", "Java and C++ style comments (/* ... */ and // ...) in the records."),
    flag(
        "allowUnquotedFieldNames",
        "Field names without quotes (letters, digits and _ $ @ # * + -).",
    ),
    Option(
        name="allowSingleQuotes",
        type="bool",
        default=True,
        doc="Strings and field names in single quotes.",
    ),
    flag("allowNumericLeadingZeros", "Numbers with leading zeros (007 is 7)."),
    flag(
        "allowBackslashEscapingAnyCharacter",
        "A backslash before any character stands for that character ('\\q' is 'q').",
    ),
    flag("allowUnquotedControlChars", "Raw control characters (tab, line feed...) in strings."),
    Option(
        name="allowNonNumericNumbers",
        type="bool",
        default=True,
        doc="NaN, Infinity, +Infinity, -Infinity, +INF and -INF as numbers (and as the strings "
        '"NaN", "Infinity"... for FLOAT and DOUBLE columns).',
    ),
    flag(
        "primitivesAsString",
        "Schema inference: infer every number and boolean as STRING.",
    ),
    flag(
        "prefersDecimal",
        "Schema inference: infer numbers with a fraction or exponent (and strings that are "
        "decimal numbers) as DECIMAL when they fit 38 digits, instead of DOUBLE and STRING.",
    ),
    flag(
        "dropFieldIfAllNull",
        "Schema inference: leave out columns whose values are all null or empty arrays or "
        "structs (else they are STRING).",
    ),
    Option(
        name="lineSep",
        validate=_line_sep,
        doc="Separator of the records (default: a line break, \\n, \\r\\n or \\r); "
        "not used with multiLine.",
    ),
)

JSON_OPTIONS = FileSourceOptionSpec(
    *_COMMON,
    *_MODES,
    flag(
        "multiLine",
        "Each file is one JSON record (an object, or an array of objects giving a row each) "
        "that may span lines, instead of one record per line.",
    ),
    *_JSON_SYNTAX,
    _ENCODING,
    *DATETIME_OPTIONS,
    rules=(*_RULES, Rule(_json_charset, "", names=("encoding", "multiLine", "lineSep"))),
)

CSV_OPTIONS = FileSourceOptionSpec(
    *_COMMON,
    *_MODES,
    flag(
        "header",
        "The first record of each file (after blank and comment lines) holds column names: it "
        "is not data (columns are matched by position) and names the columns when the schema "
        "is inferred.",
    ),
    Option(
        name="enforceSchema",
        type="bool",
        default=True,
        doc="With header: read the columns by position whatever the header says (a header "
        "that does not match the schema is logged at WARNING); false: the header must name "
        "the schema's columns in order (case-insensitive), else the read fails.",
    ),
    Option(
        name="sep",
        default=",",
        validate=_csv_separator,
        doc="Field separator: one or more characters; a backslash and the next character "
        "stand for one (\\t is a tab; also \\r, \\b, \\f, \\\", \\' and \\\\).",
    ),
    Option(name="delimiter", default=",", validate=_csv_separator, doc="Same as sep."),
    Option(
        name="quote",
        default='"',
        validate=_one_char_or_empty,
        doc="Quote character; empty to turn quoting off.",
    ),
    Option(
        name="escape",
        default="\\",
        validate=_one_char_or_empty,
        doc="Character escaping a quote inside a quoted value (the quote itself for doubled "
        'quotes, as in ""); empty for none.',
    ),
    Option(
        name="charToEscapeQuoteEscaping",
        validate=_one_char_or_empty,
        doc="Character escaping the escape character before a quote (default: the escape "
        "character itself, none when escape is the quote).",
    ),
    Option(
        name="comment",
        validate=_one_char_or_empty,
        doc="Lines starting with this character are skipped (default: none).",
    ),
    flag("ignoreLeadingWhiteSpace", "Drop white space before each value."),
    flag("ignoreTrailingWhiteSpace", "Drop white space after each value."),
    Option(
        name="nullValue",
        default="",
        doc='Text that stands for null (after unquoting: "NA" is null with nullValue NA).',
    ),
    Option(
        name="emptyValue",
        default="",
        doc='The value of an empty quoted field ""; an unquoted empty field is always null.',
    ),
    Option(name="nanValue", default="NaN", doc="Text read as NaN in FLOAT and DOUBLE columns."),
    Option(
        name="positiveInf",
        default="Inf",
        doc="Text read as positive infinity in FLOAT and DOUBLE columns.",
    ),
    Option(
        name="negativeInf",
        default="-Inf",
        doc="Text read as negative infinity in FLOAT and DOUBLE columns.",
    ),
    flag(
        "multiLine",
        "Records may span lines (quoted values may hold line breaks): each file is read as "
        "one stream of records.",
    ),
    Option(
        name="lineSep",
        validate=_csv_line_sep,
        doc="Line separator, one or two characters (default: \\n, \\r\\n or \\r).",
    ),
    Option(
        name="unescapedQuoteHandling",
        default="STOP_AT_DELIMITER",
        choices=QUOTE_HANDLINGS,
        doc="A quote inside a value that is not escaped: STOP_AT_DELIMITER (the value runs to "
        "the separator, quotes included), BACK_TO_DELIMITER, STOP_AT_CLOSING_QUOTE, "
        "SKIP_VALUE (null) or RAISE_ERROR (the read fails).",
    ),
    Option(
        name="maxColumns",
        type="int",
        default=20480,
        minimum=1,
        doc="Most values in a record; a record with more fails the read.",
    ),
    Option(
        name="maxCharsPerColumn",
        type="int",
        default=-1,
        minimum=-1,
        doc="Most characters in a value (-1: no limit); a longer value fails the read.",
    ),
    flag(
        "inferSchema",
        "With schema inference: infer column types from the data (BIGINT, DOUBLE, BOOLEAN, "
        "DATE, TIMESTAMP, else STRING); without it every column is STRING.",
    ),
    _ENCODING,
    *DATETIME_OPTIONS,
    rules=_RULES + _CSV_RULES,
)

TEXT_OPTIONS = FileSourceOptionSpec(
    *_COMMON,
    flag("wholetext", "One row per file holding its whole text, instead of one row per line."),
    _TEXT_ENCODING,
    rules=_RULES,
)

_MERGE = flag(
    "mergeSchema",
    "With schema inference: merge the schemas of all files instead of taking the first file's.",
)

PARQUET_OPTIONS = FileSourceOptionSpec(*_COMMON, _MERGE, rules=_RULES)
ORC_OPTIONS = FileSourceOptionSpec(*_COMMON, _MERGE, rules=_RULES)

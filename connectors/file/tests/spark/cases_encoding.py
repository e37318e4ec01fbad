"""Reader cases for ``record_spark_readers.py`` (see ``reader_cases.py``): files in other
charsets than UTF-8, with ``encoding`` set, and a multiLine JSON file whose UTF-16 or UTF-32 is
detected."""

from __future__ import annotations

from reader_cases import ReaderCase


def _bytes(data: bytes) -> str:
    """``data`` as a case's ``input`` with ``raw_bytes``."""
    return data.decode("latin-1")


def _case(name: str, fmt: str, text: str, charset: str, schema: str, note: str, **options: str):
    return ReaderCase(
        name=name,
        format="json" if fmt == "json" else "csv",
        input=_bytes(text.encode(charset)),
        schema=schema,
        options=options,
        note=note,
        raw_bytes=True,
    )


_JSON_LINES = '{"a": "caf\u00e9", "n": 1}\n{"a": "\u00fcber", "n": 2}\n{"a": "\u20ac", "n": 3}\n'
_CSV_LINES = "caf\u00e9,1\nna\u00efve,2\n\u00c5ngstr\u00f6m,3\n"
_CSV_EURO = "\u20ac,1\n\u201cq\u201d,2\n"
_ARRAY = '[{"a": "caf\u00e9", "n": 1}, {"a": "\u00fcber", "n": 2}]'

ENCODING: list[ReaderCase] = [
    _case("json_enc_utf16le_linesep", "json", _JSON_LINES, "utf-16-le", "a STRING, n INT",
          "JSON Lines in UTF-16LE, lineSep given", encoding="UTF-16LE", lineSep="\n"),
    _case("json_enc_utf16be_linesep", "json", _JSON_LINES, "utf-16-be", "a STRING, n INT",
          "JSON Lines in UTF-16BE", encoding="UTF-16BE", lineSep="\n"),
    _case("json_enc_latin1_linesep", "json", _JSON_LINES.replace("\u20ac", "E"), "latin-1",
          "a STRING, n INT", "JSON Lines in ISO-8859-1", encoding="ISO-8859-1", lineSep="\n"),
    _case("json_enc_utf32le_multiline", "json", _ARRAY, "utf-32-le", "a STRING, n INT",
          "a multiLine document in UTF-32LE, given", encoding="UTF-32LE", multiLine="true"),
    _case("json_enc_utf16_bom_detected", "json", _ARRAY, "utf-16", "a STRING, n INT",
          "a multiLine document in UTF-16 with a byte order mark, detected", multiLine="true"),
    _case("json_enc_utf16le_detected", "json", _ARRAY, "utf-16-le", "a STRING, n INT",
          "a multiLine document in UTF-16LE without a mark, detected", multiLine="true"),
    _case("csv_enc_latin1", "csv", _CSV_LINES, "latin-1", "s STRING, n INT",
          "CSV in ISO-8859-1", encoding="ISO-8859-1"),
    _case("csv_enc_windows1252", "csv", _CSV_EURO, "cp1252", "s STRING, n INT",
          "CSV in windows-1252 (the euro sign and curly quotes)", encoding="windows-1252"),
    _case("csv_enc_utf16le", "csv", _CSV_LINES, "utf-16-le", "s STRING, n INT",
          "CSV in UTF-16LE, lines", encoding="UTF-16LE"),
    _case("json_enc_utf16le_detected_lines", "json", _JSON_LINES, "utf-16-le",
          "a STRING, n INT", "JSON Lines in UTF-16LE given without encoding"),
    _case("csv_enc_latin1_header_multiline", "csv", 'name,n\n"caf\u00e9\nbar",1\n', "latin-1",
          "name STRING, n INT", "ISO-8859-1 with a header and a quoted line break",
          encoding="ISO-8859-1", header="true", multiLine="true"),
]  # fmt: skip

"""Schemas: Spark-style DDL strings to and from ``pyarrow.Schema``.

``parse_ddl("id BIGINT NOT NULL, tags ARRAY<STRING>, price DECIMAL(10,2) COMMENT 'EUR'")``
gives a schema; ``to_ddl`` turns it back into that text. ``TIMESTAMP`` is
``timestamp("us", "UTC")``, ``TIMESTAMP_NTZ`` is ``timestamp("us")``, ``DATE`` is ``date32``.
A column comment is stored in the field metadata under ``b"comment"``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from microbatch.errors import SchemaError

__all__ = [
    "as_schema",
    "checked_cast",
    "float32_overflow",
    "has_float32",
    "parse_ddl",
    "parse_type",
    "schema_diff",
    "to_ddl",
    "type_to_ddl",
]

_SIMPLE: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
}
_ALIASES = {"BYTE": "TINYINT", "SHORT": "SMALLINT", "INTEGER": "INT", "LONG": "BIGINT"}
_NAMES = {dtype: name for name, dtype in _SIMPLE.items()}
_KNOWN = ", ".join([*_SIMPLE, *_ALIASES, "DECIMAL(p,s)", "ARRAY<t>", "MAP<k, v>", "STRUCT<n: t>"])
_TOKEN = re.compile(
    r"(?P<space>\s+)|(?P<word>\w+)|(?P<quoted>`(?:[^`]|``)*`)"
    r"|(?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<punct>[<>(),:])"
)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTES = {"`": "backquoted name", "'": "string", '"': "string"}


@dataclass(frozen=True)
class _Token:
    kind: str  # word, quoted, text, punct or end
    text: str
    pos: int


def parse_ddl(ddl: str) -> pa.Schema:
    """The schema described by ``ddl``, e.g. ``"id BIGINT NOT NULL, m MAP<STRING, INT>"``.

    Raises ``SchemaError`` naming the position and the offending token.
    """
    parser = _Parser(ddl, "schema")
    if parser.peek().kind == "end":
        raise SchemaError(
            f'Cannot parse schema "{ddl}": the schema is empty '
            '(write columns as "name TYPE, ...", e.g. "id BIGINT, name STRING")'
        )
    fields = parser.fields()
    parser.expect_end("separate columns with ','")
    return pa.schema(fields)


def parse_type(text: str) -> pa.DataType:
    """The Arrow type for one DDL type such as ``"BIGINT"`` or ``"ARRAY<DECIMAL(10,2)>"``."""
    parser = _Parser(text, "type")
    dtype = parser.type()
    parser.expect_end("give a single type")
    return dtype


def type_to_ddl(dtype: pa.DataType) -> str:
    """The DDL spelling of one Arrow type, e.g. ``"ARRAY<BIGINT>"`` (``SchemaError`` if none)."""
    return _type_ddl(dtype, "")


def as_schema(value: pa.Schema | str) -> pa.Schema:
    """``value`` itself when it is a ``pyarrow.Schema``, else ``parse_ddl(value)``."""
    if isinstance(value, pa.Schema):
        return value
    if isinstance(value, str):
        return parse_ddl(value)
    raise SchemaError(
        f'Expected a pyarrow.Schema or a DDL string such as "id BIGINT, name STRING", '
        f"got {type(value).__name__}: {value!r}"
    )


def to_ddl(schema: pa.Schema) -> str:
    """The DDL text for ``schema``; ``parse_ddl`` of it gives the schema back.

    Raises ``SchemaError`` for a column whose type has no DDL spelling (e.g. ``uint8``).
    """
    return ", ".join(_field_ddl(field, " ", field.name) for field in schema)


def schema_diff(expected: pa.Schema, actual: pa.Schema) -> list[str]:
    """One readable line per difference between two schemas; empty when they match.

    Field metadata is ignored; nullability, missing/extra columns and column order are not.
    """
    diffs = [
        f"duplicate column '{name}' in {label} schema ({count} times)"
        for label, schema in (("expected", expected), ("actual", actual))
        for name, count in Counter(schema.names).items()
        if count > 1
    ]
    found = {field.name: field for field in reversed(actual)}
    for field in expected:
        other = found.get(field.name)
        if other is None:
            diffs.append(f"missing column '{field.name}' ({_describe_type(field.type)})")
        elif not other.type.equals(field.type):
            want, got = _describe_type(field.type), _describe_type(other.type)
            if want == got:
                want, got = str(field.type), str(other.type)
            diffs.append(f"column '{field.name}': type differs: expected {want}, got {got}")
        elif other.nullable != field.nullable:
            want, got = ("nullable", "NOT NULL") if field.nullable else ("NOT NULL", "nullable")
            diffs.append(f"column '{field.name}': expected {want}, got {got}")
    wanted = set(expected.names)
    diffs += [
        f"extra column '{f.name}' ({_describe_type(f.type)})"
        for f in actual
        if f.name not in wanted
    ]
    if not diffs and expected.names != actual.names:
        diffs.append(
            f"column order differs: expected {', '.join(expected.names)}; "
            f"got {', '.join(actual.names)}"
        )
    return diffs


class _Parser:
    """Recursive-descent parser over the tokens of one DDL string."""

    def __init__(self, source: str, what: str) -> None:
        self.source = source
        self.what = what
        self.tokens = self._tokenize()
        self.index = 0

    def _tokenize(self) -> list[_Token]:
        tokens: list[_Token] = []
        pos = 0
        while pos < len(self.source):
            match = _TOKEN.match(self.source, pos)
            if match is None:
                char = self.source[pos]
                what = _QUOTES.get(char)
                if what:
                    raise self._fail(f"unterminated {what}", pos, f"close it with {char}")
                raise self._fail(
                    f"unexpected character '{char}'", pos, "quote such names in backquotes"
                )
            if match.lastgroup != "space":
                tokens.append(_Token(match.lastgroup or "", match.group(), pos))
            pos = match.end()
        return [*tokens, _Token("end", "", len(self.source))]

    def _fail(self, message: str, pos: int, hint: str = "") -> SchemaError:
        suffix = f" ({hint})" if hint else ""
        return SchemaError(
            f'Cannot parse {self.what} "{self.source}": {message} at position {pos}{suffix}'
        )

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def next(self) -> _Token:
        token = self.tokens[self.index]
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def accept(self, text: str) -> _Token | None:
        token = self.peek()
        if token.kind in ("word", "punct") and token.text.upper() == text:
            return self.next()
        return None

    def expect(self, text: str, hint: str) -> None:
        if self.accept(text) is None:
            token = self.peek()
            raise self._fail(f"expected '{text}', found {_show(token)}", token.pos, hint)

    def expect_end(self, hint: str) -> None:
        token = self.peek()
        if token.kind != "end":
            raise self._fail(f"unexpected {_show(token)}", token.pos, hint)

    def fields(self) -> list[pa.Field]:
        """``name type [NOT NULL] [COMMENT '...']`` items separated by commas."""
        fields: list[pa.Field] = []
        seen: dict[str, int] = {}
        while True:
            token = self.peek()
            field = self.field()
            if field.name in seen:
                raise self._fail(
                    f"duplicate column name '{field.name}'",
                    token.pos,
                    f"first defined at position {seen[field.name]}; rename one of them",
                )
            seen[field.name] = token.pos
            fields.append(field)
            if self.accept(",") is None:
                return fields

    def field(self) -> pa.Field:
        token = self.next()
        if token.kind not in ("word", "quoted"):
            raise self._fail(
                f"expected a column name, found {_show(token)}",
                token.pos,
                "quote names with special characters in backquotes: `my col`",
            )
        name = token.text[1:-1].replace("``", "`") if token.kind == "quoted" else token.text
        self.accept(":")
        dtype = self.type()
        nullable, metadata = True, None
        while True:
            if self.accept("NOT"):
                self.expect("NULL", "write NOT NULL")
                nullable = False
            elif self.accept("COMMENT"):
                text = self.next()
                if text.kind != "text":
                    raise self._fail(
                        f"expected a quoted comment, found {_show(text)}",
                        text.pos,
                        "write COMMENT 'text'",
                    )
                metadata = {b"comment": re.sub(r"\\(.)", r"\1", text.text[1:-1]).encode()}
            else:
                return pa.field(name, dtype, nullable=nullable, metadata=metadata)

    def type(self) -> pa.DataType:
        token = self.next()
        name = token.text.upper() if token.kind == "word" else ""
        name = _ALIASES.get(name, name)
        if name in _SIMPLE:
            return _SIMPLE[name]
        if name == "DECIMAL":
            return self._decimal()
        if name in ("ARRAY", "MAP", "STRUCT"):
            self.expect("<", f"write {name}<...>")
            dtype = self._generic(name)
            self.expect(">", f"close the {name}< opened at position {token.pos}")
            return dtype
        problem = f"unknown type '{token.text}'" if token.kind == "word" else "expected a type"
        if token.kind != "word":
            problem += f", found {_show(token)}"
        raise self._fail(problem, token.pos, f"known types: {_KNOWN}")

    def _generic(self, name: str) -> pa.DataType:
        if name == "ARRAY":
            return pa.list_(self.type())
        if name == "MAP":
            key = self.type()
            self.expect(",", "write MAP<key type, value type>")
            return pa.map_(key, self.type())
        if self.peek().text == ">":
            return pa.struct([])
        return pa.struct(self.fields())

    def _decimal(self) -> pa.DataType:
        if self.accept("(") is None:
            return pa.decimal128(10, 0)
        token = self.peek()
        precision = self._integer()
        scale = self._integer() if self.accept(",") else 0
        self.expect(")", "write DECIMAL(precision, scale)")
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise self._fail(
                f"invalid DECIMAL({precision},{scale})",
                token.pos,
                "precision must be 1..38 and scale 0..precision",
            )
        return pa.decimal128(precision, scale)

    def _integer(self) -> int:
        token = self.next()
        if not (token.kind == "word" and token.text.isdigit()):
            raise self._fail(
                f"expected a number, found {_show(token)}", token.pos, "e.g. DECIMAL(10,2)"
            )
        return int(token.text)


def _show(token: _Token) -> str:
    return "end of input" if token.kind == "end" else f"'{token.text}'"


def _field_ddl(field: pa.Field, separator: str, path: str) -> str:
    name = field.name
    if not _PLAIN_NAME.fullmatch(name):
        name = "`" + name.replace("`", "``") + "`"
    text = f"{name}{separator}{_type_ddl(field.type, path)}"
    if not field.nullable:
        text += " NOT NULL"
    comment = (field.metadata or {}).get(b"comment")
    if comment is not None:
        escaped = comment.decode().replace("\\", "\\\\").replace("'", "\\'")
        text += f" COMMENT '{escaped}'"
    return text


def _type_ddl(dtype: pa.DataType, path: str) -> str:
    if dtype in _NAMES:
        return _NAMES[dtype]
    if isinstance(dtype, pa.Decimal128Type):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    if isinstance(dtype, pa.MapType):
        key = _type_ddl(dtype.key_type, f"{path}.key")
        return f"MAP<{key}, {_type_ddl(dtype.item_type, f'{path}.value')}>"
    if isinstance(dtype, pa.ListType):
        return f"ARRAY<{_type_ddl(dtype.value_type, f'{path}[]')}>"
    if isinstance(dtype, pa.StructType):
        inner = ", ".join(_field_ddl(f, ": ", f"{path}.{f.name}") for f in dtype.fields)
        return f"STRUCT<{inner}>"
    where = f"Column '{path.lstrip('.')}' has type" if path else "Type"
    raise SchemaError(
        f"{where} {dtype}, which has no DDL spelling "
        f"(DDL types: {_KNOWN}); cast it to one of these types first"
    )


def _describe_type(dtype: pa.DataType) -> str:
    try:
        return _type_ddl(dtype, "")
    except SchemaError:
        return str(dtype)


def has_float32(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is FLOAT or holds a FLOAT (in a struct field or a list)."""
    if dtype == pa.float32():
        return True
    if isinstance(dtype, pa.StructType):
        return any(has_float32(f.type) for f in dtype)
    if isinstance(dtype, pa.ListType | pa.LargeListType):
        return has_float32(dtype.value_type)
    return False


def float32_overflow(read: pa.Array | pa.ChunkedArray, cast: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a finite value of ``read`` became infinite in ``cast`` (a FLOAT out of range:
    Arrow's cast from DOUBLE does not check it)."""
    if isinstance(read, pa.ChunkedArray):
        read, cast = read.combine_chunks(), cast.combine_chunks()
    if cast.type == pa.float32():
        return bool(pc.any(pc.and_(pc.is_finite(read), pc.is_inf(cast))).as_py())
    if isinstance(cast.type, pa.StructType):
        return any(
            float32_overflow(read.field(i), cast.field(i)) for i in range(cast.type.num_fields)
        )
    if isinstance(cast.type, pa.ListType | pa.LargeListType):
        return float32_overflow(read.flatten(), cast.flatten())
    return False


def checked_cast(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` cast to ``schema``; raises ``ArrowInvalid`` when a FLOAT value is out of
    range (Arrow's cast would make it infinite)."""
    cast = table.cast(schema)
    for f in schema:
        if has_float32(f.type) and float32_overflow(table[f.name], cast[f.name]):
            raise pa.ArrowInvalid(f"column '{f.name}': a value is out of range for FLOAT")
    return cast

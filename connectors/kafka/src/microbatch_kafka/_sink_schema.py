"""The sink's input columns, checked at ``start()`` with Spark's texts (no ``confluent_kafka``)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from microbatch import SchemaError
from microbatch.types import type_to_ddl

__all__ = ["HEADERS_TYPE", "NULL_TOPIC", "Layout", "check_columns"]

NULL_TOPIC = (
    "The Kafka message data sent to the producer contains a null topic. Use the `topic` option "
    "for setting a default topic."
)
"""Spark's text (``KAFKA_NULL_TOPIC_IN_DATA``) for a row without a topic."""

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
"""Spark's ``headers`` type: ``array<struct<key:string,value:binary>>``."""


@dataclass(frozen=True)
class Layout:
    """Which of the sink's columns a batch carries (after the checks at start), and the topic
    option. Small and picklable: part writers carry it to other processes."""

    key: bool = False
    topic: bool = False
    """True when rows name their topic (a ``topic`` column and no ``topic`` option)."""
    partition: bool = False
    headers: bool = False
    default_topic: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        chosen = ["value"]
        chosen += ["key"] if self.key else []
        chosen += ["topic"] if self.topic else []
        chosen += ["partition"] if self.partition else []
        chosen += ["headers"] if self.headers else []
        return tuple(chosen)

    def normalise(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Only the sink's columns of ``batch``, in :attr:`columns` order; dictionary-encoded
        columns decoded, and view types as the large ones (Arrow's filters take no views)."""
        chosen = batch.select(list(self.columns))
        if not any(_stored(field.type) != field.type for field in chosen.schema):
            return chosen
        columns = [_restore(column) for column in chosen.columns]
        return pa.RecordBatch.from_arrays(columns, names=list(self.columns))

    def schema_of(self, schema: pa.Schema) -> pa.Schema:
        """The schema of :meth:`normalise`'s batches, given the input's."""
        fields = [schema.field(name) for name in self.columns]
        return pa.schema([field.with_type(_stored(field.type)) for field in fields])


def _stored(dtype: pa.DataType) -> pa.DataType:
    """The type :meth:`Layout.normalise` gives a column of ``dtype``."""
    if pa.types.is_dictionary(dtype):
        return _stored(dtype.value_type)
    if pa.types.is_string_view(dtype):
        return pa.large_string()
    if pa.types.is_binary_view(dtype):
        return pa.large_binary()
    return dtype


def _restore(column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    wanted = _stored(column.type)
    return column if wanted == column.type else column.cast(wanted)


_STRINGS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_BINARIES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)
_INTS = (pa.types.is_int8, pa.types.is_int16, pa.types.is_int32, pa.types.is_uint8,
         pa.types.is_uint16)  # fmt: skip


def _is(dtype: pa.DataType, checks: tuple[object, ...]) -> bool:
    if pa.types.is_dictionary(dtype):  # decoded by Layout.normalise
        dtype = dtype.value_type
    return any(check(dtype) for check in checks)  # type: ignore[operator]


def _logical(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` as Spark sees it: dictionaries decoded, large and view strings, binaries
    and lists as the plain ones."""
    if pa.types.is_dictionary(dtype):
        return _logical(dtype.value_type)
    if _is(dtype, _STRINGS):
        return pa.string()
    if _is(dtype, _BINARIES):
        return pa.binary()
    if (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
        or pa.types.is_list_view(dtype)
        or pa.types.is_large_list_view(dtype)
    ):
        return pa.list_(_logical(dtype.value_type))
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return pa.struct([field.with_type(_logical(field.type)) for field in fields])
    if pa.types.is_map(dtype):
        return pa.map_(_logical(dtype.key_type), _logical(dtype.item_type))
    return dtype


def _shown(dtype: pa.DataType) -> str:
    try:
        # Spark's catalog strings: array<struct<key:string,value:binary>>
        return type_to_ddl(_logical(dtype)).lower().replace(": ", ":").replace(", ", ",")
    except Exception:  # a type without a DDL spelling
        return str(dtype)


def _unsupported(name: str, dtype: pa.DataType, wanted: str) -> SchemaError:
    return SchemaError(
        f"{name} attribute unsupported type {_shown(dtype)}. {name} must be {wanted}"
    )


def _headers_ok(dtype: pa.DataType) -> bool:
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return False
    entry = dtype.value_type
    if not pa.types.is_struct(entry) or entry.num_fields != 2:
        return False
    key, value = entry.field(0), entry.field(1)
    return (
        key.name == "key"
        and value.name == "value"
        and _is(key.type, _STRINGS)
        and _is(value.type, _BINARIES)
    )


def check_columns(schema: pa.Schema, topic_option: str | None) -> Layout:
    """Check the columns Spark's Kafka writer reads; return the :class:`Layout` of those
    present (other columns are ignored).

    Raises :class:`SchemaError` with Spark's texts: ``Required attribute 'value' not found``,
    ``topic option required when no 'topic' attribute is present...``, ``<col> attribute
    unsupported type <t>. <col> must be a(n) ...``.
    """
    names = set(schema.names)
    # Spark's order (KafkaWriter.validateQuery): topic, key, value, headers, partition
    if topic_option is None:
        if "topic" not in names:
            raise SchemaError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        dtype = schema.field("topic").type
        if not _is(dtype, _STRINGS):
            raise _unsupported("topic", dtype, "a(n) string")
    for name in ("key", "value"):
        if name not in names:
            if name == "value":
                raise SchemaError("Required attribute 'value' not found")
            continue
        dtype = schema.field(name).type
        if not (_is(dtype, _STRINGS) or _is(dtype, _BINARIES)):
            raise _unsupported(name, dtype, "a(n) string or binary")
    if "headers" in names and not _headers_ok(schema.field("headers").type):
        raise _unsupported("headers", schema.field("headers").type, f"a(n) {_shown(HEADERS_TYPE)}")
    if "partition" in names and not _is(schema.field("partition").type, _INTS):
        raise _unsupported("partition", schema.field("partition").type, "a(n) int")
    return Layout(
        key="key" in names,
        topic=topic_option is None,
        partition="partition" in names,
        headers="headers" in names,
        default_topic=topic_option,
    )

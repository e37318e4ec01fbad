"""Records of line-oriented text files: split at Spark's line separators, and blocks of whole
records out of blocks of whole lines.

With no separator set, records end at ``\\n``, ``\\r\\n`` or ``\\r`` (Spark's default); with one,
only at it.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "count_separators",
    "detect_json_encoding",
    "is_utf8",
    "record_blocks",
    "row_mask",
    "split_records",
    "to_utf8",
    "whole_records",
]

_LINE_BREAKS = re.compile(rb"\r\n|\r|\n")


def split_records(data: bytes, separator: bytes | None) -> list[bytes]:
    """The records of ``data`` (the last one may lack its separator)."""
    if separator is None:
        parts = _LINE_BREAKS.split(data) if b"\r" in data else data.split(b"\n")
    else:
        parts = data.split(separator)
    if parts and not parts[-1]:
        parts.pop()
    return parts


def count_separators(data: bytes, separator: bytes | None) -> int:
    """How many record separators ``data`` holds."""
    if separator is not None:
        return data.count(separator)
    if b"\r" not in data:  # the common case: one count instead of three
        return data.count(b"\n")
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def whole_records(blocks: Iterable[bytes], separator: bytes | None) -> Iterator[bytes]:
    """Blocks of whole records out of blocks of whole lines: a record between custom
    separators may span several of them (they are joined), default ones end at each line."""
    if separator is None:
        yield from blocks
        return
    pending: list[bytes] = []  # blocks since the last record's end, without a separator
    keep = len(separator) - 1
    tail = b""  # the last bytes of the pending blocks: a separator may start there
    for block in blocks:
        probe = tail + block
        if separator not in probe:
            pending.append(block)
            tail = probe[len(probe) - keep :] if keep else b""
            continue
        data = b"".join([*pending, block]) if pending else block
        end = _records_end(data, separator)  # from a record's start: as splitting the file
        assert end is not None
        yield data[:end]
        rest = data[end:]
        pending = [rest] if rest else []
        tail = rest[len(rest) - keep :] if keep else b""
    if pending:
        yield b"".join(pending)


def _records_end(data: bytes, separator: bytes) -> int | None:
    """Where the last whole record of ``data`` ends (after its separator), as ``split``
    finds separators (from the left, not overlapping); None when it holds none."""
    cut = data.rfind(separator)
    if cut < 0:
        return None
    if _self_overlapping(separator):  # "||" in "|||": found at 0, not 1
        return len(data) - len(data.split(separator)[-1])
    return cut + len(separator)


def _self_overlapping(separator: bytes) -> bool:
    return any(separator[:size] == separator[-size:] for size in range(1, len(separator)))


def record_blocks(
    blocks: Iterable[tuple[bytes, int]], separator: bytes | None
) -> Iterator[tuple[bytes, int]]:
    """:func:`whole_records`, each block with the number of its first record (from 1)."""
    number = 1
    for data in whole_records((data for data, _ in blocks), separator):
        yield data, number
        number += count_separators(data, separator)


def is_utf8(encoding: str | None) -> bool:
    """Whether ``encoding`` (a Java or Python charset name; None: unset) is UTF-8."""
    return encoding is None or codecs.lookup(encoding).name == "utf-8"


def to_utf8(data: bytes, encoding: str) -> bytes:
    """``data`` in ``encoding`` as UTF-8; bytes that are not of the charset become U+FFFD, as
    Java's decoders make them."""
    return data.decode(codecs.lookup(encoding).name, errors="replace").encode()


def detect_json_encoding(data: bytes) -> str:
    """The charset of a JSON document as Jackson detects it when none is given: a byte order
    mark, else the zero bytes around its first (ASCII) character; UTF-8 otherwise."""
    for mark, name in _MARKS:
        if data.startswith(mark):
            return name
    head = data[:4]
    if len(head) == 4:
        if head[:3] == b"\0\0\0":
            return "utf-32-be"
        if head[1:] == b"\0\0\0":
            return "utf-32-le"
    if len(head) >= 2:
        if head[0] == 0 and head[1]:
            return "utf-16-be"
        if head[0] and head[1] == 0:
            return "utf-16-le"
    return "utf-8"


_MARKS = (
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (codecs.BOM_UTF16_LE, "utf-16"),
)


def row_mask(length: int, rows: Iterable[int]) -> pa.Array:
    """A boolean array of ``length``, true at ``rows`` (records of a block)."""
    flags = bytearray(length)
    for row in rows:
        flags[row] = 1
    values = pa.Array.from_buffers(pa.uint8(), length, [None, pa.py_buffer(bytes(flags))])
    return pc.not_equal(values, _ZERO)


_ZERO = pa.scalar(0, pa.uint8())

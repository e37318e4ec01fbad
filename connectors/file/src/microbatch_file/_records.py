"""Records of line-oriented text files: split at Spark's line separators, and blocks of whole
records out of blocks of whole lines.

With no separator set, records end at ``\\n``, ``\\r\\n`` or ``\\r`` (Spark's default); with one,
only at it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["count_separators", "record_blocks", "split_records", "whole_records"]

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
    carry = b""
    for data in blocks:
        data = carry + data
        cut = data.rfind(separator)
        if cut < 0:
            carry = data
            continue
        data, carry = data[: cut + len(separator)], data[cut + len(separator) :]
        yield data
    if carry:
        yield carry


def record_blocks(
    blocks: Iterable[tuple[bytes, int]], separator: bytes | None
) -> Iterator[tuple[bytes, int]]:
    """:func:`whole_records`, each block with the number of its first record (from 1)."""
    number = 1
    for data in whole_records((data for data, _ in blocks), separator):
        yield data, number
        number += count_separators(data, separator)

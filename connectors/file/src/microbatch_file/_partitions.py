"""Partition columns from ``key=value`` folders: discovery, typing and per-file values."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

import pyarrow as pa

from microbatch.errors import ConfigurationError, SourceError

from ._listing import FileEntry
from .sink_partitions import DEFAULT_PARTITION

__all__ = [
    "check_layout",
    "discover_keys",
    "infer_partition_type",
    "partition_scalar",
]

_INT32 = (-(2**31), 2**31 - 1)


def _value(raw: str) -> str | None:
    text = unquote(raw)
    return None if text == DEFAULT_PARTITION else text


def discover_keys(entries: Iterable[FileEntry], where: str) -> tuple[str, ...] | None:
    """The partition keys shared by ``entries`` (None when there are no entries).

    Files whose folders name different keys, or a file beside partition folders, make the
    layout unreadable: a ``ConfigurationError`` names two such files.
    """
    keys: tuple[str, ...] | None = None
    example: FileEntry | None = None
    for entry in entries:
        mine = tuple(key for key, _ in entry.partition)
        if keys is None:
            keys, example = mine, entry
        elif mine != keys:
            assert example is not None
            raise ConfigurationError(_conflict(where, example, keys, entry, mine))
    return keys


def check_layout(entry: FileEntry, keys: tuple[str, ...], where: str) -> None:
    """Refuse (``SourceError``) a new file whose folders do not name the source's keys."""
    mine = tuple(key for key, _ in entry.partition)
    if mine != keys:
        raise SourceError(_conflict(where, None, keys, entry, mine))


def _conflict(
    where: str,
    first: FileEntry | None,
    keys: tuple[str, ...],
    entry: FileEntry,
    mine: tuple[str, ...],
) -> str:
    def shape(names: tuple[str, ...]) -> str:
        return "/".join(f"{name}=..." for name in names) + "/<file>" if names else "<file>"

    if first is not None:
        found = (
            f"files {first.path} (in {shape(keys)}) and {entry.path} (in {shape(mine)}) lie in "
            "different folder layouts"
        )
    else:
        found = (
            f"file {entry.path} lies in folders {shape(mine)}, but the source's files lie in "
            f"{shape(keys)}"
        )
    return (
        f"File source {where}: {found}. Mixed layouts cannot be read correctly (partition "
        "columns would be missing or misplaced): move the file into the layout of the others or "
        "out of the source folder, or set option recursiveFileLookup=true to read every file "
        "without partition columns."
    )


def infer_partition_type(values: Iterable[str]) -> pa.DataType:
    """INT when every value is a 32-bit integer, BIGINT when a 64-bit one, else STRING."""
    kind: pa.DataType = pa.int32()
    found = False
    for raw in values:
        value = _value(raw)
        if value is None:
            continue
        found = True
        try:
            number = int(value)
        except ValueError:
            return pa.string()
        if not _INT32[0] <= number <= _INT32[1]:
            if not -(2**63) <= number < 2**63:
                return pa.string()
            kind = pa.int64()
    return kind if found else pa.string()


def partition_scalar(raw: str, dtype: pa.DataType) -> pa.Scalar:
    """The value of folder value ``raw`` as ``dtype``; ``ValueError`` when it cannot be one."""
    value = _value(raw)
    if value is None:
        return pa.scalar(None, dtype)
    try:
        return pa.scalar(value, pa.string()).cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ValueError(f"{value!r} cannot be read as {dtype} ({error})") from None

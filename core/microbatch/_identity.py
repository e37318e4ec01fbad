"""What a query reads and writes, as recorded in its checkpoint.

A checkpoint's offsets only mean something for the source they were taken from, and its commit
log only for the output it was written to. The checkpoint's metadata therefore records each
side's *identity* (format, location, the options declared with ``identity=True``) and every
start compares it with the query's own: a query whose input folder was renamed would otherwise
read everything again, and one whose sink changed format would write into the wrong output.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ._secret_keys import mask_credentials
from .options import normalize

if TYPE_CHECKING:
    from .options import Options, OptionSpec

__all__ = ["describe_changes", "identity_of", "normalize_location"]

LOCATION_OPTION = "path"
"""The option whose value is a location: always part of the identity when declared."""


def identity_of(
    format_name: str, spec: OptionSpec, options: Options, *, exact_location: bool = False
) -> dict[str, Any]:
    """The default identity of a connector: its format, its ``path`` (absolute) and the value of
    every option declared with ``identity=True`` (secret ones excepted; the password of a URL
    with credentials is replaced by ``***``).

    ``exact_location`` keeps ``.``, ``..`` and doubled slashes in a local path (see
    :func:`normalize_location`): a source that keys what it has read by path must use it."""
    found: dict[str, Any] = {"format": format_name}
    for option in spec:
        is_location = option.key == normalize(LOCATION_OPTION)
        if not (option.identity or is_location) or option.secret:
            continue
        value = options[option.name]
        if is_location and isinstance(value, str):
            value = normalize_location(value, exact=exact_location)
        found[option.name] = _jsonable(mask_credentials(value))  # no URL password on disk
    return found


def normalize_location(url: str, *, exact: bool = False) -> str:
    """``url`` as one spelling: an absolute local path, or a URL with its protocol.

    A relative path, ``file://`` and a trailing slash never make another spelling. With
    ``exact``, a local path keeps its ``.``, ``..`` and doubled slashes, as fsspec keeps them
    in the paths it lists: a file source that records the files it has read by those paths
    would take every file of ``in/./`` or ``a/../in`` for a new one and read it again, so for
    such a source they are another location (and refused) rather than the same one.
    """
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError):
        return url
    if isinstance(fs, LocalFileSystem):
        if exact:
            return str(path).rstrip("/") or "/"
        return os.path.normpath(os.path.abspath(path))
    return str(fs.unstrip_protocol(path.rstrip("/") or "/"))


def describe_changes(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per key whose value differs: ``path was '/a', is now '/b'``."""
    changes = []
    for key in sorted(set(recorded) | set(current), key=lambda k: (k != "format", k)):
        before, after = recorded.get(key), current.get(key)
        if before != after:
            changes.append(f"{key} was {before!r}, is now {after!r}")
    return changes


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, durations seconds)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)

"""Where a Delta table lives, and the handles on it that every part of the connector shares.

``deltalake`` is imported inside the functions, so that registering the connector never loads
delta-rs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import microbatch as mb

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

__all__ = [
    "PATH_OPTION",
    "STORAGE_OPTIONS_OPTION",
    "STORAGE_PREFIX",
    "DeltaTarget",
    "log_entry_name",
    "storage_error_text",
    "target_at",
    "target_from_options",
]

STORAGE_PREFIX = "storage."
"""Options under this prefix go to delta-rs's object store (``storage.AWS_REGION``...)."""

PATH_OPTION = mb.Option(
    name="path",
    required=True,
    identity=True,
    doc="The Delta table: a local folder or an object-store URL (s3://, az://, gs://...).",
)
STORAGE_OPTIONS_OPTION = mb.Option(
    name="storageOptions",
    type="object",
    secret=True,
    doc=(
        "A dict of delta-rs storage options for object stores (merged with the 'storage.*' "
        "options, which win); its values never appear in displays, errors or logs."
    ),
)


_ANSI_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def storage_error_text(error: BaseException) -> str:
    """delta-rs's text for ``error`` on one line, without its terminal colour codes."""
    return " ".join(_ANSI_CODES.sub("", str(error)).split())


def log_entry_name(version: int) -> str:
    """The commit file of ``version``, relative to the table root."""
    return f"_delta_log/{version:020d}.json"


@dataclass(frozen=True)
class DeltaTarget:
    """A Delta table's location and storage options: small and picklable.

    ``uri`` is an absolute local path or an object-store URL. Open handles inside the process
    that uses them (a split reader or part writer opens its own).
    """

    uri: str
    storage_options: Mapping[str, str] = field(
        default_factory=dict, hash=False, compare=False, repr=False
    )

    @property
    def is_local(self) -> bool:
        """True when the table is a folder on this machine."""
        scheme = urlparse(self.uri).scheme
        return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter

    def scrub(self, text: str) -> str:
        """``text`` without the values of the storage options (a store's error may print its
        endpoint or a key), for the connector's own log lines; flags and whole numbers, which
        cannot be secrets, stay."""
        from microbatch.options import scrub, secret_texts

        return scrub(text, secret_texts(dict(self.storage_options)))

    def options(self) -> dict[str, str] | None:
        """The storage options as delta-rs takes them (``None`` when there are none)."""
        return dict(self.storage_options) or None

    def open(
        self, version: int | None = None, *, error: type[mb.MicrobatchError] = mb.RetriableError
    ) -> DeltaTable | None:
        """The table at ``version`` (the latest when ``None``), or ``None`` when there is none.

        A store that cannot be reached (an ``OSError`` of delta-rs) raises ``error``, naming
        the table: a ``RetriableError`` while a query runs (the batch runs again), the
        connector's ``SourceError``/``SinkError`` when a query starts. A local path that is a
        regular file raises ``error`` too (a plain ``MicrobatchError`` for a
        ``RetriableError``: a run again cannot cure it).
        """
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self.is_local and os.path.isfile(self.uri):  # a run again cannot cure it
            kind = mb.MicrobatchError if error is mb.RetriableError else error
            raise kind(f"{self.uri} is not a Delta table: it is a file")
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.options())
        except TableNotFoundError:
            return None
        except OSError as cause:
            raise self.unreachable(cause, error) from cause

    def refresh(self, table: DeltaTable) -> None:
        """Bring ``table`` up to its latest version (``RetriableError`` when the store cannot
        be reached)."""
        try:
            table.update_incremental()
        except OSError as cause:
            raise self.unreachable(cause, mb.RetriableError) from cause

    def unreachable(
        self, cause: BaseException, error: type[mb.MicrobatchError] = mb.RetriableError
    ) -> mb.MicrobatchError:
        """The error for a store failure ``cause`` while opening the table."""
        return error(
            f"could not open the Delta table at {self.uri}: {storage_error_text(cause)}; "
            "check the path and storage options"
        )

    def filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem rooted at the table (paths such as ``_delta_log/...``)."""
        import pyarrow.fs as pafs
        from deltalake.fs import DeltaStorageHandler

        return pafs.PyFileSystem(DeltaStorageHandler(self.uri, self.options()))


def target_from_options(opts: mb.Options) -> DeltaTarget:
    """The target named by the ``path``, ``storageOptions`` and ``storage.*`` options."""
    settings: dict[str, Any] = dict(opts.get("storageOptions") or {})
    settings.update(opts.under(STORAGE_PREFIX))
    return target_at(str(opts.path), settings)


def target_at(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> DeltaTarget:
    """The target at ``path`` (a local path, ``file://`` URL or object-store URL).

    A local path is made absolute, so that a copy pickled into another process (or a restart
    from another working directory) names the same table.
    """
    uri = os.fspath(path)
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        uri = parsed.path
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:
        uri = os.path.abspath(os.path.expanduser(uri))
    settings = {str(key): str(value) for key, value in (storage_options or {}).items()}
    return DeltaTarget(uri, settings)

"""What a failed or doubtful Delta commit tells: the files of a batch's parts, lost races,
rows refused by a constraint, and whether the table already holds a batch's files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import microbatch as mb

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from ._part_writer import AddFile

__all__ = ["files_of", "holds_any", "is_conflict", "is_violation"]


def files_of(messages: Sequence[mb.CommitMessage | None], *, strict: bool = True) -> list[AddFile]:
    """The files of the parts' messages (``strict``: a message of another kind is an error)."""
    from ._part_writer import DeltaFilesMessage

    files: list[AddFile] = []
    for index, message in enumerate(messages):
        if message is None or (not strict and not isinstance(message, DeltaFilesMessage)):
            continue
        if not isinstance(message, DeltaFilesMessage):
            raise mb.SinkError(
                f"part {index} of the batch sent a {type(message).__name__}, not the "
                "DeltaFilesMessage of a Delta part writer"
            )
        files.extend(message.files)
    return files


def is_conflict(error: BaseException) -> bool:
    """True for a commit that lost a race: another commit took its version, or another writer
    created the table first."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    if isinstance(error, CommitFailedError):
        return "append-only" not in str(error)  # a table property, not a lost race
    return isinstance(error, DeltaError) and "already exists" in str(error)


def is_violation(error: BaseException) -> bool:
    """True for delta-rs's refusal of rows that fail a constraint or invariant."""
    return "failed validation check" in str(error) or "violated" in str(error).lower()


def holds_any(table: DeltaTable | None, files: Sequence[AddFile]) -> bool:
    """True when ``table``'s current snapshot names one of the data files ``files`` (staged
    files never are: a commit rewrites them). Compared by file name, unique to a part (it
    holds a UUID)."""
    if table is None or not files:
        return False
    current = {uri.rsplit("/", 1)[-1] for uri in table.file_uris()}
    return any(file.path.rsplit("/", 1)[-1] in current for file in files)

"""How much one batch of the ``delta`` source takes: Delta's admission control.

``maxFilesPerTrigger`` (default 1000 when no limit is given) and ``maxBytesPerTrigger`` may both
be set; a batch then ends at whichever is reached first. As in Delta, a file is admitted while
the batch still has room (fewer files than the limit, fewer bytes than the limit), so the byte
limit is soft: the file that crosses it is still taken, and a batch always takes at least one
file. The change data feed admits whole versions: a version is taken when its files fit, or
when it is the first of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from microbatch import (
    Options,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
)

from ._source_options import DEFAULT_MAX_FILES_PER_TRIGGER, parse_size

__all__ = ["Admission", "default_read_limit", "option_limits"]

_UNLIMITED = 2**62


def option_limits(opts: Options) -> tuple[int | None, int | None]:
    """``(maxFilesPerTrigger, maxBytesPerTrigger in bytes)`` as given (``None`` when unset)."""
    files = opts.max_files_per_trigger
    raw_bytes = opts.max_bytes_per_trigger
    return (None if files is None else int(files)), (
        None if raw_bytes is None else parse_size(raw_bytes)
    )


def default_read_limit(opts: Options) -> ReadLimit:
    """The engine's limit: the file limit (the other one is applied from the options too), the
    byte limit alone, or Delta's default of 1000 files."""
    files, size = option_limits(opts)
    if files is not None:
        return ReadMaxFiles(files)
    if size is not None:
        return ReadMaxBytes(size)
    return ReadMaxFiles(DEFAULT_MAX_FILES_PER_TRIGGER)


class Admission:
    """The room left in one batch. ``None`` limits admit everything."""

    def __init__(self, max_files: int | None, max_bytes: int | None) -> None:
        self.files_left = _UNLIMITED if max_files is None else max_files
        self.bytes_left = _UNLIMITED if max_bytes is None else max_bytes
        self.taken = 0

    @classmethod
    def for_limit(cls, limit: ReadLimit, opts: Options) -> Admission:
        """The admission of one batch under ``limit`` (what the engine passed) and the
        options: with ``ReadMaxFiles`` the byte option still applies, as in Delta."""
        files, size = option_limits(opts)
        if isinstance(limit, ReadAllAvailable):
            return cls(None, None)
        if isinstance(limit, ReadMaxFiles):
            return cls(limit.max_files, size)
        if isinstance(limit, ReadMaxBytes):
            return cls(files, limit.max_bytes)
        return cls(files, size)

    @property
    def has_room(self) -> bool:
        return self.files_left > 0 and self.bytes_left > 0

    def admit(self, size: int) -> bool:
        """Take one file of ``size`` bytes when there is room; ``False`` ends the batch."""
        if not self.has_room:
            return False
        self.files_left -= 1
        self.bytes_left -= size
        self.taken += 1
        return True

    def admit_whole(self, sizes: Sequence[int]) -> bool:
        """Take all of a version's files, or none: they fit, or nothing was taken yet."""
        fits = len(sizes) <= self.files_left and sum(sizes) <= self.bytes_left
        if self.taken and not fits:
            return False
        self.files_left -= len(sizes)
        self.bytes_left -= sum(sizes)
        self.taken += len(sizes)
        return True

"""The session settings fixed for a checkpoint's lifetime, as a restart resolves them.

Which settings are fixed, and the value of each for a checkpoint that recorded none, is
declared by :data:`microbatch._session.FIXED_PER_CHECKPOINT`. Every offset entry records their
values (``conf``); on restart those of the newest entry win over the session's, as in Spark's
offset log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ._session import FIXED_PER_CHECKPOINT, SESSION_OPTIONS
from .errors import CorruptCheckpointError

__all__ = ["resolve"]

log = logging.getLogger("microbatch.checkpoint")


def resolve(
    recorded: Mapping[str, Any] | None, where: str, session: Mapping[str, Any]
) -> dict[str, Any]:
    """The fixed settings a query on a checkpoint runs with and records in new entries.

    ``recorded`` is the ``conf`` of the checkpoint's newest offset entry, the file ``where``
    (``None``: the checkpoint has no entry, and the ``session`` values are taken, the defaults
    for those it lacks). A setting the entry lacks takes its value for a checkpoint that
    recorded none; a recorded value that is invalid raises :class:`CorruptCheckpointError`
    naming the file; a ``session`` value that differs from the resolved one is logged (pass
    no ``session`` values to only read the checkpoint's). Recorded settings this code does not
    know are carried on as they are.
    """
    if recorded is None:
        return {
            name: session.get(name, SESSION_OPTIONS[name].default) for name in FIXED_PER_CHECKPOINT
        }
    resolved = dict(recorded)
    for name, legacy in FIXED_PER_CHECKPOINT.items():
        if name in recorded:
            try:
                value = SESSION_OPTIONS[name].convert(recorded[name])
            except ValueError as error:
                raise CorruptCheckpointError(
                    f"Checkpoint file {where} records the setting {name}={recorded[name]!r}, "
                    f"which is invalid ({error}). Restore the file from a backup."
                ) from None
            origin = f"recorded in {where}"
        else:
            value, origin = legacy, f"{where} records none: the value before it was recorded"
        resolved[name] = value
        if name in session and session[name] != value:
            log.warning(
                "the session sets %s=%r, but the checkpoint's value is %r (%s). The "
                "checkpoint's is used: it is fixed for the checkpoint's lifetime (use a new "
                "checkpoint location to change it)",
                name,
                session[name],
                value,
                origin,
            )
    return resolved

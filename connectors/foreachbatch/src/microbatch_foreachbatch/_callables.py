"""Checks that user callables can take the arguments the sinks will pass, and what the sinks
that call them declare alike: their one option and their capabilities."""

from __future__ import annotations

import inspect
from typing import Any

import microbatch as mb
from microbatch.connector import Guarantee, OutputMode
from microbatch.errors import ConfigurationError
from microbatch.options import Option, OptionSpec

__all__ = ["USER_CODE_CAPABILITIES", "check_arguments", "describe_callable", "user_code_option"]

USER_CODE_CAPABILITIES = mb.SinkCapabilities(
    output_modes=frozenset(OutputMode),
    guarantee=Guarantee.AT_LEAST_ONCE,
    needs_checkpoint=False,
)
"""``foreachBatch`` and ``foreach``: every output mode; the user's code may see a batch again
after a failure (at-least-once); nothing of theirs lives in the checkpoint."""


def user_code_option(name: str, doc: str) -> OptionSpec:
    """The options of ``foreachBatch`` and ``foreach``: only ``name``, the user's code (a
    Python object, required), which ``write_stream.foreach_batch(...)``/``foreach(...)`` set."""
    return OptionSpec(Option(name=name, type="object", required=True, doc=doc))


def describe_callable(function: Any) -> str:
    """A short name for a user callable, for error messages."""
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return str(name)


def check_arguments(function: Any, arguments: tuple[Any, ...], what: str, usage: str) -> None:
    """Raise :class:`ConfigurationError` unless ``function(*arguments)`` binds.

    Callables without an inspectable signature (some built-ins) are accepted as they are.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*arguments)
    except TypeError as error:
        raise ConfigurationError(
            f"{what} {describe_callable(function)}{signature} cannot be called as {usage}: {error}"
        ) from None

"""Checks that user callables can take the arguments the sinks will pass."""

from __future__ import annotations

import inspect
from typing import Any

from microbatch.errors import ConfigurationError

__all__ = ["check_arguments", "describe_callable"]


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

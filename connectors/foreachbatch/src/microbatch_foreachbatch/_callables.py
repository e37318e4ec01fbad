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
            f"{what} {describe_callable(function)}{_plain(signature)} cannot be called as {usage}: "
            f"{error}{_binding_hint(function, signature, len(arguments))}"
        ) from None


def _plain(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` without its type annotations (shorter in a message)."""
    empty = inspect.Parameter.empty
    parameters = [
        parameter.replace(annotation=empty) for parameter in signature.parameters.values()
    ]
    return signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)


def _binding_hint(function: Any, signature: inspect.Signature, count: int) -> str:
    """For a function that takes the ``count`` arguments but needs more (a helper such as
    ``merge_batch(batch, batch_id, path, keys)``): how to bind the others first."""
    parameters = list(signature.parameters.values())
    positional = [
        parameter
        for parameter in parameters
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]
    varargs = any(parameter.kind == parameter.VAR_POSITIONAL for parameter in parameters)
    if len(positional) < count and not varargs:
        return ""
    taken = positional[:count]
    extra = [
        parameter
        for parameter in parameters
        if parameter not in taken
        and parameter.default is parameter.empty
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    ]
    if not extra or len(taken) < count:
        return ""
    name = getattr(function, "__name__", None) or describe_callable(function)
    given = ", ".join(parameter.name for parameter in taken)
    bound = ", ".join(f"{parameter.name}=..." for parameter in extra)
    return (
        f". Bind its other required arguments first: lambda {given}: {name}({given}, {bound}), "
        f"or functools.partial({name}, {bound})"
    )

"""Rules over several options of one connector, checked together with the options themselves.

A connector lists its rules in its spec, ``OptionSpec(..., rules=(...))``, and
:meth:`~microbatch.options.OptionSpec.parse` reports every broken rule in the same
:class:`~microbatch.errors.OptionError` as the other problems. An option counts as *set* when
the user gave it a value (``None`` counts as not given); a default never sets an option.

- :class:`ExactlyOneOf` ``("subscribe", "subscribePattern", "assign")``: one and only one;
- :class:`AtMostOneOf`: never two of them together;
- :class:`AtLeastOneOf`: one or more;
- :class:`Requires` ``("a", "b", "c")``: when ``a`` is set, ``b`` and ``c`` must be set too;
- :class:`Rule` ``(check, message)``: any other condition, ``check(options)`` returns true when
  the options are acceptable (it may also raise ``ValueError`` with its own message).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .options import Options

__all__ = ["AtLeastOneOf", "AtMostOneOf", "ExactlyOneOf", "OptionRule", "Requires", "Rule"]


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _listed(names: list[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    if len(names) < 2:
        return _quoted(names)
    return f"{_quoted(names[:-1])} and '{names[-1]}'"


class OptionRule:
    """A condition over several options. Subclasses implement :meth:`problems`."""

    names: tuple[str, ...] = ()
    """The options the rule reads (declared names; checked when the spec is built)."""
    hint: str = ""

    def problems(
        self, options: Options, given: Collection[str], failed: Collection[str]
    ) -> list[str]:
        """What is wrong with ``options``; ``given``/``failed``: canonical names the user gave /
        whose values were refused."""
        raise NotImplementedError

    def _with_hint(self, text: str) -> str:
        return f"{text}: {self.hint}" if self.hint else text


class _Group(OptionRule):
    least: int = 0
    most: int | None = None
    lead: str = ""
    verb: str = "must be set"

    def __init__(self, *names: str, hint: str = "") -> None:
        if len(names) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two option names")
        self.names = names
        self.hint = hint

    def problems(
        self, options: Options, given: Collection[str], failed: Collection[str]
    ) -> list[str]:
        chosen = [name for name in self.names if _canonical(options, name) in given]
        if len(chosen) >= self.least and (self.most is None or len(chosen) <= self.most):
            return []
        got = _listed(chosen) if chosen else "none"
        return [self._with_hint(f"{self.lead} of {_quoted(self.names)} {self.verb}; got {got}")]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_quoted(self.names)})"


class ExactlyOneOf(_Group):
    """Exactly one of the named options must be set."""

    least, most, lead = 1, 1, "exactly one"


class AtMostOneOf(_Group):
    """At most one of the named options may be set."""

    least, most, lead, verb = 0, 1, "at most one", "may be set"


class AtLeastOneOf(_Group):
    """At least one of the named options must be set."""

    least, most, lead = 1, None, "at least one"


class Requires(OptionRule):
    """When option ``name`` is set, every option of ``required`` must be set too."""

    def __init__(self, name: str, *required: str, hint: str = "") -> None:
        if not required:
            raise ValueError("Requires needs the option and at least one option it requires")
        self.names = (name, *required)
        self.hint = hint

    def problems(
        self, options: Options, given: Collection[str], failed: Collection[str]
    ) -> list[str]:
        first, *required = self.names
        if _canonical(options, first) not in given:
            return []
        missing = [name for name in required if _canonical(options, name) not in given]
        if not missing:
            return []
        what = "option" if len(required) == 1 else "options"
        text = f"option '{first}' requires {what} {_listed(required)} to be set too"
        if len(required) > 1:
            text += f"; missing {_listed(missing)}"
        return [self._with_hint(text)]

    def __repr__(self) -> str:
        return f"Requires({_quoted(self.names)})"


class Rule(OptionRule):
    """Any condition: ``check(options)`` is true when the options are acceptable.

    ``message`` is the problem reported otherwise; a ``ValueError`` raised by ``check`` is
    reported with its own text. ``names`` (optional) are the options ``check`` reads: the rule is
    skipped when one of them was refused already. A rule without ``names`` is skipped when any
    option was refused, so ``check`` only ever sees valid, typed values.
    """

    def __init__(
        self, check: Callable[[Options], Any], message: str, *, names: tuple[str, ...] = ()
    ) -> None:
        self.check = check
        self.message = message
        self.names = names

    def problems(
        self, options: Options, given: Collection[str], failed: Collection[str]
    ) -> list[str]:
        if self.names:
            skipped = any(_canonical(options, name) in failed for name in self.names)
        else:
            skipped = bool(failed)  # check may read any option
        if skipped:
            return []
        try:
            ok = self.check(options)
        except ValueError as error:
            return [str(error) or self.message]
        return [] if ok else [self.message]

    def __repr__(self) -> str:
        return f"Rule({self.message!r})"


def _canonical(options: Options, name: str) -> str:
    return options.spec[name].name

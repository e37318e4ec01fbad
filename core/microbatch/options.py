"""Declared, typed connector options.

A connector declares its options once, as an :class:`OptionSpec` of :class:`Option` entries.
Users may spell a name in Spark's camelCase (``rowsPerSecond``), snake_case
(``rows_per_second``) or any letter case. :meth:`OptionSpec.parse` checks everything at once and
raises one :class:`~microbatch.errors.OptionError` listing every problem, with a "did you mean"
for unknown names. Each option may carry a ``validate`` callable, and the spec rules over
several options (:class:`ExactlyOneOf`, :class:`AtMostOneOf`, :class:`AtLeastOneOf`,
:class:`Requires`, :class:`Rule`, see :mod:`microbatch._option_rules`): their problems are in
the same error. A default goes through the same conversion as a value, when it is declared.

Values of ``secret`` options, of passthrough keys that name a secret (see
:mod:`microbatch._secret_keys`) and the passwords of URLs with credentials
(``scheme://user:***@host``) never appear in ``repr``, errors or progress.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ._durations import parse_duration
from ._option_rules import AtLeastOneOf, AtMostOneOf, ExactlyOneOf, OptionRule, Requires, Rule
from ._redact import REDACTED, redactor
from ._secret_keys import is_secret_key, mask_credentials, url_passwords
from .errors import OptionError

__all__ = [
    "REDACTED",
    "AtLeastOneOf",
    "AtMostOneOf",
    "ExactlyOneOf",
    "Option",
    "OptionRule",
    "OptionSpec",
    "OptionType",
    "Options",
    "Requires",
    "Rule",
    "normalize",
    "redact_error",
    "scrub",
    "secret_texts",
]

OptionType = Literal["string", "int", "float", "bool", "duration", "list", "json", "object"]
Validator = Callable[[Any], "str | bool | None"]


def normalize(name: str) -> str:
    """The lookup key of an option name: lower case without underscores or dashes."""
    return name.lower().replace("_", "").replace("-", "")


def _snake(name: str) -> str:
    out: list[str] = []
    for char in name.replace(".", "_").replace("-", "_"):
        if char.isupper() and out and out[-1] != "_":
            out.append("_")
        out.append(char.lower())
    return "".join(out)


@dataclass(frozen=True, kw_only=True)
class Option:
    """One declared option.

    ``name`` is the canonical Spark-style spelling. ``type`` decides conversion: strings from
    ``.option(k, "10")`` are converted (``"true"``/``"false"`` for bool, ``"10 seconds"`` for a
    duration, ``"a,b"`` for a list). ``object`` accepts any Python value (a callable, say) and is
    never shown. ``minimum``/``maximum`` bound numbers; ``choices`` are matched case-insensitively.
    ``identity`` marks an option whose value says *what* is read or written (a topic, a table):
    it is recorded in the checkpoint and a query started with another value is refused (see
    ``Source.identity``).

    ``validate`` checks a converted value: it returns ``None`` (or ``True``) when the value is
    acceptable, and a message (or ``False``) when it is not, or raises ``ValueError`` with the
    message. A ``default`` is converted and validated when the option is declared: a default
    that would be refused as a value raises ``ValueError`` naming the option.
    """

    name: str
    type: OptionType = "string"
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] | None = None
    doc: str = ""
    secret: bool = False
    identity: bool = False
    minimum: float | None = None
    maximum: float | None = None
    validate: Validator | None = None

    def __post_init__(self) -> None:
        if self.default is None:
            return
        try:
            converted = self.convert(self.default)
        except ValueError as error:
            shown = "" if self.secret or self.type == "object" else f" {self.default!r}"
            raise ValueError(f"option {self.name!r}: default{shown} is invalid: {error}") from None
        object.__setattr__(self, "default", converted)

    @property
    def key(self) -> str:
        return normalize(self.name)

    @property
    def python_name(self) -> str:
        """snake_case name, used for attribute access on :class:`Options`."""
        return _snake(self.name)

    def convert(self, value: Any) -> Any:
        """Return ``value`` converted to this option's type; ``ValueError`` says why it can't."""
        converted = _CONVERTERS[self.type](value)
        if self.choices is not None:
            by_key = {choice.lower(): choice for choice in self.choices}
            if str(converted).lower() not in by_key:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            converted = by_key[str(converted).lower()]
        number = converted.total_seconds() if isinstance(converted, timedelta) else converted
        if self.minimum is not None and number < self.minimum:
            raise ValueError(f"must be at least {_show_number(self.minimum)}")
        if self.maximum is not None and number > self.maximum:
            raise ValueError(f"must be at most {_show_number(self.maximum)}")
        if self.validate is not None:
            verdict = self.validate(converted)
            if verdict is False:
                raise ValueError("is not accepted")
            if isinstance(verdict, str) and verdict:
                raise ValueError(verdict)
        return converted

    def shown(self, value: Any) -> str:
        """How ``value`` may be displayed: redacted for secrets and objects."""
        if self.secret and value is not None:
            return REDACTED
        if self.type == "object" and value is not None:
            return f"<{type(value).__name__}>"
        return repr(mask_credentials(value))


def _show_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"expected an integer, got {value!r}")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r}") from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"must be 'true' or 'false', got {value!r}")


def _to_string(value: Any) -> str:
    if isinstance(value, str | int | float | bool):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise ValueError(f"expected a string, got {type(value).__name__}")


def _to_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list | tuple):
        return tuple(_to_string(item) for item in value)
    raise ValueError(f"expected a comma-separated string or a list, got {value!r}")


def _to_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"is not valid JSON ({error.msg} at character {error.pos})") from None
    return value


_CONVERTERS: dict[str, Any] = {
    "string": _to_string,
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "duration": parse_duration,
    "list": _to_list,
    "json": _to_json,
    "object": lambda value: value,
}


class Options(Mapping[str, Any]):
    """Validated option values of one connector instance.

    Look values up by any spelling of their name (``opts["rowsPerSecond"]``,
    ``opts["rows_per_second"]``) or as attributes (``opts.rows_per_second``). Options under a
    declared prefix (``kafka.*``) are in :attr:`passthrough`, keyed without the prefix; with
    several prefixes, :meth:`under` gives those of one.
    """

    def __init__(
        self,
        spec: OptionSpec,
        values: dict[str, Any],
        passthrough: dict[str, Any] | None = None,
        given: frozenset[str] = frozenset(),
        prefix_of: dict[str, str] | None = None,
    ) -> None:
        self._spec = spec
        self._values = values
        self.passthrough: dict[str, Any] = passthrough or {}
        self._given = given
        self._prefix_of = prefix_of or {}

    def under(self, prefix: str) -> dict[str, Any]:
        """The passthrough options given under ``prefix`` (one of the spec's), keyed without it."""
        wanted = prefix.lower()
        return {
            key: value
            for key, value in self.passthrough.items()
            if self._prefix_of.get(key, "").lower() == wanted
        }

    @property
    def spec(self) -> OptionSpec:
        """The declarations these values were parsed with."""
        return self._spec

    def __getitem__(self, name: str) -> Any:
        option = self._spec.get(name)
        if option is None:
            raise KeyError(name)
        return self._values[option.name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(f"no option named {name!r}") from None
        self.__dict__[name] = value  # values never change: later reads skip the lookup
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def is_set(self, name: str) -> bool:
        """True when the user gave this option (as opposed to its default applying)."""
        option = self._spec.get(name)
        return option is not None and option.name in self._given

    def redacted(self) -> dict[str, str]:
        """Every value as it may be displayed, secrets replaced."""
        shown = {name: self._spec[name].shown(value) for name, value in self._values.items()}
        for key in self.passthrough:
            value = self.passthrough[key]
            secret = self._spec.is_secret_passthrough(key) and value is not None
            shown[key] = REDACTED if secret else repr(mask_credentials(value))
        return shown

    def secret_values(self) -> list[str]:
        """Non-empty string forms of secret values, for :func:`scrub`: declared secrets, secret
        passthrough keys, and the passwords of URLs with credentials in any other value."""
        return self._spec.secret_values(self._values, self.passthrough)

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={value}" for name, value in self.redacted().items())
        return f"Options({body})"


class OptionSpec:
    """The options a connector declares.

    ``prefixes`` (for example ``("kafka.",)``) admit any option starting with them, passed
    through to a client. A passthrough key is a secret when it matches the known secret key
    patterns (``password``, ``sasl.jaas.config``, ``api.key``..., see
    :mod:`microbatch._secret_keys`) or is one of ``secret_keys`` (exact keys without the prefix,
    any case). ``rules`` are checked over several options (see :mod:`microbatch._option_rules`);
    a rule naming an undeclared option raises ``ValueError``.
    """

    def __init__(
        self,
        *options: Option,
        prefixes: tuple[str, ...] = (),
        rules: tuple[OptionRule, ...] = (),
        secret_keys: tuple[str, ...] = (),
    ) -> None:
        self.options = tuple(options)
        self.prefixes = prefixes
        self.rules = tuple(rules)
        self.secret_keys = tuple(secret_keys)
        self._by_key: dict[str, Option] = {}
        for option in options:
            if option.key in self._by_key:
                raise ValueError(f"option {option.name!r} is declared twice")
            self._by_key[option.key] = option
        for rule in self.rules:
            unknown = [name for name in rule.names if self.get(name) is None]
            if unknown:
                raise ValueError(f"{rule!r} names undeclared options: {', '.join(unknown)}")

    def __repr__(self) -> str:
        return f"OptionSpec({', '.join(option.name for option in self.options)})"

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    def __getitem__(self, name: str) -> Option:
        option = self.get(name)
        if option is None:
            raise KeyError(name)
        return option

    def get(self, name: str) -> Option | None:
        return self._by_key.get(normalize(name))

    def extend(self, *options: Option) -> OptionSpec:
        """A new spec with ``options`` added (used by connectors that share a base spec)."""
        return OptionSpec(
            *self.options,
            *options,
            prefixes=self.prefixes,
            rules=self.rules,
            secret_keys=self.secret_keys,
        )

    def is_secret_passthrough(self, key: str) -> bool:
        """True when passthrough key ``key`` (without its prefix) holds a secret."""
        return is_secret_key(key, self.secret_keys)

    def secret_values(self, values: Mapping[str, Any], passthrough: Mapping[str, Any]) -> list[str]:
        """The texts to scrub for these declared ``values`` and ``passthrough`` values."""
        found: list[Any] = []
        for name, value in values.items():
            option = self.get(name)
            if value is None or option is None:
                continue
            if option.type == "object" and not option.secret:
                continue
            found += [value] if option.secret else url_passwords(value)
        for key, value in passthrough.items():
            if value is not None:
                found += [value] if self.is_secret_passthrough(key) else url_passwords(value)
        texts: list[str] = []
        for value in found:
            texts += [text for text in secret_texts(value) if text not in texts]
        return texts

    def parse(self, raw: Mapping[str, Any], *, connector: str) -> Options:
        """Validate ``raw`` and return the typed values, defaults filled in.

        Raises one :class:`OptionError` listing every unknown name (with a suggestion), every
        value of the wrong type, out of range or refused by its validator, every missing required
        option and every broken rule. No secret value appears in it.
        """
        problems: list[str] = []
        values = {option.name: option.default for option in self.options}
        passthrough: dict[str, Any] = {}
        prefix_of: dict[str, str] = {}
        given: set[str] = set()
        failed: set[str] = set()
        raw_values: dict[str, Any] = {}  # as given, for scrubbing the problems
        for name, value in raw.items():
            prefix = next((p for p in self.prefixes if name.lower().startswith(p.lower())), None)
            if prefix is not None:
                passthrough[name[len(prefix) :]] = value
                prefix_of[name[len(prefix) :]] = prefix
                continue
            option = self.get(name)
            if option is None:
                problems.append(self._unknown(name))
                continue
            if value is None:
                continue
            raw_values[option.name] = value
            try:
                values[option.name] = option.convert(value)
                given.add(option.name)
            except ValueError as error:
                failed.add(option.name)
                shown = "" if option.secret or option.type == "object" else f" {value!r}"
                shown = mask_credentials(shown)
                problems.append(f"invalid value{shown} for option '{option.name}': {error}")
        for option in self.options:
            if option.required and values[option.name] is None and option.name not in failed:
                problems.append(
                    f"missing required option '{option.name}': {option.doc}".rstrip(": ")
                )
        options = Options(self, values, passthrough, frozenset(given), prefix_of)
        for rule in self.rules:
            problems += rule.problems(options, given | failed, failed)
        if problems:
            secrets = self.secret_values(values, passthrough) + self.secret_values(raw_values, {})
            problems = [scrub(problem, secrets) for problem in problems]
            listing = "\n".join(f"  - {problem}" for problem in problems)
            raise OptionError(f"Invalid options for '{connector}':\n{listing}", problems)
        return options

    def _unknown(self, name: str) -> str:
        candidates = {option.key: option.name for option in self.options}
        close = difflib.get_close_matches(normalize(name), list(candidates), n=1, cutoff=0.6)
        hint = f" (did you mean '{candidates[close[0]]}'?)" if close else ""
        known = ", ".join(option.name for option in self.options) or "none"
        if self.prefixes:
            known += "; and any option starting with " + ", ".join(repr(p) for p in self.prefixes)
        return f"unknown option '{name}'{hint}; known options: {known}"


def secret_texts(value: Any) -> list[str]:
    """The text forms a secret value may be printed in (bytes: decoded both ways).

    A mapping, list or tuple (a dict of client settings) is secret as a whole and item by item,
    since a client prints one setting at a time; items that cannot hold a secret (flags, whole
    numbers) are left out, so that they are not blanked out of every message.
    """
    if isinstance(value, bytes | bytearray):
        forms = {bytes(value).decode("latin-1"), bytes(value).decode("utf-8", "replace")}
        return sorted(form for form in forms if form)
    texts = [str(value)] if str(value) else []
    if isinstance(value, Mapping | list | tuple):
        for item in value.values() if isinstance(value, Mapping) else value:
            if not _plain_setting(str(item)):
                texts += [text for text in secret_texts(item) if text not in texts]
    return texts


def _plain_setting(text: str) -> bool:
    """True for a setting that cannot be a secret: empty, a flag or a whole number."""
    return not text or text.lower() in ("true", "false", "none") or text.isdigit()


def redact_error(error: BaseException, secrets: list[str] | tuple[str, ...]) -> BaseException:
    """``error`` if no part of its chain shows a secret, else a redacted copy of the chain.

    The copy is an instance of a subclass of ``error``'s class (same name and module) whose
    message, ``repr``, notes, causes and contexts carry no secret, and which keeps the original
    traceback; see :mod:`microbatch._redact`. Raise the result *outside* the ``except`` block
    that caught ``error``, or Python links the unredacted original as its ``__context__``.
    """
    return redactor(secrets).error(error)


def scrub(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    """``text`` with every occurrence of each secret replaced by a redaction marker.

    Escaped forms count too (``repr``/JSON escapes, URL-encoding); a secret shorter than 3
    characters is replaced only where it stands as a whole token (see :mod:`microbatch._redact`).
    """
    return redactor(secrets).text(text)

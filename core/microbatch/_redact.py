"""Keeping secret option values out of text, progress records and exceptions.

A :class:`Redactor` knows the secret values of one query (or one ``load()``) and removes them:

- from text (:meth:`Redactor.text`), in their raw form and in the escaped forms code tends to
  print: ``repr``/``ascii``/JSON escapes (``\\n``, ``\\xe9``, ``\\u00e9``, surrogate pairs,
  doubled backslashes of a ``repr`` of a ``repr``), the UTF-8 bytes of a ``bytes`` repr,
  URL-encoding (``quote``, ``quote_plus``, lower- or upper-case hex, encoded twice) and HTML
  escapes of ``& < > " '``, in any mix (values over 256 characters, such as keys: in each of
  those forms, not mixed);
- from nested values such as progress records (:meth:`Redactor.value`);
- from exceptions and their whole chain (:meth:`Redactor.error`).

Values of 3 characters or more are replaced wherever they appear. A shorter value (1 or 2
characters) would match inside ordinary words and numbers, so it is replaced only where it stands
as a whole token: not preceded or followed by a letter or digit (an escape such as ``%3D`` or
``\\n`` just before it counts as a separator). ``password=ab``, ``'ab'`` and ``login ab failed``
lose it; ``about`` and ``tab`` keep their letters.

Exceptions cannot be cleaned in place (a connector's ``__str__`` may ignore ``args``), so
:meth:`Redactor.error` returns a *redacted copy* of the chain when any part of it shows a secret
(or cannot be shown at all): each copy is an instance of a subclass of the original class with
the same name and module, so ``except ConnectionError`` and ``type(e).__name__`` still work; its
``str``, ``repr``, ``args``, notes and simple attributes are scrubbed; its ``__cause__``,
``__context__`` and exception-group members are redacted copies too; and it keeps the original
traceback, so ``traceback.format_exception`` still shows where the error happened. Local variables
of the traceback's frames are cleared whenever there are secrets (tools that print locals would
show them otherwise). An exception that shows no secret anywhere is returned unchanged.
"""

from __future__ import annotations

import functools
import html
import json
import re
import string
import threading
import traceback
import types
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["REDACTED", "Redacted", "Redactor", "describe_error", "redactor", "safe_str"]

REDACTED = "*********(redacted)"
SHORT_SECRET = 3
"""Secrets shorter than this are replaced only as whole tokens."""

_LONG_SECRET = 256  # longer ones (keys, certificates) are matched in their usual forms only
_MAX_CLASSES = 256  # copy classes kept for reuse
_MAX_CHAIN = 64  # exceptions followed through causes, contexts and group members
_BACKSLASHES = r"\\{0,8}"  # a repr of a repr of a repr doubles them each time
_ESCAPE = r"\\{1,8}"
_SHORT_ESCAPES = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f", "\v": "v", "\0": "0"}
_HTML_NAMES = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_PLAIN = frozenset(string.ascii_letters + string.digits + "-_.~")
_TOKEN_BEFORE = (
    r"(?:(?<![^\W_])|(?<=%[0-9A-Fa-f]{2})|(?<=\\[ntrbfv0])"
    r"|(?<=\\x[0-9A-Fa-f]{2})|(?<=\\u[0-9A-Fa-f]{4}))"
)
_TOKEN_AFTER = r"(?![^\W_])"


def safe_str(value: object) -> str:
    """``str(value)``, or a placeholder when that raises (as the traceback module does)."""
    return _shown(str, value)


def safe_repr(value: object) -> str:
    """``repr(value)``, or a placeholder when that raises."""
    return _shown(repr, value)


def _shown(show: Any, value: object) -> str:
    try:
        text = show(value)
    except Exception:
        text = None
    if isinstance(text, str):
        return text
    kind = "exception" if isinstance(value, BaseException) else "object"
    return f"<{kind} {show.__name__}() failed>"


def _hex(number: int, width: int = 0) -> str:
    """A regex for ``number`` in hex, either letter case, zero-padded to ``width``."""
    digits = f"{number:0{width}x}" if width else f"{number:x}"
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _char_pattern(char: str) -> str:
    """A regex for one character of a secret in any of the forms it is commonly printed in."""
    if char in _PLAIN:
        return re.escape(char)  # no escaping, quoting or encoding changes these
    code = ord(char)
    utf8 = char.encode("utf-8", "surrogatepass")
    forms = [r"\\{1,16}" if char == "\\" else _BACKSLASHES + re.escape(char)]
    forms.append("".join("%(?:25){0,2}" + _hex(byte, 2) for byte in utf8))
    if char == " ":
        forms.append(r"\+")
    if char in _HTML_NAMES:
        forms.append(f"&{_HTML_NAMES[char]};|&#0*{code};|&#[xX]0*{_hex(code)};")
    if char.isprintable() and code < 0x80:
        return "(?:" + "|".join(forms) + ")"
    if char in _SHORT_ESCAPES:
        forms.append(_ESCAPE + _SHORT_ESCAPES[char])
    if code < 0x100:
        forms.append(_ESCAPE + "x" + _hex(code, 2))
    if code < 0x10000:
        forms.append(_ESCAPE + "u" + _hex(code, 4))
    else:  # JSON writes characters outside the BMP as a surrogate pair
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        forms.append(_ESCAPE + "u" + _hex(high, 4) + _ESCAPE + "u" + _hex(low, 4))
    forms.append(_ESCAPE + "U" + _hex(code, 8))
    if code >= 0x80:  # repr of the encoded bytes
        forms.append("".join(_ESCAPE + "x" + _hex(byte, 2) for byte in utf8))
    return "(?:" + "|".join(forms) + ")"


def _printed_forms(secret: str) -> list[str]:
    """The usual escaped and encoded forms of ``secret``, as literal strings."""
    quoted = urllib.parse.quote(secret, safe="")
    forms = {
        secret,
        repr(secret)[1:-1],
        repr(repr(secret))[1:-1],
        ascii(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret.encode("utf-8", "surrogatepass"))[2:-1],
        urllib.parse.quote(secret),
        quoted,
        re.sub("%[0-9A-F]{2}", lambda hexes: hexes.group().lower(), quoted),
        urllib.parse.quote(quoted, safe=""),
        urllib.parse.quote_plus(secret),
        html.escape(secret),
    }
    return sorted(forms, key=len, reverse=True)


def _anchor(secret: str) -> str:
    """The longest run of characters of ``secret`` that every printed form keeps as they are
    (letters, digits, ``-_.~``: no escape, quoting or encoding changes them), or ``""``.

    Text that lacks a secret's anchor cannot show that secret in any form :meth:`Redactor.text`
    recognises, so a plain substring test (far cheaper than the pattern) rules most text out.
    """
    runs = re.findall(f"[{re.escape(''.join(sorted(_PLAIN)))}]+", secret)
    return max(runs, key=len, default="")


def _secret_pattern(secret: str) -> str:
    body = "".join(_char_pattern(char) for char in secret)
    if len(secret) < SHORT_SECRET:
        return _TOKEN_BEFORE + body + _TOKEN_AFTER
    return body


class Redacted:
    """Mixed into the class of every redacted exception copy (``isinstance`` tells them apart).

    ``_mb_original`` on the class is the class of the exception it was copied from.
    """

    __slots__ = ()
    _mb_original: type[BaseException]

    def __str__(self) -> str:
        return str(getattr(self, "__dict__", {}).get("_mb_text", ""))

    def __repr__(self) -> str:
        return str(getattr(self, "__dict__", {}).get("_mb_repr", ""))

    def __reduce__(self) -> Any:
        state = getattr(self, "__dict__", {})
        args = tuple(getattr(self, "args", ()))
        return (_restore, (type(self)._mb_original, state.get("_mb_text", ""), args))


class RedactedError(Redacted, Exception):
    """Stands in for an ``Exception`` whose class cannot be subclassed or instantiated."""


class RedactedBaseError(Redacted, BaseException):
    """Stands in for a ``BaseException`` whose class cannot be subclassed or instantiated."""


_classes: dict[tuple[type[BaseException], bool], type[BaseException]] = {}
_classes_lock = threading.Lock()


def _copy_class(original: type[BaseException], fallback: bool = False) -> type[BaseException]:
    """A subclass of ``original`` (with ``fallback``: of a stand-in) with its name and module."""
    key = (original, fallback)
    with _classes_lock:
        known = _classes.get(key)
    if known is not None:
        return known
    namespace = {
        "__module__": original.__module__,
        "__qualname__": original.__qualname__,
        "__doc__": original.__doc__,
        "_mb_original": original,
        "__str__": Redacted.__str__,
        "__repr__": Redacted.__repr__,
        "__reduce__": Redacted.__reduce__,
    }
    made: type[BaseException] | None = None
    if not fallback:
        try:
            made = types.new_class(
                original.__name__, (original, Redacted), exec_body=lambda ns: ns.update(namespace)
            )
        except Exception:
            made = None
    if made is None:
        base = RedactedError if issubclass(original, Exception) else RedactedBaseError
        made = type(original.__name__, (base,), namespace)
    with _classes_lock:
        if len(_classes) >= _MAX_CLASSES:  # classes made at run time would pile up otherwise
            _classes.clear()
        return _classes.setdefault(key, made)


def _instantiate(
    original: type[BaseException], args: tuple[Any, ...], text: str, fallback: bool = False
) -> BaseException:
    """An instance of the copy class of ``original``, made without running ``__init__``."""
    cls: Any = _copy_class(original, fallback)
    for attempt in (args, (text,)):
        try:
            made = cls.__new__(cls, *attempt)
        except Exception:
            continue
        if isinstance(made, cls):
            return made
    if fallback:
        raise TypeError(f"cannot make a redacted copy of {original.__qualname__}")
    return _instantiate(original, args, text, fallback=True)


def _restore(original: type[BaseException], text: str, args: tuple[Any, ...]) -> BaseException:
    """Unpickle a redacted copy (its traceback and chain are not pickled, as for any exception)."""
    return _showing(_instantiate(original, args, text), original.__name__, text)


def _stand_in(original: type[BaseException], text: str) -> BaseException:
    """An error with ``original``'s class name that shows ``text`` and carries nothing else."""
    try:
        made = _instantiate(original, (), "", fallback=True)
    except Exception:
        made = RedactedError()
    return _showing(made, original.__name__, text)


def _showing(made: BaseException, name: str, text: str) -> BaseException:
    """``made``, with ``str`` showing ``text`` and ``repr`` showing ``name(text)``."""
    made.__dict__.update(_mb_text=text, _mb_repr=f"{name}({text!r})")
    return made


class Redactor:
    """Removes the given secret values from text, nested values and exception chains.

    Falsy (and a no-op) when there are no secrets. Build one with :func:`redactor`.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(unique)
        # Long values (keys, certificates) would make a character-wise pattern slow to compile:
        # they are replaced in their usual printed forms, as plain strings.
        self._literals = [
            form
            for secret in unique
            if len(secret) > _LONG_SECRET
            for form in _printed_forms(secret)
        ]
        patterns = [_secret_pattern(secret) for secret in unique if len(secret) <= _LONG_SECRET]
        # A text lacking every anchor shows no secret; None when some secret has no anchor.
        anchors = tuple(_anchor(secret) for secret in unique)
        self._anchors: tuple[str, ...] | None = anchors if all(anchors) else None
        self._find: re.Pattern[str] | None = None
        self._sub: re.Pattern[str] | None = None
        if patterns:
            alternatives = "|".join(patterns)
            self._find = re.compile(alternatives)
            self._sub = re.compile(f"(?P<keep>{re.escape(REDACTED)})|{alternatives}")

    def __bool__(self) -> bool:
        return bool(self.secrets)

    # -- text and values ------------------------------------------------------------------
    def text(self, text: str) -> str:
        """``text`` with every secret, in every form it is recognised in, replaced."""
        if not self.secrets or not text or not self._may_show(text):
            return text
        for form in self._literals:
            text = text.replace(form, REDACTED)
        return self._sub.sub(_replace, text) if self._sub is not None else text

    def leaks(self, text: str) -> bool:
        """Whether ``text`` shows one of the secrets."""
        if not self._may_show(text):
            return False
        if any(form in text for form in self._literals):
            return True
        return self._find is not None and self._find.search(text) is not None

    def _may_show(self, text: str) -> bool:
        """False when ``text`` surely shows no secret (it lacks every secret's anchor)."""
        return self._anchors is None or any(anchor in text for anchor in self._anchors)

    def value(self, value: Any) -> Any:
        """``value`` with secrets removed from every string inside dicts, lists and tuples
        (``value`` itself when none shows one)."""
        if not self.secrets:
            return value
        if self._anchors is not None and isinstance(value, dict | list | tuple):
            # Every string inside is in the JSON text with its anchor characters as they are:
            # one C-level dump and substring test spare the walk (once per progress record).
            try:
                shown = json.dumps(value, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                shown = None
            if shown is not None and not self._may_show(shown):
                return value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = {self._value(k): self._value(v) for k, v in value.items()}
            if type(value) is dict:
                return items
            try:
                return type(value)(items)
            except Exception:
                return items
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, tuple) and type(value) is tuple:
            return tuple(self._value(item) for item in value)
        return value

    # -- exceptions -----------------------------------------------------------------------
    def describe(self, error: BaseException) -> str:
        """``"TypeName: message"`` of ``error``, scrubbed, even when its ``str()`` raises."""
        return self.text(f"{type(error).__name__}: {safe_str(error)}")

    def error(self, error: BaseException) -> BaseException:
        """``error`` itself when no part of its chain shows a secret, else a redacted copy.

        See the module docstring for what the copy keeps. Never raises: if a copy cannot be
        made, a stand-in with the original class name and a scrubbed message is returned.
        """
        if not self:
            return error
        try:
            chain = list(_chain(error))
            for member in chain:
                traceback.clear_frames(member.__traceback__)
            if len(chain) <= _MAX_CHAIN and not any(self._shows_secret(m) for m in chain):
                return error  # (a longer chain is cut short in a copy: its end is unchecked)
            return self._copy(error, {}, set())
        except Exception:
            return _stand_in(type(error), self.text(safe_str(error)))

    def _shows_secret(self, error: BaseException) -> bool:
        text, shown = safe_str(error), safe_repr(error)
        if "str() failed>" in text or "repr() failed>" in shown:
            return True  # copy it, so that whoever shows it later does not fail either
        texts = [text, shown, *(safe_repr(arg) for arg in _args(error))]
        texts += [safe_str(note) for note in _notes(error)]
        for name, value in _attributes(error):
            texts += [name, value if isinstance(value, str) else safe_repr(value)]
        return any(self.leaks(item) for item in texts)

    def _copy(
        self, error: BaseException, memo: dict[int, BaseException], busy: set[int]
    ) -> BaseException:
        known = memo.get(id(error))
        if known is not None:
            return known
        if id(error) in busy or len(memo) >= _MAX_CHAIN:  # a cycle through group members
            return _stand_in(type(error), "(the exception chain continues; not shown)")
        busy.add(id(error))
        original: type[BaseException] = getattr(type(error), "_mb_original", type(error))
        text, shown = self.text(safe_str(error)), self.text(safe_repr(error))
        if isinstance(error, BaseExceptionGroup):
            members = tuple(self._copy(member, memo, busy) for member in error.exceptions)
            args: tuple[Any, ...] = (self.text(safe_str(error.message)), members)
        else:
            args = tuple(self._arg(arg) for arg in _args(error))
        made = _instantiate(original, args, text)
        made.__dict__.update(_mb_text=text, _mb_repr=shown)
        memo[id(error)] = made
        busy.discard(id(error))
        for name, value in _attributes(error):
            cleaned = self._attribute(value)
            if cleaned is not _DROP and not self.leaks(name):
                made.__dict__[name] = cleaned
        notes = [self.text(safe_str(note)) for note in _notes(error)]
        if notes:
            made.__notes__ = notes
        made.__traceback__ = error.__traceback__
        if error.__cause__ is not None:
            made.__cause__ = self._copy(error.__cause__, memo, busy)
        if error.__context__ is not None:
            made.__context__ = self._copy(error.__context__, memo, busy)
        made.__suppress_context__ = error.__suppress_context__
        return made

    def _arg(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, bool | int | float):
            return value
        return self.text(safe_repr(value))

    def _attribute(self, value: Any) -> Any:
        if isinstance(value, _SIMPLE_VALUES):
            return self._arg(value)
        if isinstance(value, list | tuple) and all(
            isinstance(item, _SIMPLE_VALUES) for item in value
        ):
            items = [self._arg(item) for item in value]
            return items if isinstance(value, list) else tuple(items)
        return _DROP


_DROP = object()
_SIMPLE_VALUES = (str, bool, int, float, type(None))  # attributes a copy keeps (scrubbed)


def _replace(match: re.Match[str]) -> str:
    return match.group("keep") or REDACTED


def _args(error: BaseException) -> tuple[Any, ...]:
    try:
        args = error.args
    except Exception:
        return ()
    return tuple(args) if isinstance(args, tuple) else ()


def _notes(error: BaseException) -> list[Any]:
    notes = getattr(error, "__dict__", {}).get("__notes__")
    return list(notes) if isinstance(notes, list | tuple) else []


def _attributes(error: BaseException) -> list[tuple[str, Any]]:
    """Instance attributes worth carrying over to a copy (not dunders, not the copy's own)."""
    found = getattr(error, "__dict__", {})
    return [
        (name, value)
        for name, value in list(found.items())
        if isinstance(name, str) and not name.startswith("__") and not name.startswith("_mb_")
    ]


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the exceptions reachable through causes, contexts and group members
    (at most one more than ``_MAX_CHAIN``)."""
    seen: set[int] = set()
    pending = [error]
    while pending and len(seen) <= _MAX_CHAIN:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        links = [current.__cause__, current.__context__]
        if isinstance(current, BaseExceptionGroup):
            links += list(current.exceptions)
        pending += [link for link in links if isinstance(link, BaseException)]


@functools.lru_cache(maxsize=64)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redactor(secrets: Iterable[str]) -> Redactor:
    """The :class:`Redactor` for these secrets (compiled once per distinct set)."""
    return _cached(tuple(sorted({s for s in secrets if isinstance(s, str) and s})))


def describe_error(error: BaseException, secrets: Iterable[str]) -> str:
    """``"TypeName: message"`` of ``error`` without the secrets; safe when ``str()`` raises."""
    return redactor(secrets).describe(error)

"""Which passthrough options are secrets, and URLs that carry a password.

A passthrough key (``kafka.sasl.jaas.config`` without its ``kafka.`` prefix) is a secret when one
of its *segments* names a secret, or two neighbouring segments do. Segments are the parts
between dots, underscores, dashes and camelCase humps, compared in lower case:

- one segment: ``password``, ``passwd``, ``pwd``, ``passphrase``, ``secret``, ``token``,
  ``credential(s)``, ``auth``, ``jaas``, ``apikey``, ``privatekey``, ``accesskey``,
  ``secretkey``, ``sas`` (and the plural of each);
- two neighbouring segments: ``api.key``, ``private.key``, ``access.key``, ``secret.key``,
  ``account.key``, ``keystore.key``.

So ``sasl.jaas.config``, ``ssl.key.password``, ``ssl.keystore.password``,
``ssl.truststore.password``, ``schema.registry.api.key`` and ``fs.s3a.access.key`` are secrets,
and ``key.deserializer``, ``ssl.keystore.location`` and ``ssl.key.type`` are not. A connector adds
exact keys of its client with ``OptionSpec(secret_keys=...)``.

Any value of the form ``scheme://user:password@host/...`` (also inside a longer value such as a
JDBC URL or a list of servers) is displayed as ``scheme://user:***@host/...`` and its password is
a secret value, scrubbed from errors and progress like a declared secret.
"""

from __future__ import annotations

import itertools
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "is_secret_key", "mask_credentials", "url_passwords"]

MASK = "***"

_SECRET_SEGMENTS = frozenset(
    word + plural
    for word in (
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "token",
        "credential",
        "auth",
        "jaas",
        "apikey",
        "privatekey",
        "accesskey",
        "secretkey",
        "sas",
    )
    for plural in ("", "s")
)
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("account", "key"),
        ("keystore", "key"),
    }
)
_SEPARATORS = re.compile(r"[._\-\s/:]+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# scheme://user:password@ — the password runs to the last "@" before the path.
_URL_CREDENTIALS = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*:)(?P<password>[^/?#\s]*)@"
)


def segments(key: str) -> list[str]:
    """The lower-case parts of ``key``: ``"sasl.jaasConfig"`` gives ``sasl, jaas, config``."""
    return [part.lower() for word in _SEPARATORS.split(key) for part in _HUMP.split(word) if part]


def is_secret_key(key: str, exact: Iterable[str] = ()) -> bool:
    """True when passthrough key ``key`` names a secret (see the module docstring)."""
    lowered = key.lower()
    if any(lowered == known.lower() for known in exact):
        return True
    parts = segments(key)
    if any(part in _SECRET_SEGMENTS for part in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


def mask_credentials(value: Any) -> Any:
    """``value`` with the password of every ``scheme://user:password@`` replaced by ``***``.

    Strings are masked; lists, tuples and dicts are masked item by item; anything else is
    returned unchanged."""
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(lambda m: f"{m['head']}{MASK}@", value)
    if isinstance(value, tuple):
        return tuple(mask_credentials(item) for item in value)
    if isinstance(value, list):
        return [mask_credentials(item) for item in value]
    if isinstance(value, dict):
        return {key: mask_credentials(item) for key, item in value.items()}
    return value


def url_passwords(value: Any) -> list[str]:
    """The passwords of the URLs with credentials in ``value`` (raw and percent-decoded)."""
    if isinstance(value, str):
        found: list[str] = []
        for match in _URL_CREDENTIALS.finditer(value):
            password = match["password"]
            for form in (password, urllib.parse.unquote(password)):
                if form and form != MASK and form not in found:
                    found.append(form)
        return found
    if isinstance(value, list | tuple):
        return [password for item in value for password in url_passwords(item)]
    if isinstance(value, dict):
        return [password for item in value.values() for password in url_passwords(item)]
    return []

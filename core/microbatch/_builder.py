"""The setters shared by the reading and writing builders: ``format``, ``option``, ``options``."""

from __future__ import annotations

from typing import Any, Self

__all__ = ["FormatOptionsBuilder"]


class FormatOptionsBuilder:
    """A builder that names a connector format and collects its options.

    Every setter returns the builder itself, so calls chain as in Spark.
    """

    _format: str | None
    _options: dict[str, Any]

    def format(self, name: str) -> Self:
        """The connector format, e.g. ``"rate"`` (a source) or ``"console"`` (a sink)."""
        self._format = name
        return self

    def option(self, key: str, value: Any) -> Self:
        """Set one connector option (names are case-insensitive; camelCase or snake_case).

        On a stream writer the key may also be ``checkpointLocation``.
        """
        self._options[key] = value
        return self

    def options(self, **options: Any) -> Self:
        """Set several connector options."""
        self._options.update(options)
        return self

"""When batches run: the default trigger, processing time, once, available-now.

Build one with :meth:`Trigger.of` (what ``write_stream.trigger(...)`` calls), which takes
Spark's keywords: ``processing_time="1 second"``, ``once=True``, ``available_now=True``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ._durations import parse_duration
from .errors import ConfigurationError

__all__ = ["AvailableNow", "Default", "Once", "ProcessingTime", "Trigger"]


@dataclass(frozen=True)
class Trigger:
    """Base of the triggers; ``finite`` triggers stop the query by themselves."""

    finite: bool = False

    def next_start(self, now: float, last_start: float | None) -> float:
        """Epoch seconds at which the next trigger should fire, given the current time."""
        return now

    @staticmethod
    def of(
        *,
        processing_time: str | timedelta | float | None = None,
        once: bool | None = None,
        available_now: bool | None = None,
        **unknown: Any,
    ) -> Trigger:
        """The trigger named by exactly one keyword; no keyword gives the default trigger."""
        if unknown:
            names = ", ".join(sorted(unknown))
            raise ConfigurationError(
                f"Unknown trigger {names}; use processing_time=..., once=True or "
                "available_now=True (continuous processing is not supported)"
            )
        given = {
            name: value
            for name, value in (
                ("processing_time", processing_time),
                ("once", once),
                ("available_now", available_now),
            )
            if value is not None
        }
        if len(given) > 1:
            raise ConfigurationError(
                f"Only a single trigger is allowed, got {', '.join(sorted(given))}"
            )
        if not given:
            return Default()
        name, value = next(iter(given.items()))
        if name == "processing_time":
            if isinstance(value, str) and not value.strip():
                raise ConfigurationError(
                    "processing_time must be a non-empty string such as '1 second'"
                )
            try:
                interval = parse_duration(value)
            except ValueError as error:
                raise ConfigurationError(
                    f"Invalid processing_time trigger interval: {error}"
                ) from None
            return ProcessingTime(interval=interval.total_seconds()) if interval else Default()
        if value is not True:
            raise ConfigurationError(f"Trigger {name} must be True, got {value!r}")
        return Once() if name == "once" else AvailableNow()


@dataclass(frozen=True)
class Default(Trigger):
    """The next batch as soon as the previous one ends; idle polling while there is no data."""

    def __repr__(self) -> str:
        return "Trigger(default)"


@dataclass(frozen=True)
class ProcessingTime(Trigger):
    """Batches start on multiples of ``interval`` seconds since the epoch; an overrun batch is
    followed immediately by the next one, and missed ticks are not caught up."""

    interval: float = 0.0

    def next_start(self, now: float, last_start: float | None) -> float:
        if last_start is None:
            return now
        boundary = math.floor(last_start / self.interval) * self.interval + self.interval
        return max(boundary, now)

    def __repr__(self) -> str:
        return f"Trigger(processing_time={self.interval:g}s)"


@dataclass(frozen=True)
class Once(Trigger):
    """One batch of everything available (or only the unfinished batch of a restart), then stop."""

    finite: bool = True

    def __repr__(self) -> str:
        return "Trigger(once)"


@dataclass(frozen=True)
class AvailableNow(Trigger):
    """Everything available at start, in as many rate-limited batches as it takes, then stop."""

    finite: bool = True

    def __repr__(self) -> str:
        return "Trigger(available_now)"

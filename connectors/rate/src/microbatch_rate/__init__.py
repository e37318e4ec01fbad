"""Test sources for microbatch: ``rate`` and ``rate-micro-batch``."""

from __future__ import annotations

from .rate import RateSource
from .rate_micro_batch import RateMicroBatchSource

__all__ = ["RateMicroBatchSource", "RateSource"]
__version__ = "0.1.0"

"""Test sources for microbatch: ``rate`` and ``rate-micro-batch``."""

from __future__ import annotations

from .rate import RateSource, RateSplit, RateSplitReader, RateStreamReader
from .rate_micro_batch import (
    RateMicroBatchReader,
    RateMicroBatchSource,
    RateMicroBatchSplit,
    RateMicroBatchSplitReader,
)

__all__ = [
    "RateMicroBatchReader",
    "RateMicroBatchSource",
    "RateMicroBatchSplit",
    "RateMicroBatchSplitReader",
    "RateSource",
    "RateSplit",
    "RateSplitReader",
    "RateStreamReader",
]
__version__ = "0.1.0"

"""The test kit's source suite against the Delta source on real tables written by delta-rs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from microbatch import ReadLimit, Split, StreamReader
from microbatch_delta.source import DeltaSource
from microbatch_testkit import SourceContract

ROWS = 4
APPENDS = 3  # one file each: more than the file limit per produce()


class TestDeltaSourceContract(SourceContract):
    source_class = DeltaSource

    @pytest.fixture(autouse=True)
    def _table(self, delta_table: Any, make_numbers: Any) -> None:
        self.table = delta_table
        self.numbers = make_numbers
        self.next_id = 0
        self._append()

    def _append(self) -> None:
        self.table.append(self.numbers(self.next_id, ROWS))
        self.next_id += ROWS

    def make_options(self) -> dict[str, Any]:
        return {"path": self.table.uri, "maxFilesPerTrigger": 2}

    def produce(self, reader: StreamReader) -> None:
        for _ in range(APPENDS):
            self._append()

    def count_units(self, splits: Sequence[Split], limit: ReadLimit) -> int:
        return len(splits)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = self.table.uri
        return [
            ({"path": path, "maxFilesPerTrigger": 0}, "must be a positive integer"),
            ({"path": path, "maxBytesPerTrigger": "lots"}, "such as '10g'"),
            ({"path": path, "startingVersion": "-1"}, "greater than or equal to zero"),
            (
                {"path": path, "startingVersion": 1, "startingTimestamp": "2024-01-01"},
                "Please either provide 'startingVersion' or 'startingTimestamp'",
            ),
            ({"path": path, "startingTimestamp": "yesterday"}, "must be a timestamp"),
        ]


class TestDeltaChangeFeedContract(TestDeltaSourceContract):
    """The same suite with ``readChangeFeed=true`` (each appended version: one file)."""

    @pytest.fixture(autouse=True)
    def _table(self, delta_table: Any, make_numbers: Any) -> None:
        self.table = delta_table
        self.numbers = make_numbers
        self.next_id = 0
        self.table.append(
            self.numbers(0, ROWS), configuration={"delta.enableChangeDataFeed": "true"}
        )
        self.next_id = ROWS

    def make_options(self) -> dict[str, Any]:
        return {**super().make_options(), "readChangeFeed": True}

    def count_units(self, splits: Sequence[Split], limit: ReadLimit) -> int:
        from microbatch_delta._change_feed import ChangeRange

        return sum(
            s.last_version - s.first_version + 1 if isinstance(s, ChangeRange) else 1
            for s in splits
        )

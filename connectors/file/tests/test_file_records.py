"""Blocks of whole records out of a file's blocks: whatever the block ends, the records are
those of the whole file split at its separator."""

from __future__ import annotations

import random
from pathlib import Path

import fsspec
import pytest

from microbatch_file._formats import read_chunks
from microbatch_file._listing import FileEntry
from microbatch_file._records import split_records, whole_records


@pytest.mark.parametrize("separator", [b"|", b"||", b"|||", b"ab", b"aba", b"\x01", b"\r\n"])
def test_records_across_blocks_are_those_of_the_whole(separator: bytes) -> None:
    rng = random.Random(len(separator) * 31 + separator[0])
    pieces = [b"a", b"b", b"|", b"x", b"\r", b"\n", separator, separator[:1], separator[1:]]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randrange(0, 12))))
        blocks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        got = [
            record
            for block in whole_records(blocks, separator)
            for record in split_records(block, separator)
        ]
        assert got == split_records(data, separator), (data, blocks)


def test_chunks_end_at_line_ends_and_a_file_without_any_is_one_chunk(tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
    chunks = list(read_chunks(fs, FileEntry(str(lines), lines.stat().st_size, None), "l", 100))
    assert all(chunk.endswith(b"\n") for chunk in chunks)
    assert b"".join(chunks) == lines.read_bytes()
    flat = tmp_path / "flat.txt"
    flat.write_bytes(b"record|" * 5000)
    chunks = list(read_chunks(fs, FileEntry(str(flat), flat.stat().st_size, None), "f", 100))
    assert chunks == [flat.read_bytes()]

"""Importing is streamed (issue 31 §6): the memory an import takes is bounded by a batch,
not by the log. A log four times as long imports, and is recognised as already present,
with the same peak of Python allocations."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from stores import SqliteSessionStore
from tui.cli.importing import ImportOutcome, import_path

CREATED = 1_785_000_000_000


def write_log(path: Path, count: int, *, compressed: bool = False) -> int:
    """A dsh export of ``count`` events, or a reference log compressed in frames."""
    if compressed:
        head = {"type": "session", "id": "big", "createdAt": CREATED, "cwd": "/w", "version": 0}
    else:
        head = {"type": "session", "id": "big", "created_at": CREATED, "cwd": "/w"}
    lines = [json.dumps(head)]
    for i in range(count):
        event = {"type": "x/note", "seq": i, "time": CREATED + i}
        event["data"] = {"n": i, "text": f"note {i} " + "lorem ipsum " * 40}
        if not compressed:
            event |= {"surface_op": None, "source_event_seqs": None}
        lines.append(json.dumps(event))
    if compressed:
        compress = zstandard.ZstdCompressor(write_checksum=True).compress
        frames = [
            compress("".join(x + "\n" for x in lines[k : k + 500]).encode())
            for k in range(0, len(lines), 500)
        ]
        path.write_bytes(b"".join(frames))
    else:
        path.write_bytes("".join(x + "\n" for x in lines).encode())
    return sum(len(x) + 1 for x in lines)


async def peak_of_import(db: Path, log: Path) -> tuple[ImportOutcome, ImportOutcome, int]:
    """The outcomes of importing ``log`` twice (imported, then present) and the peak of
    Python allocations over both."""
    async with await SqliteSessionStore.open(db) as store:
        tracemalloc.start()
        try:
            first = await import_path(store, log)
            again = await import_path(store, log)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return first, again, peak


@pytest.mark.parametrize("compressed", [False, True])
async def test_memory_does_not_grow_with_the_log(tmp_path: Path, compressed: bool) -> None:
    suffix = ".jsonl.zst" if compressed else ".jsonl"
    small_log, big_log = tmp_path / f"small{suffix}", tmp_path / f"big{suffix}"
    write_log(small_log, 3_000, compressed=compressed)
    write_log(big_log, 12_000, compressed=compressed)
    small = await peak_of_import(tmp_path / "small.sqlite3", small_log)
    big = await peak_of_import(tmp_path / "big.sqlite3", big_log)
    for first, again, _ in (small, big):
        assert (first.status, again.status) == ("imported", "present")
        assert first.format == ("reference-zstd" if compressed else "dsh")
    # before: the whole log, decoded and parsed, at once (about 4 times as much)
    assert big[2] < small[2] * 1.5, (small[2], big[2])

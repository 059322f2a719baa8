"""A full disk: every error says so, nothing half-written, and reading still works.

Two ways to fill it: SQLite's ``PRAGMA max_page_count`` (a deterministic SQLITE_FULL on the
store's own connection) and a real tmpfs filled to the last byte (ENOSPC, where even a
normal read fails because SQLite cannot size the ``-shm`` file of a WAL database).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from core.errors import DiskFullError, StoreError
from core.log import user_message
from stores import SqliteSessionStore
from tests.fulldisk import SmallDisk, cap_pages, small_disk, tmpfs_mounts

__all__ = ["small_disk", "tmpfs_mounts"]


async def test_a_write_on_a_full_database_says_the_disk_is_full(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await store.create_session("s")
        await store.append("s", "user/message", user_message("kept"), surface_op="append")
        await cap_pages(store)
        # Random text: large payloads are stored compressed, so "x" * n would fit.
        noise = random.Random(0).randbytes(200_000).hex()
        with pytest.raises(DiskFullError, match="the disk is full"):
            await store.append("s", "user/message", user_message(noise), surface_op="append")
        # Nothing of the failed append was written; the store still reads and writes.
        assert [e.seq for e in await store.read_events("s")] == [0]
        await store.append("s", "vendor/note", {"small": True})
        assert [e.seq for e in await store.read_events("s")] == [0, 1]


async def seeded(disk: SmallDisk) -> Path:
    db = disk.root / "dsh.sqlite3"
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("s")
        await store.append("s", "user/message", user_message("hello"), surface_op="append")
    return db


async def test_a_completely_full_disk_still_opens_for_reading(small_disk: SmallDisk) -> None:
    db = await seeded(small_disk)
    small_disk.fill()
    assert small_disk.free_bytes() == 0
    # The normal way fails for lack of space (SQLite cannot create the -shm file).
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        sqlite3.connect(db).execute("SELECT count(*) FROM events").fetchall()
    async with await SqliteSessionStore.open(db) as store:
        assert store.read_only
        assert store.read_only_reason is not None
        assert "the disk is full" in store.read_only_reason
        assert [h.id for h in await store.list_headers()] == ["s"]
        events = await store.read_events("s")
        assert [e.data["content"][0]["text"] for e in events] == ["hello"]
        with pytest.raises(DiskFullError, match="the disk is full"):
            await store.append("s", "vendor/note", {})
        with pytest.raises(DiskFullError, match="the disk is full"):
            await store.create_session("t")
    small_disk.free()
    async with await SqliteSessionStore.open(db) as store:  # space is back: writable again
        assert not store.read_only and store.read_only_reason is None
        await store.append("s", "vendor/note", {})


async def test_a_new_database_on_a_full_disk_says_the_disk_is_full(
    small_disk: SmallDisk,
) -> None:
    small_disk.fill()
    with pytest.raises(StoreError, match="the disk is full"):
        await SqliteSessionStore.open(small_disk.root / "new.sqlite3")

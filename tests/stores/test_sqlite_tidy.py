"""A store that wrote tidies its file when it closes (issue 15, ``stores.sqlite._tidy``):
a small search index is merged into one segment, free pages go back to the file system
(new databases are ``auto_vacuum = INCREMENTAL``), and nothing read changes. The tidy is
optional: a store that only read leaves the file alone, and one that cannot tidy (another
writer, a full disk) still closes at once with everything intact."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from core.jsoncodec import dumps_js
from stores import SqliteSessionStore
from stores import sqlite as sqlite_store
from tests.benchmarks.bench_storage import paced_batches, workload
from tests.fulldisk import cap_pages

FIXTURES = Path(__file__).parent / "fixtures"
OWNER = "fixture-owner"  # of the v6 fixture's sessions
TERMS = ["deploy", "the", "retry", "ab", "策略", "中", "z", "policy three", "xyzzy"]


def segments(path: Path) -> list[int]:
    """The blocks of each segment of the search index (FTS5 keeps a segment's blocks
    under rowids of its id shifted by 37 bits)."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM search_index_data WHERE id >= ? GROUP BY id >> 37",
            (1 << 37,),
        ).fetchall()
    return [n for (n,) in rows]


def pragma(path: Path, name: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        (value,) = conn.execute(f"PRAGMA {name}").fetchone()
    return int(value)


async def write(store: SqliteSessionStore, sessions: int = 3, turns: int = 12) -> list[str]:
    """The storage benchmark's workload, each user message one append and each reply
    paced (the open pack rewritten again and again: free pages; a search segment per
    message: automerge's levels)."""
    ids, plan = workload(sessions, turns, seed=7)
    for sid in ids:
        await store.create_session(sid, created_at=1)
    for t in range(turns):
        for s, sid in enumerate(ids):
            turn = plan[s][t]
            await store.append_batch(sid, [turn.user])
            for batch in paced_batches(turn):
                await store.append_batch(sid, batch)
    return ids


async def seen(store: SqliteSessionStore, ids: list[str]) -> list[object]:
    """Everything a reader gets: each session's events (as JSON text) and the hits of
    every term."""
    out: list[object] = []
    for sid in ids:
        events = await store.read_events(sid)
        out.append([(e.seq, e.type, e.time, dumps_js(e.data)) for e in events])
    for term in TERMS:
        hits = await store.search_messages(term, limit=50)
        out.append([(h.session_id, h.seq, h.snippet, h.spans) for h in hits])
    return out


async def test_closing_merges_the_search_index_and_gives_back_the_free_pages(
    tmp_path: Path,
) -> None:
    db = tmp_path / "dsh.sqlite3"
    store = await SqliteSessionStore.open(db)
    ids = await write(store)
    before = await seen(store, ids)
    # What there is to tidy (else this test would prove nothing).
    sizes = segments(db)
    assert len(sizes) > 1 and max(sizes) < 0.9 * sum(sizes)
    assert pragma(db, "freelist_count") > 0
    assert pragma(db, "auto_vacuum") == 2  # INCREMENTAL, as every new database
    pages = pragma(db, "page_count")
    await store.close()

    assert len(segments(db)) == 1
    assert pragma(db, "freelist_count") == 0
    assert pragma(db, "page_count") < pages
    assert not db.with_name(db.name + "-wal").exists()  # the file itself shrank
    async with await SqliteSessionStore.open(db) as again:
        assert await seen(again, ids) == before
        # And the merged index keeps taking new messages.
        await again.append_batch(ids[0], [workload(1, 1, seed=8)[1][0][0].user])
        assert await again.search_messages("the", limit=50)
    async with await SqliteSessionStore.open(db, read_only=True) as read_only:
        assert (await seen(read_only, ids))[len(ids) :] != []


async def test_a_store_that_only_read_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(db) as store:
        ids = await write(store, sessions=1, turns=4)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    async with await SqliteSessionStore.open(db) as store:
        await seen(store, ids)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


async def test_a_large_index_is_left_to_automerge_but_free_pages_still_go_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store.tidy, "_TIDY_MAX_BLOCKS", 8)
    db = tmp_path / "dsh.sqlite3"
    store = await SqliteSessionStore.open(db)
    ids = await write(store)
    before = await seen(store, ids)
    sizes = segments(db)
    assert sum(sizes) > 8 and len(sizes) > 1
    await store.close()
    assert segments(db) == sizes
    assert pragma(db, "freelist_count") == 0
    async with await SqliteSessionStore.open(db) as again:
        assert await seen(again, ids) == before


async def test_a_store_closes_at_once_untidied_while_another_process_writes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "dsh.sqlite3"
    # A busy timeout far longer than the wait below: the tidy must not wait at all.
    store = await SqliteSessionStore.open(db, busy_timeout=600)
    ids = await write(store)
    before = await seen(store, ids)
    sizes, free = segments(db), pragma(db, "freelist_count")
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the write lock, held
        await asyncio.wait_for(store.close(), timeout=60)
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert (segments(db), pragma(db, "freelist_count")) == (sizes, free)
    async with await SqliteSessionStore.open(db) as again:
        assert await seen(again, ids) == before


async def test_a_full_disk_leaves_the_file_untidied_and_whole(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    store = await SqliteSessionStore.open(db)
    ids = await write(store)
    before = await seen(store, ids)
    await cap_pages(store)  # a merge writes its new segment before it frees the old ones
    await store.close()
    async with await SqliteSessionStore.open(db) as again:
        assert await seen(again, ids) == before


async def test_an_older_database_keeps_its_layout_and_closes_as_before(
    tmp_path: Path,
) -> None:
    """A file created before this dsh (here schema v6, ``auto_vacuum`` off) is not
    VACUUMed to change that: its free pages stay for later appends to reuse."""
    db = tmp_path / "dsh.sqlite3"
    shutil.copy(FIXTURES / "v6.sqlite3", db)
    assert pragma(db, "auto_vacuum") == 0
    async with await SqliteSessionStore.open(db, user=OWNER) as store:
        await store.create_session("new", created_at=1)
        ids = [h.id for h in await store.list_headers()]
        before = await seen(store, ids)
    assert len(ids) > 1 and any(before[len(ids) :])
    assert pragma(db, "auto_vacuum") == 0
    assert len(segments(db)) == 1
    async with await SqliteSessionStore.open(db, user=OWNER) as again:
        assert await seen(again, ids) == before

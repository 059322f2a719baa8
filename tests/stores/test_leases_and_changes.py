"""Several writers on one database: the change token, the last surface seq, and the
per-session reply lease (one reply at a time, across processes; a dead holder's lease
expires)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from core.errors import SessionNotFoundError
from core.log import Replace
from stores import MemorySessionStore, SessionStore, SqliteSessionStore
from stores.sqlite import MIGRATIONS
from tests.children import expect_line, spawn


def _text(text: str) -> dict[str, object]:
    return {
        "id": f"m-{text}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


# --------------------------------------------------------------------------- leases


async def test_one_lease_holder_per_session(store: SessionStore) -> None:
    a = await store.create_session("a")
    b = await store.create_session("b")
    assert await store.take_reply_lease(a.id, "one", ttl_ms=60_000)
    assert not await store.take_reply_lease(a.id, "two", ttl_ms=60_000)
    assert await store.take_reply_lease(a.id, "one", ttl_ms=60_000)  # renewal
    assert await store.take_reply_lease(b.id, "two", ttl_ms=60_000)  # other sessions are free
    await store.release_reply_lease(a.id, "two")  # not the holder: nothing happens
    assert not await store.take_reply_lease(a.id, "two", ttl_ms=60_000)
    await store.release_reply_lease(a.id, "one")
    assert await store.take_reply_lease(a.id, "two", ttl_ms=60_000)


async def test_an_expired_lease_is_taken_over(store: SessionStore) -> None:
    session = await store.create_session("s")
    assert await store.take_reply_lease(session.id, "dead", ttl_ms=0)  # expires at once
    assert await store.take_reply_lease(session.id, "alive", ttl_ms=60_000)
    assert not await store.take_reply_lease(session.id, "dead", ttl_ms=60_000)


async def test_lease_of_unknown_or_deleted_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.take_reply_lease("nope", "one", ttl_ms=60_000)
    session = await store.create_session("s")
    assert await store.take_reply_lease(session.id, "one", ttl_ms=60_000)
    await store.delete_session(session.id)
    await store.release_reply_lease(session.id, "one")  # no error: nothing to give back
    again = await store.create_session("s")  # the old lease went with the session
    assert await store.take_reply_lease(again.id, "two", ttl_ms=60_000)


_HOLDER = """
import asyncio, sys, time
from stores import SqliteSessionStore

async def main():
    store = await SqliteSessionStore.open(sys.argv[1])
    assert await store.take_reply_lease("s", "holder", ttl_ms=int(sys.argv[2]))
    print("taken", flush=True)
    time.sleep(600)

asyncio.run(main())
"""


async def test_lease_of_a_sigkilled_holder_expires(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("s")
        holder = spawn(_HOLDER, db, 1500)
        try:
            await asyncio.to_thread(expect_line, holder, "taken")
            with sqlite3.connect(db) as raw:
                owners = raw.execute("SELECT owner FROM reply_leases").fetchall()
            assert owners == [("holder",)]
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.communicate()
        # The dead holder never releases: its lease ends when it expires, not never.
        async with asyncio.timeout(20):
            for _ in iter(int, 1):  # until it is taken (bounded by the timeout)
                if await store.take_reply_lease("s", "next", ttl_ms=60_000):
                    break
                await asyncio.sleep(0.1)
        assert not await store.take_reply_lease("s", "holder", ttl_ms=60_000)


async def test_a_version_1_database_gains_the_lease_table(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    with sqlite3.connect(db) as raw:
        for statement in MIGRATIONS[0]:
            raw.execute(statement)
        raw.execute("INSERT INTO sessions (id, created_at, cwd) VALUES (?, 1, NULL)", (b"old",))
        raw.execute("PRAGMA user_version = 1")
    async with await SqliteSessionStore.open(db) as store:
        assert [h.id for h in await store.list_headers()] == ["old"]
        assert await store.take_reply_lease("old", "one", ttl_ms=60_000)


# --------------------------------------------------------------------------- changes


async def test_memory_change_token_moves_with_every_write() -> None:
    async with MemorySessionStore() as store:
        seen = {await store.change_token()}
        session = await store.create_session("s")
        seen.add(await store.change_token())
        await store.append(session.id, "user/message", _text("hi"), surface_op="append")
        seen.add(await store.change_token())
        await store.delete_session(session.id)
        seen.add(await store.change_token())
        assert len(seen) == 4
        assert await store.change_token() in seen  # and stays put without writes


async def test_sqlite_change_token_sees_other_connections(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    async with (
        await SqliteSessionStore.open(db) as mine,
        await SqliteSessionStore.open(db) as other,
    ):
        before = await mine.change_token()
        assert await mine.change_token() == before
        session = await other.create_session("s")
        created = await mine.change_token()
        assert created != before
        await other.append(session.id, "user/message", _text("hi"), surface_op="append")
        appended = await mine.change_token()
        assert appended != created
        await other.delete_session(session.id)
        assert await mine.change_token() != appended


async def test_last_surface_seq(store: SessionStore) -> None:
    session = await store.create_session("s")
    assert await store.last_surface_seq(session.id) is None
    await store.append(session.id, "session/title", {"title": "t", "source": {"kind": "user"}})
    assert await store.last_surface_seq(session.id) is None
    await store.append(session.id, "user/message", _text("a"), surface_op="append")
    await store.append(session.id, "user/message", _text("b"), surface_op="append")
    await store.append(session.id, "turn/end", {"turn": 1, "status": "completed"})
    assert await store.last_surface_seq(session.id) == 2
    await store.append(
        session.id, "user/message", _text("c"), surface_op=Replace(1, 2), source_event_seqs=[1, 2]
    )
    assert await store.last_surface_seq(session.id) == 4
    with pytest.raises(SessionNotFoundError):
        await store.last_surface_seq("nope")


async def test_a_lease_whose_owner_is_known_dead_is_taken_over(store: SessionStore) -> None:
    session = await store.create_session("s")
    assert await store.take_reply_lease(session.id, "killed", ttl_ms=60_000)
    assert not await store.take_reply_lease(
        session.id, "next", ttl_ms=60_000, dead=lambda owner: False
    )
    assert await store.take_reply_lease(
        session.id, "next", ttl_ms=60_000, dead=lambda owner: owner == "killed"
    )
    assert not await store.take_reply_lease(session.id, "killed", ttl_ms=60_000)

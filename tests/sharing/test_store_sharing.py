"""Issue 17 through the store API, on every store: two users on one database. What a user
may not read does not exist for them; what they may read but do not own is read-only."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.errors import SessionNotFoundError, SessionReadOnlyError, ShareError
from core.log import NewEvent, user_message
from core.sharing import Share
from core.store import SessionStore
from stores import MemorySessionStore, SqliteSessionStore, open_store
from stores.sharing import os_user
from stores.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from tests.pgcluster import ALICE, BOB, Cluster
from tests.stores.test_sqlite_migration import copy_fixture

MSG = "user/message"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """Alice's store and Bob's, on one database."""
    if request.param == "memory":
        memory = MemorySessionStore(user=ALICE)
        yield memory, memory.as_user(BOB)
        return
    if request.param == "sqlite":
        path = tmp_path / "team.sqlite3"
        alice: SessionStore = await SqliteSessionStore.open(path, user=ALICE)
        bob: SessionStore = await SqliteSessionStore.open(path, user=BOB)
    else:
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        schema = cluster.team_schema()
        alice = await open_store(cluster.team_url(ALICE, schema))
        bob = await open_store(cluster.team_url(BOB, schema))
    try:
        yield alice, bob
    finally:
        await alice.close()
        await bob.close()


async def seed(alice: SessionStore) -> None:
    for sid in ("private", "shared"):
        await alice.create_session(sid, cwd="/w", created_at=10)
        await alice.append(sid, "session/title", {"title": f"{sid} title"})
        await alice.append(sid, MSG, user_message(f"{sid} text"), surface_op="append")
    assert await alice.share("shared", BOB) is True


def not_found_text(sid: str) -> str:
    """What reading a deleted (or never created) session says."""
    return str(SessionNotFoundError(sid))


async def reads(store: SessionStore, sid: str) -> list[Any]:
    """Every read of one session, as a list of callables' results (or raises)."""
    return [
        await store.read_header(sid),
        await store.read_events(sid),
        await store.read_surface_events(sid),
        await store.read_surface_rows(sid),
        await store.read_surface_nodes(sid),
        await store.read_surface_tail(sid, 5),
        await store.read_surface_outline(sid),
        await store.read_events_at(sid, [0]),
        await store.read_message_tail(sid, 1_000),
        await store.read_unknown_events(sid),
        await store.last_surface_seq(sid),
        await store.list_shares(sid),
    ]


READS = [
    "read_header",
    "read_events",
    "read_surface_events",
    "read_surface_rows",
    "read_surface_nodes",  # the window's fold, kept by the store
    "read_surface_tail",
    "read_surface_outline",
    "read_events_at",
    "read_message_tail",  # issue 15's
    "read_unknown_events",  # issue 19's
    "last_surface_seq",
    "list_shares",
]


def call(store: SessionStore, name: str, sid: str) -> Any:
    args: dict[str, tuple[Any, ...]] = {
        "read_surface_tail": (5,),
        "read_events_at": ([0],),
        "read_message_tail": (1_000,),
    }
    return getattr(store, name)(sid, *args.get(name, ()))


async def test_owner_is_the_creating_user(pair: tuple[SessionStore, SessionStore]) -> None:
    alice, bob = pair
    assert (alice.current_user(), bob.current_user()) == (ALICE, BOB)
    header = await alice.create_session("mine", created_at=1)
    assert header.owner == ALICE
    assert (await alice.read_header("mine")).owner == ALICE
    assert [(h.id, h.owner) for h in await alice.list_headers()] == [("mine", ALICE)]


async def test_a_private_session_does_not_exist_for_another_user(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    alice, bob = pair
    await seed(alice)
    await bob.create_session("bobs", created_at=5)
    assert [h.id for h in await bob.list_headers()] == ["shared", "bobs"]
    assert set(await bob.read_titles()) == {"shared"}
    assert set(await bob.read_titles(["private", "shared", "bobs"])) == {"shared"}
    assert set(await bob.read_last_event_times()) == {"shared"}
    for name in READS:
        with pytest.raises(SessionNotFoundError) as private:
            await call(bob, name, "private")
        with pytest.raises(SessionNotFoundError) as missing:
            await call(bob, name, "never-was")
        assert str(private.value) == not_found_text("private"), name
        assert type(private.value) is type(missing.value)
    # ... and alice sees none of bob's.
    assert [h.id for h in await alice.list_headers()] == ["private", "shared"]
    with pytest.raises(SessionNotFoundError):
        await alice.read_events("bobs")


async def test_search_finds_only_what_the_user_may_read(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    """Issue 18 under issue 17: a private session's messages are not found by another
    user (not even one hit, nor a count), a shared one's are, until it is unshared."""
    alice, bob = pair
    await seed(alice)
    await bob.create_session("bobs", created_at=5)
    await bob.append("bobs", MSG, user_message("bobs text"), surface_op="append")
    for query in ("text", "te", "private text", "PRIVATE"):
        found = {h.session_id for h in await bob.search_messages(query, limit=50)}
        assert "private" not in found, query
    assert {h.session_id for h in await bob.search_messages("text")} == {"shared", "bobs"}
    assert {h.session_id for h in await alice.search_messages("text")} == {"private", "shared"}
    assert await bob.search_messages("private") == []
    assert await alice.unshare("shared", BOB) is True
    assert {h.session_id for h in await bob.search_messages("text")} == {"bobs"}


async def test_another_users_session_cannot_be_written_and_nothing_is_stored(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    alice, bob = pair
    await seed(alice)
    before = {sid: await reads(alice, sid) for sid in ("private", "shared")}
    batch = [NewEvent(MSG, user_message("x"), surface_op="append")]
    writes = {
        "append": lambda sid: bob.append(sid, MSG, user_message("x"), surface_op="append"),
        "append_batch": lambda sid: bob.append_batch(sid, batch),
        "rename": lambda sid: bob.append(sid, "session/title", {"title": "taken over"}),
        "delete": lambda sid: bob.delete_session(sid),
        "lease": lambda sid: bob.take_reply_lease(sid, "bob-proc", ttl_ms=60_000),
        "share": lambda sid: bob.share(sid, "carol"),
        "unshare": lambda sid: bob.unshare(sid, ALICE + "x"),
    }
    for name, write in writes.items():
        with pytest.raises(SessionNotFoundError) as info:
            await write("private")
        assert str(info.value) == not_found_text("private"), name
        with pytest.raises(SessionReadOnlyError) as denied:
            await write("shared")
        assert denied.value.owner == ALICE, name
        assert str(denied.value) == f"the session is read-only: it is owned by {ALICE}"
    assert {sid: await reads(alice, sid) for sid in ("private", "shared")} == before
    # The lease is still free for the owner.
    assert await alice.take_reply_lease("shared", "alice-proc", ttl_ms=60_000)


async def test_share_then_unshare(pair: tuple[SessionStore, SessionStore]) -> None:
    alice, bob = pair
    await seed(alice)
    assert await alice.share("shared", BOB) is False  # already
    assert await alice.list_shares() == [Share("shared", ALICE, BOB)]
    assert await alice.list_shares("private") == []
    assert await bob.list_shares() == [Share("shared", ALICE, BOB)]
    header = await bob.read_header("shared")
    assert header.owner == ALICE
    assert [e.data for e in await bob.read_events("shared")] == [
        e.data for e in await alice.read_events("shared")
    ]
    assert await alice.unshare("shared", BOB) is True
    assert await alice.unshare("shared", BOB) is False
    assert await bob.list_headers() == []
    assert await bob.list_shares() == []
    with pytest.raises(SessionNotFoundError):
        await bob.read_events("shared")
    # Deleting a session takes its grants with it.
    await alice.share("private", BOB)
    await alice.delete_session("private")
    assert await alice.list_shares() == [] and await bob.list_headers() == []


async def test_bad_grants_are_refused(pair: tuple[SessionStore, SessionStore]) -> None:
    alice, _bob = pair
    await seed(alice)
    for user in ("", "  ", ALICE, "a\x1bb", "x" * 64):
        with pytest.raises(ShareError):
            await alice.share("private", user)
    assert await alice.list_shares("private") == []


async def test_postgres_refuses_a_grant_to_an_unknown_role(pg_cluster: Cluster) -> None:
    schema = pg_cluster.team_schema()
    async with await open_store(pg_cluster.team_url(ALICE, schema)) as alice:
        await alice.create_session("s")
        with pytest.raises(ShareError, match="no user 'nobody_here'"):
            await alice.share("s", "nobody_here")


async def test_a_sqlite_database_upgraded_gives_its_sessions_to_the_os_user(
    tmp_path: Path,
) -> None:
    path = copy_fixture(tmp_path)
    async with await SqliteSessionStore.open(path) as store:
        headers = await store.list_headers()
        assert headers and {h.owner for h in headers} == {os_user()}
        assert store.current_user() == os_user()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
        assert conn.execute("SELECT count(*) FROM sessions WHERE owner IS NULL").fetchone() == (0,)
    # Another OS user (here: the store opened as one) sees none of them.
    async with await SqliteSessionStore.open(path, user="someone-else") as other:
        assert await other.list_headers() == []

"""SessionQuery (SPEC §3) over both stores."""

from __future__ import annotations

import dataclasses

import pytest

from core.errors import SessionNotFoundError
from core.log import NewEvent, Replace
from core.query import SessionQueryLike, SessionTitle, SurfaceSnapshot
from stores import SessionQuery, SessionStore

MSG = "user/message"
ASSISTANT = "assistant/message"


async def test_query_is_a_session_query_like(store: SessionStore) -> None:
    query: SessionQueryLike = SessionQuery(store)
    assert await query.list_sessions() == []


async def test_list_sessions_matches_list_headers(store: SessionStore) -> None:
    for sid, created in [("b", 1), ("a", 1), ("c", 3), ("\ud800", 1)]:
        await store.create_session(sid, created_at=created)
    query = SessionQuery(store)
    assert await query.list_sessions() == await store.list_headers()
    assert [h.id for h in await query.list_sessions()] == ["c", "a", "b", "\ud800"]


async def test_read_surface_folds_in_node_order(store: SessionStore) -> None:
    header = await store.create_session("s", cwd="/p", created_at=9)
    for i in range(3):
        await store.append("s", MSG, {"i": i}, surface_op="append")
    await store.append("s", ASSISTANT, {"r": 1}, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    snapshot = await SessionQuery(store).read_surface("s")
    assert isinstance(snapshot, SurfaceSnapshot)
    assert snapshot.session == header
    assert snapshot.captured_through_seq == 3
    assert isinstance(snapshot.events, tuple)
    assert [e.seq for e in snapshot.events] == [3, 2]
    assert snapshot.events[0].data == {"r": 1}
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.events = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        snapshot.events[1].data["i"] = 5  # type: ignore[index]


async def test_read_surface_counts_log_only_events(store: SessionStore) -> None:
    await store.create_session("s")
    query = SessionQuery(store)
    empty = await query.read_surface("s")
    assert (empty.captured_through_seq, empty.events) == (None, ())
    await store.append("s", "turn/start", {})
    only_log = await query.read_surface("s")
    assert (only_log.captured_through_seq, only_log.events) == (0, ())
    await store.append_batch(
        "s",
        [
            NewEvent(MSG, {}, "append"),
            NewEvent("assistant/chunk", {}),
            NewEvent("session/title", {"title": "t"}),
            NewEvent("turn/end", {}),
        ],
    )
    snapshot = await query.read_surface("s")
    assert snapshot.captured_through_seq == 4
    assert [e.seq for e in snapshot.events] == [1]


async def test_read_surface_unknown_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFoundError):
        await SessionQuery(store).read_surface("nope")


async def test_last_event_times_follow_every_append(store: SessionStore) -> None:
    query = SessionQuery(store)
    await store.create_session("s", created_at=1)
    await store.create_session("t", created_at=2)
    assert await query.read_last_event_times() == {}
    await store.append("s", "turn/start", {}, time=10)
    assert await query.read_last_event_times() == {"s": 10}
    await store.append("t", "turn/start", {}, time=5)
    await store.append("s", "turn/end", {}, time=30)
    assert await query.read_last_event_times() == {"s": 30, "t": 5}


async def test_read_title(store: SessionStore) -> None:
    await store.create_session("s")
    query = SessionQuery(store)
    assert await query.read_title("s") is None
    await store.append(
        "s", "session/title", {"title": "one", "source": {"kind": "fallback"}}, time=5
    )
    await store.append(
        "s", "session/title", {"title": "two", "source": {"kind": "provider"}}, time=8
    )
    title = await query.read_title("s")
    assert title == SessionTitle("two", 1, 8, {"kind": "provider"})
    with pytest.raises(SessionNotFoundError):
        await query.read_title("nope")
    assert await query.read_titles() == {"s": title}
    assert await query.read_titles(["s", "nope"]) == {"s": title}
    await store.delete_session("s")
    with pytest.raises(SessionNotFoundError):
        await query.read_title("s")

"""``core.paging``: a session read in bounded pages gives exactly what one whole read gives
(every store), and a session appended to meanwhile reads as the prefix fixed at the start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.log import (
    ASSISTANT_CHUNK,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    user_message,
)
from core.paging import event_pages, open_surface_stream, read_last_seq
from core.store import SessionStore
from stores import SessionQuery
from tests.storekinds import STORE_KINDS, open_kind
from tui.shared.items import with_unknown_events


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with open_kind(request, tmp_path) as opened:
        yield opened


def _msg(n: int) -> NewEvent:
    return NewEvent(USER_MESSAGE, user_message(f"message {n}"), "append", time=1000 + n)


def _odd(n: int) -> NewEvent:
    return NewEvent("step/start", {"n": n}, time=1000 + n)


def _chunk(n: int) -> NewEvent:
    chunk = {"type": "text-delta", "index": 0, "text": f"c{n}"}
    return NewEvent(ASSISTANT_CHUNK, {"turn": 1, "step": 0, "chunk": chunk}, time=1000 + n)


async def _collect(pages: AsyncIterator[list[Event]], page: int) -> list[Event]:
    out: list[Event] = []
    async for got in pages:
        assert len(got) <= 2 * page
        out += got
    return out


async def _build(store: SessionStore) -> str:
    """Messages, chunk runs, unknown events before and after a replace, long unknown runs."""
    header = await store.create_session("paged")
    batch: list[NewEvent] = []
    for n in range(40):
        batch += [_msg(n), _odd(n), *(_chunk(n) for _ in range(4))]
    await store.append_batch(header.id, batch)
    # compact messages 0..10 into one (seqs 0 and 60 are messages)
    await store.append(
        header.id,
        USER_MESSAGE,
        user_message("summary", source={"kind": "plugin", "plugin": "compact"}),
        surface_op=Replace(0, 60),
        source_event_seqs=[6 * n for n in range(11)],
    )
    tail = [_odd(n) for n in range(30)] + [_msg(n) for n in range(5)] + [_odd(1)]
    await store.append_batch(header.id, tail)
    return header.id


@pytest.mark.parametrize("page", [1, 3, 7, 128])
async def test_surface_pages_are_the_whole_read(store: SessionStore, page: int) -> None:
    sid = await _build(store)
    snapshot, unknown = await SessionQuery(store).read_surface_with_unknown(sid)
    expected = with_unknown_events(snapshot.events, unknown)
    stream = await open_surface_stream(store, sid, page=page)
    assert stream.last_seq == snapshot.captured_through_seq
    assert await _collect(stream.pages(), page) == expected


@pytest.mark.parametrize("page", [1, 5, 128])
async def test_event_pages_are_the_whole_log(store: SessionStore, page: int) -> None:
    sid = await _build(store)
    header, last = await read_last_seq(store, sid)
    assert header.id == sid
    assert await _collect(event_pages(store, sid, last, page=page), page) == (
        await store.read_events(sid)
    )


async def test_appends_while_paging_read_the_fixed_prefix(store: SessionStore) -> None:
    sid = await _build(store)
    before = await store.read_events(sid)
    _header, last = await read_last_seq(store, sid)
    stream = await open_surface_stream(store, sid, page=4)
    snapshot, unknown = await SessionQuery(store).read_surface_with_unknown(sid)
    got: list[Event] = []
    async for page in event_pages(store, sid, last, page=4):
        got += page
        await store.append_batch(sid, [_msg(99), _odd(99)])
    assert got == before
    shown: list[Event] = []
    async for page in stream.pages():
        shown += page
        await store.append_batch(sid, [_msg(98), _odd(98)])
    assert shown == with_unknown_events(snapshot.events, unknown)


async def test_an_empty_session_reads_nothing(store: SessionStore) -> None:
    header = await store.create_session("empty")
    _header, last = await read_last_seq(store, header.id)
    assert last is None
    assert await _collect(event_pages(store, header.id, last), 128) == []
    stream = await open_surface_stream(store, header.id)
    assert await _collect(stream.pages(), 128) == []

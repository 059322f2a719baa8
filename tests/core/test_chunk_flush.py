"""How often a streamed reply's chunks are written (issue 34): every ``CHUNK_FLUSH_SECONDS``
unless the store asks for longer (``chunk_flush_seconds``: the PostgreSQL store does, its
writes wake every member's follower); whatever the interval, the same chunks are stored,
once each, in order, and the reply's message holds the whole text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from core.engine import CHUNK_FLUSH_SECONDS, ChatSession, ReplyDelta, chunk_flush_seconds
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    TURN_END,
    Event,
    NewEvent,
    message_text,
)
from core.providers.base import Finish, ProviderMessage, StreamEvent, TextDelta
from core.references import SessionReferenceService
from stores import MemorySessionStore, SessionQuery

pytestmark = pytest.mark.timeout(30)

WORDS = [f"w{i} " for i in range(8)]
GAP = 2 * CHUNK_FLUSH_SECONDS  # between deltas: the engine's default writes each alone


class PacedProvider:
    """Streams ``WORDS`` one at a time, ``GAP`` seconds apart."""

    name = "paced"
    model = "paced-1"

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        for word in WORDS:
            await asyncio.sleep(GAP)
            yield TextDelta(word)
        yield Finish("stop")

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        return "summary"

    async def aclose(self) -> None:
        return None


class CountingStore(MemorySessionStore):
    """A memory store that records each batch written and may ask for a flush interval."""

    def __init__(self, flush: float | None = None) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        if flush is not None:
            self.chunk_flush_seconds = lambda: flush  # type: ignore[method-assign]

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        self.batches.append([e.type for e in events])
        return await super().append_batch(session_id, events)


async def _reply(store: CountingStore) -> list[Event]:
    header = await store.create_session("s")
    query = SessionQuery(store)
    chat = ChatSession(store, query, SessionReferenceService(query), PacedProvider(), header)
    shown = [u.text async for u in chat.send("go") if isinstance(u, ReplyDelta)]
    assert shown == WORDS  # every delta is shown as it arrives, whatever is written when
    return await store.read_events("s")


def _chunk_batches(store: CountingStore) -> list[list[str]]:
    return [b for b in store.batches if ASSISTANT_CHUNK in b]


def test_the_interval_is_the_engines_unless_the_store_asks_for_longer() -> None:
    assert chunk_flush_seconds(MemorySessionStore()) == CHUNK_FLUSH_SECONDS
    assert chunk_flush_seconds(CountingStore(flush=3.0)) == 3.0
    assert chunk_flush_seconds(CountingStore(flush=0.0)) == CHUNK_FLUSH_SECONDS  # never less


async def test_a_store_asking_for_longer_gets_fewer_writes_of_the_same_chunks() -> None:
    default, patient = CountingStore(), CountingStore(flush=3600.0)
    by_default, gathered = await _reply(default), await _reply(patient)
    # By default each delta (GAP apart) is written alone; the patient store gets them all
    # in one write, with the reply's message and its turn end.
    assert len(_chunk_batches(default)) >= len(WORDS) - 1
    assert _chunk_batches(patient) == [
        [ASSISTANT_CHUNK] * len(WORDS) + [ASSISTANT_MESSAGE, TURN_END]
    ]

    def stored(events: list[Event]) -> list[tuple[int, str, object]]:
        return [(e.seq, e.type, e.data.get("chunk")) for e in events if e.type != "user/message"]

    # The same events, seqs included (a chunk's index and text, the message's text).
    assert stored(by_default) == stored(gathered)
    chunks = [e.data["chunk"] for e in gathered if e.type == ASSISTANT_CHUNK]
    assert [c["index"] for c in chunks] == list(range(len(WORDS)))
    assert "".join(c["text"] for c in chunks) == "".join(WORDS)
    [message] = [e for e in gathered if e.type == ASSISTANT_MESSAGE]
    assert message_text(message.data["message"]) == "".join(WORDS)


async def test_a_stalled_stream_is_still_written_after_the_stores_interval() -> None:
    # The timer still writes pending chunks when no further delta comes: after the store's
    # interval, not the engine's.
    store = CountingStore(flush=10 * GAP)
    header = await store.create_session("s")
    query = SessionQuery(store)
    stall = asyncio.Event()

    class Stalling(PacedProvider):
        async def stream(
            self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
        ) -> AsyncIterator[StreamEvent]:
            yield TextDelta("first ")
            await stall.wait()
            yield Finish("stop")

    chat = ChatSession(store, query, SessionReferenceService(query), Stalling(), header)
    updates = chat.send("go")
    async for update in updates:
        if isinstance(update, ReplyDelta):
            break
    await asyncio.sleep(2 * GAP)  # past the engine's interval, not the store's
    assert _chunk_batches(store) == []
    for _ in range(100):  # then within the store's interval (and a margin)
        if _chunk_batches(store):
            break
        await asyncio.sleep(GAP)
    assert _chunk_batches(store) == [[ASSISTANT_CHUNK]]
    stall.set()
    async for _ in updates:
        pass

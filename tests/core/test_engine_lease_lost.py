"""A writer whose reply lease another writer took (``dsh unlock`` broke it, or it ran out in
a stall) stops at its next renewal: no more chunks, no final message, no compaction, and
``LeaseLostError``; the other writer's writes are the only ones after. A renewal that fails
with a store error is tried again and stops nothing.

Each lease rule runs on every store kind (memory, SQLite, PostgreSQL): a broken lease reads
as none on all of them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.engine import ChatSession, ReplyDelta, ReplyFinished, Submitted
from core.errors import LeaseLostError, StoreError
from core.leases import ReplyLease
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACT_END,
    COMPACT_START,
    TURN_END,
    USER_MESSAGE,
    Event,
    message_text,
    user_message,
)
from core.providers.base import Finish, ProviderMessage, StreamEvent, TextDelta
from core.references import SessionReferenceService
from core.store import SessionStore
from stores import MemorySessionStore, SessionQuery
from tests.core.test_engine import ScriptedProvider
from tests.storekinds import STORE_KINDS, open_kind

pytestmark = pytest.mark.timeout(60)

RENEW = 0.05
"""The renewal period of these tests (the engine's is 5 s)."""
OTHER = "box:0123456789abcdef:77:other-writer"


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with open_kind(request, tmp_path) as opened:
        yield opened


class Dripping:
    """Streams ``count`` words, one every ``every`` seconds; stops when ``cancel`` is set
    (as real providers do) and records how its stream ended."""

    name = "dripping"
    model = "drip-1"

    def __init__(self, count: int = 400, every: float = 0.01) -> None:
        self.count = count
        self.every = every
        self.cancel: asyncio.Event | None = None
        self.closed = False
        self.words = 0

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.cancel = cancel
        try:
            for i in range(self.count):
                if cancel is not None:
                    try:
                        await asyncio.wait_for(cancel.wait(), self.every)
                        return
                    except TimeoutError:
                        pass
                else:
                    await asyncio.sleep(self.every)
                self.words += 1
                yield TextDelta(f"w{i} ")
            yield Finish("stop")
        finally:
            self.closed = True

    async def aclose(self) -> None:
        return None


def _chat(store: SessionStore, header: Any, provider: Any, renew: float = RENEW) -> ChatSession:
    query = SessionQuery(store)
    chat = ChatSession(store, query, SessionReferenceService(query), provider, header)
    chat.lease_renew_seconds = renew
    return chat


async def take_over(store: SessionStore, session_id: str, holder: str = OTHER) -> None:
    """What another process does after ``dsh unlock``: break the lease and take its own.
    A renewal never takes a broken lease back (``renew_reply_lease`` is one step), so
    once is enough, however often the writer renews."""
    assert await store.break_reply_lease(session_id)
    assert await store.take_reply_lease(session_id, holder, ttl_ms=60_000)


async def unlock(store: SessionStore, session_id: str, period: float = RENEW) -> None:
    """``dsh unlock`` with nobody taking the lease after it: it stays broken."""
    assert await store.break_reply_lease(session_id)
    await asyncio.sleep(period * 3)
    assert await store.read_reply_lease(session_id) is None


def of_type(events: Sequence[Event], *types: str) -> list[Event]:
    return [e for e in events if e.type in types]


async def until_chunks_stored(store: SessionStore, updates: AsyncIterator[Any]) -> None:
    """Read the reply's deltas until some of its chunks are stored (a store may gather
    them for a while first: ``chunk_flush_seconds``)."""
    while not of_type(await store.read_events("s"), ASSISTANT_CHUNK):
        assert isinstance(await anext(updates), ReplyDelta)


async def test_a_reply_stops_when_another_writer_takes_its_lease(store: SessionStore) -> None:
    header = await store.create_session("s")
    provider = Dripping()
    chat = _chat(store, header, provider)
    updates = chat.send("first question")
    submitted = await anext(updates)
    assert isinstance(submitted, Submitted)
    for _ in range(15):  # some renewals and chunk writes pass
        assert isinstance(await anext(updates), ReplyDelta)
    await until_chunks_stored(store, updates)

    await take_over(store, "s")
    taken = time.monotonic()
    after = 0
    with pytest.raises(LeaseLostError) as caught:
        async for update in updates:
            assert isinstance(update, ReplyDelta)  # never a ReplyFinished
            after += 1
    stopped = time.monotonic() - taken
    assert stopped < RENEW + 1.0, stopped  # at the next renewal, not at the end of the reply
    assert after < 100 and provider.words < 150  # of 400
    assert (caught.value.session_id, caught.value.what) == ("s", "reply")
    assert caught.value.holder == OTHER
    # The provider was told to stop and its stream closed: nothing keeps running.
    assert provider.cancel is not None and provider.cancel.is_set() and provider.closed

    events = await store.read_events("s")
    assert of_type(events, ASSISTANT_MESSAGE, TURN_END) == []  # no final message
    (question,) = of_type(events, USER_MESSAGE)  # stored before the reply began: kept
    assert question.data["content"][0]["text"] == "first question"
    assert {e.data["turn"] for e in of_type(events, ASSISTANT_CHUNK)} == {1}

    # The lease stays the other writer's (the stopped one gave back only its own), and its
    # writes are the only ones from now on.
    lease = await store.read_reply_lease("s")
    assert lease is not None and lease.holder == OTHER
    theirs = await store.append(
        "s", USER_MESSAGE, user_message("the other writer's"), surface_op="append"
    )
    await asyncio.sleep(RENEW * 6)
    assert await store.read_events("s") == [*events, theirs]


async def test_a_lease_broken_by_unlock_alone_stops_the_reply_and_is_not_taken_back(
    store: SessionStore,
) -> None:
    header = await store.create_session("s")
    chat = _chat(store, header, Dripping())
    updates = chat.send("first question")
    await anext(updates)
    for _ in range(15):
        await anext(updates)
    await until_chunks_stored(store, updates)
    await unlock(store, "s")  # `dsh unlock`; nobody takes the lease after it
    with pytest.raises(LeaseLostError) as caught:
        async for _ in updates:
            pass
    assert caught.value.holder is None
    assert await store.read_reply_lease("s") is None  # the renewal did not take it back
    assert of_type(await store.read_events("s"), ASSISTANT_MESSAGE, TURN_END) == []

    other = _chat(store, header, ScriptedProvider([TextDelta("fine"), Finish("stop")]))
    async for _ in other.send("second question"):  # the session is free for the next writer
        pass
    events = await store.read_events("s")
    (reply,) = of_type(events, ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "fine"
    assert reply.data["turn"] == 2  # the stopped reply's turn (its chunks) stays used
    assert_each_message_follows_its_chunks(events)


async def test_a_stream_that_waits_for_the_model_is_stopped_too() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    hanging = ScriptedProvider([TextDelta("one"), TextDelta(" two"), Finish("stop")], hang_after=1)
    chat = _chat(store, header, hanging)
    updates = chat.send("question")
    await anext(updates)
    assert (await anext(updates)).text == "one"  # then the model says nothing more
    await take_over(store, "s")
    with pytest.raises(LeaseLostError):
        await asyncio.wait_for(anext(updates), RENEW + 2)
    assert of_type(await store.read_events("s"), ASSISTANT_MESSAGE, TURN_END) == []


async def test_a_lease_taken_since_the_last_renewal_still_gets_no_final_message(
    store: SessionStore,
) -> None:
    header = await store.create_session("s")
    script = [TextDelta("a"), TextDelta("b"), TextDelta("c"), Finish("stop")]
    chat = _chat(store, header, ScriptedProvider(script), renew=3600)  # no renewal comes
    updates = chat.send("question")
    await anext(updates)
    await anext(updates)
    await take_over(store, "s")
    with pytest.raises(LeaseLostError):
        async for _ in updates:
            pass
    events = await store.read_events("s")
    assert of_type(events, ASSISTANT_MESSAGE, TURN_END) == []
    lease = await store.read_reply_lease("s")
    assert lease is not None and lease.holder == OTHER


class SlowChunkWrites(MemorySessionStore):
    """A store whose chunk writes wait for ``gate`` (a slow disk) once ``slow`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = False
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_batch(self, session_id: str, events: Sequence[Any]) -> list[Event]:
        if self.slow and all(e.type == ASSISTANT_CHUNK for e in events):
            self.writing.set()
            await self.gate.wait()
        return await super().append_batch(session_id, events)


class PausingProvider(ScriptedProvider):
    """Says one word, pauses ``pause`` seconds, then finishes."""

    def __init__(self, pause: float) -> None:
        super().__init__([])
        self.pause = pause

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        yield TextDelta("word")
        await asyncio.sleep(self.pause)
        yield Finish("stop")


async def test_a_lease_lost_while_the_final_write_waits_for_a_chunk_write() -> None:
    store = SlowChunkWrites()
    header = await store.create_session("s")
    chat = _chat(store, header, PausingProvider(0.2))
    updates = chat.send("question")
    await anext(updates)
    store.slow = True
    assert isinstance(await anext(updates), ReplyDelta)
    finishing = asyncio.ensure_future(anext(updates))  # the final write queues behind it
    await asyncio.wait_for(store.writing.wait(), 5)  # the timed chunk write hangs
    await asyncio.sleep(0.3)  # the model has finished: the final write waits
    await take_over(store, "s")
    await asyncio.sleep(RENEW * 4)  # a renewal finds it taken
    store.gate.set()
    with pytest.raises(LeaseLostError) as caught:
        await asyncio.wait_for(finishing, 5)
    assert caught.value.holder == OTHER  # said as any lost reply is
    assert of_type(await store.read_events("s"), ASSISTANT_MESSAGE, TURN_END) == []


class FlakyLeases(MemorySessionStore):
    """A store whose lease calls fail for a while after the first take (a server that is
    unreachable for a moment): renewals fail with a store error."""

    def __init__(self) -> None:
        super().__init__()
        self.takes = 0
        self.failures = 0
        self.failing = False

    def _fail(self) -> None:
        if self.failing:
            self.failures += 1
            raise StoreError("could not reach the database server")

    async def take_reply_lease(self, session_id: str, owner: str, **kwargs: Any) -> bool:
        self.takes += 1
        self._fail()
        return await super().take_reply_lease(session_id, owner, **kwargs)

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        self._fail()
        return await super().read_reply_lease(session_id)

    async def renew_reply_lease(self, session_id: str, owner: str, **kwargs: Any) -> bool:
        self._fail()
        return await super().renew_reply_lease(session_id, owner, **kwargs)


async def test_a_renewal_that_fails_with_a_store_error_does_not_stop_the_reply() -> None:
    store = FlakyLeases()
    header = await store.create_session("s")
    chat = _chat(store, header, Dripping(count=40, every=0.01), renew=0.02)
    updates = chat.send("question")
    await anext(updates)
    store.failing = True  # every renewal (and the last check) fails from now on
    deltas = 0
    finished = None
    async for update in updates:
        if isinstance(update, ReplyDelta):
            deltas += 1
            if deltas == 30:
                store.failing = False  # back: the next renewals work again
        elif isinstance(update, ReplyFinished):
            finished = update
    assert store.failures >= 3  # renewals failed, and were tried again
    assert finished is not None and finished.status == "completed"
    assert finished.message_event is not None
    assert message_words(finished.message_event) == 40


def message_words(event: Event) -> int:
    return len(event.data["message"]["content"][0]["text"].split())


async def test_a_lease_that_ran_out_with_nobody_taking_it_stays_the_writers(
    store: SessionStore,
) -> None:
    header = await store.create_session("s")
    chat = _chat(store, header, Dripping(count=30, every=0.01), renew=0.1)
    chat.lease_ttl_ms = 1  # runs out long before each renewal (a stalled writer)
    finished = [u async for u in chat.send("question") if isinstance(u, ReplyFinished)]
    assert finished[0].status == "completed"
    (reply,) = of_type(await store.read_events("s"), ASSISTANT_MESSAGE)
    assert message_words(reply) == 30


async def test_a_message_is_not_stored_under_a_lease_that_was_taken(store: SessionStore) -> None:
    header = await store.create_session("s")
    chat = _chat(store, header, ScriptedProvider([TextDelta("hi"), Finish("stop")]))
    async with chat.reply_lease():  # as a host holds it while preparing the draft
        await take_over(store, "s")
        await asyncio.sleep(RENEW * 6)  # a renewal finds it taken
        with pytest.raises(LeaseLostError) as caught:
            await chat.submit("sent too late")
        assert caught.value.what == "message"
        with pytest.raises(LeaseLostError):
            async for _ in chat.reply():
                pass
    assert await store.read_events("s") == []
    lease = await store.read_reply_lease("s")
    assert lease is not None and lease.holder == OTHER


# --------------------------------------------------------------------------- compaction


class EndlessSummary(ScriptedProvider):
    """Summarises only once ``release`` is set; records that it was cancelled instead."""

    def __init__(self, outcome: str | Exception = "a summary") -> None:
        super().__init__([TextDelta("answer"), Finish("stop")])
        self.outcome = outcome
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        self.asked.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def _answered(store: SessionStore, provider: EndlessSummary, renew: float) -> ChatSession:
    header = await store.create_session("s")
    chat = _chat(store, header, provider, renew=renew)
    async for _ in chat.send("a question"):
        pass
    return chat


async def test_a_compaction_stops_when_another_writer_takes_its_lease(
    store: SessionStore,
) -> None:
    provider = EndlessSummary()
    chat = await _answered(store, provider, RENEW)
    before = await store.read_events("s")
    compacting = asyncio.create_task(chat.compact())
    await asyncio.wait_for(provider.asked.wait(), 5)
    await take_over(store, "s")
    with pytest.raises(LeaseLostError) as caught:
        await asyncio.wait_for(compacting, RENEW + 2)  # the summary is not waited for
    assert (caught.value.what, caught.value.holder) == ("compaction", OTHER)
    assert provider.cancelled
    assert await store.read_events("s") == before  # no half compaction, no start, no end


@pytest.mark.parametrize("outcome", ["a summary", RuntimeError("the model fell over")])
async def test_a_summary_that_arrives_after_the_lease_was_taken_is_not_stored(
    outcome: str | Exception,
) -> None:
    store = MemorySessionStore()
    provider = EndlessSummary(outcome)
    chat = await _answered(store, provider, 3600)  # no renewal: the last check finds it
    before = await store.read_events("s")
    compacting = asyncio.create_task(chat.compact())
    await asyncio.wait_for(provider.asked.wait(), 5)
    await take_over(store, "s")
    provider.release.set()
    with pytest.raises(LeaseLostError):
        await compacting
    events = await store.read_events("s")
    assert events == before and of_type(events, COMPACT_START, COMPACT_END) == []


# --------------------------------------------------------------------------- helpers


def assert_each_message_follows_its_chunks(events: Sequence[Event]) -> None:
    """Every ``assistant/message`` comes after all the chunks of its turn, which hold
    exactly its text: no reply's final message is interleaved with another's."""
    for message in of_type(events, ASSISTANT_MESSAGE):
        turn = message.data["turn"]
        chunks = [e for e in of_type(events, ASSISTANT_CHUNK) if e.data["turn"] == turn]
        assert all(c.seq < message.seq for c in chunks), turn
        assert [c.data["chunk"]["index"] for c in chunks] == list(range(len(chunks)))
        assert "".join(c.data["chunk"]["text"] for c in chunks) == message_text(
            message.data["message"]
        ), turn

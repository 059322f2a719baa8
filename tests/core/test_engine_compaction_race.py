"""Compactions racing on one session (two connections on one SQLite file, as two processes
would have): the reply lease refuses the second at once; a surface rewritten meanwhile by a
writer without the lease fails the compaction cleanly; nothing is left half-written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from core.engine import COMPACTION_RACE_MESSAGE, ChatSession, CompactionError
from core.errors import SessionBusyError
from core.log import (
    COMPACT_END,
    COMPACT_START,
    COMPACT_SUMMARY,
    USER_MESSAGE,
    NewEvent,
    Replace,
    is_compact_checkpoint_source,
    user_message,
)
from core.providers.base import ProviderMessage, StreamEvent
from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore


class WaitingSummarizer:
    """Summarises only when told to: the test decides which compaction finishes first."""

    name = "waiting"
    model = "wait-1"

    def __init__(self, summary: str) -> None:
        self.summary = summary
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        raise AssertionError("only summaries are asked for")
        yield  # pragma: no cover

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        self.started.set()
        await self.go.wait()
        return self.summary

    async def aclose(self) -> None:
        return None


async def chat_on(store: SqliteSessionStore, provider: WaitingSummarizer) -> ChatSession:
    query = SessionQuery(store)
    header = await store.read_header("s")
    return ChatSession(store, query, SessionReferenceService(query), provider, header)


def compaction_types(types: Sequence[str]) -> list[str]:
    return [t for t in types if t.startswith("compact/")]


async def _seeded(path: Path) -> tuple[SqliteSessionStore, SqliteSessionStore]:
    one = await SqliteSessionStore.open(path)
    two = await SqliteSessionStore.open(path)
    await one.create_session("s", cwd="/w")
    for text in ("first", "second", "third"):
        await one.append("s", USER_MESSAGE, user_message(text), surface_op="append")
    return one, two


async def _assert_one_compaction(store: SqliteSessionStore, summary: str) -> None:
    events = await store.read_events("s")
    assert compaction_types([e.type for e in events]) == [
        COMPACT_START,
        COMPACT_SUMMARY,
        COMPACT_END,
    ]
    surface = (await SessionQuery(store).read_surface("s")).events
    assert len(surface) == 1 and is_compact_checkpoint_source(surface[0].data["source"])
    assert summary in surface[0].data["content"][0]["text"]


async def test_a_second_compaction_is_refused_while_the_first_summarises(tmp_path: Path) -> None:
    """Both hold the session's reply lease: the second one is refused before it reads or
    writes anything, and the first one completes."""
    one, two = await _seeded(tmp_path / "race.sqlite3")
    try:
        slow_provider, fast_provider = WaitingSummarizer("slow"), WaitingSummarizer("fast")
        slow, fast = await chat_on(one, slow_provider), await chat_on(two, fast_provider)
        fast_provider.go.set()
        slow_task = asyncio.create_task(slow.compact())
        await asyncio.wait_for(slow_provider.started.wait(), 10)
        before = await two.read_events("s")
        with pytest.raises(SessionBusyError):
            await fast.compact()
        assert not fast_provider.started.is_set(), "refused before summarising"
        assert await two.read_events("s") == before
        slow_provider.go.set()
        await asyncio.wait_for(slow_task, 10)
        for store in (one, two):
            await _assert_one_compaction(store, "slow")
    finally:
        await one.close()
        await two.close()


async def test_after_a_compaction_the_next_finds_nothing_to_compact(tmp_path: Path) -> None:
    one, two = await _seeded(tmp_path / "race.sqlite3")
    try:
        first, second = WaitingSummarizer("fast"), WaitingSummarizer("slow")
        first.go.set()
        second.go.set()
        await (await chat_on(two, first)).compact()
        with pytest.raises(CompactionError, match="already compacted"):
            await (await chat_on(one, second)).compact()
        await _assert_one_compaction(one, "fast")
    finally:
        await one.close()
        await two.close()


async def test_a_surface_changed_by_a_writer_without_the_lease_fails_cleanly(
    tmp_path: Path,
) -> None:
    """A writer that does not take the lease (an older dsh) replaces the surface while the
    summary is written: the compaction fails in plain words and leaves nothing."""
    one, two = await _seeded(tmp_path / "race.sqlite3")
    try:
        provider = WaitingSummarizer("stale")
        task = asyncio.create_task((await chat_on(one, provider)).compact())
        await asyncio.wait_for(provider.started.wait(), 10)
        seqs = [e.seq for e in (await SessionQuery(two).read_surface("s")).events]
        rewrite = NewEvent(
            USER_MESSAGE, user_message("rewritten meanwhile"), Replace(seqs[0], seqs[-1]), seqs
        )
        await two.append_batch("s", [rewrite])
        before = await two.read_events("s")
        provider.go.set()
        with pytest.raises(CompactionError) as caught:
            await asyncio.wait_for(task, 10)
        assert str(caught.value) == COMPACTION_RACE_MESSAGE
        assert "seq" not in str(caught.value)
        assert await one.read_events("s") == before
    finally:
        await one.close()
        await two.close()


async def test_a_compaction_writes_nothing_until_its_summary_is_in(tmp_path: Path) -> None:
    """Cancelled (or killed) mid-summary, a compaction leaves no ``compact/start`` behind."""
    async with await SqliteSessionStore.open(tmp_path / "c.sqlite3") as store:
        await store.create_session("s")
        await store.append("s", USER_MESSAGE, user_message("hello"), surface_op="append")
        provider = WaitingSummarizer("never")
        chat = await chat_on(store, provider)
        task = asyncio.create_task(chat.compact())
        await asyncio.wait_for(provider.started.wait(), 10)
        assert [e.type for e in await store.read_events("s")] == [USER_MESSAGE]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [e.type for e in await store.read_events("s")] == [USER_MESSAGE]

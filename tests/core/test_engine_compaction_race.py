"""Two compactions of one session at once (two connections on one SQLite file, as two
processes would have): the slower one fails cleanly and leaves nothing in the log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from core.engine import COMPACTION_RACE_MESSAGE, ChatSession, CompactionError
from core.log import (
    COMPACT_END,
    COMPACT_START,
    COMPACT_SUMMARY,
    USER_MESSAGE,
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


@pytest.mark.parametrize("slow_first", [True, False])
async def test_the_slower_of_two_compactions_fails_cleanly(
    tmp_path: Path, slow_first: bool
) -> None:
    path = tmp_path / "race.sqlite3"
    one = await SqliteSessionStore.open(path)
    two = await SqliteSessionStore.open(path)
    try:
        await one.create_session("s", cwd="/w")
        for text in ("first", "second", "third"):
            await one.append("s", USER_MESSAGE, user_message(text), surface_op="append")
        slow_provider, fast_provider = WaitingSummarizer("slow"), WaitingSummarizer("fast")
        slow, fast = await chat_on(one, slow_provider), await chat_on(two, fast_provider)
        fast_provider.go.set()
        if slow_first:  # the slow one read the surface and is summarising ...
            slow_task = asyncio.create_task(slow.compact())
            await asyncio.wait_for(slow_provider.started.wait(), 10)
            await fast.compact()  # ... when the other one finishes
        else:  # the fast one finished before the slow one even started summarising
            await fast.compact()
            slow_task = asyncio.create_task(slow.compact())
        slow_provider.go.set()
        if slow_first:
            with pytest.raises(CompactionError) as caught:
                await asyncio.wait_for(slow_task, 10)
            assert str(caught.value) == COMPACTION_RACE_MESSAGE
            assert "seq" not in str(caught.value)
        else:  # it saw the checkpoint: nothing left to compact
            with pytest.raises(CompactionError, match="already compacted"):
                await asyncio.wait_for(slow_task, 10)
        for store in (one, two):
            events = await store.read_events("s")
            assert compaction_types([e.type for e in events]) == [
                COMPACT_START,
                COMPACT_SUMMARY,
                COMPACT_END,
            ]
            surface = (await SessionQuery(store).read_surface("s")).events
            assert len(surface) == 1 and is_compact_checkpoint_source(surface[0].data["source"])
            assert "fast" in surface[0].data["content"][0]["text"]
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

"""Preparation cancelled at every await point leaves the store untouched.

Two ways to reach "every point": (1) a query wrapper whose every read is bracketed by
numbered points, where the test cancels the awaiting task or sets the cancel event; (2)
counting event-loop steps, cancelling after each possible number of steps until the send
completes. Either the send completes whole (snapshot and message, one batch) or nothing is
written, no task is left behind and the next send works.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.engine import ChatSession
from core.log import NewEvent, SessionHeader, assistant_message, user_message
from core.providers.offline import OfflineProvider
from core.query import SessionTitle, SurfaceSnapshot
from core.references import (
    SESSION_REFERENCE_CANCELLED,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    format_session_reference_mention,
)
from core.store import SessionStore
from stores import MemorySessionStore, SessionQuery, SqliteSessionStore

SOURCES = ("alpha", "beta", "gamma")


class PointQuery:
    """A real ``SessionQuery`` whose every call passes two numbered points (before, after).

    At point number ``trigger`` it runs ``action`` (cancel the task, or set the event) and
    yields, so the cancellation lands exactly there.
    """

    def __init__(self, inner: SessionQuery) -> None:
        self.inner = inner
        self.points: list[str] = []
        self.trigger: int | None = None
        self.action: Callable[[], None] = lambda: None

    async def _point(self, label: str) -> None:
        self.points.append(label)
        if self.trigger == len(self.points) - 1:
            self.action()
        await asyncio.sleep(0)

    async def _call(self, name: str, call: Callable[[], Any]) -> Any:
        await self._point(f"{name}:before")
        result = await call()
        await self._point(f"{name}:after")
        return result

    async def list_sessions(self) -> list[SessionHeader]:
        result: list[SessionHeader] = await self._call("list_sessions", self.inner.list_sessions)
        return result

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        result: SurfaceSnapshot = await self._call(
            f"read_surface({session_id})", lambda: self.inner.read_surface(session_id)
        )
        return result

    async def read_title(self, session_id: str) -> SessionTitle | None:
        result: SessionTitle | None = await self._call(
            "read_title", lambda: self.inner.read_title(session_id)
        )
        return result

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        result: dict[str, SessionTitle] = await self._call(
            "read_titles", lambda: self.inner.read_titles(session_ids)
        )
        return result


def canceller(task: asyncio.Future[Any]) -> Callable[[], None]:
    def cancel() -> None:
        task.cancel()

    return cancel


async def seed(store: SessionStore, messages: int = 300) -> None:
    await store.create_session("target", cwd="/p", created_at=10)
    for n, sid in enumerate(SOURCES):
        await store.create_session(sid, cwd="/p", created_at=n)
        batch: list[NewEvent] = []
        for i in range(messages // 2):
            batch.append(NewEvent("user/message", user_message(f"{sid} q{i} <b>"), "append"))
            batch.append(
                NewEvent(
                    "assistant/message",
                    {
                        "turn": i,
                        "step": 0,
                        "message": assistant_message(f"a{i}", provider="p", model="m"),
                    },
                    "append",
                )
            )
        batch.append(
            NewEvent("session/title", {"title": f"{sid} title", "source": {"kind": "user"}})
        )
        await store.append_batch(sid, batch)


async def everything(store: SessionStore) -> dict[str, list[Any]]:
    return {h.id: await store.read_events(h.id) for h in await store.list_headers()}


DRAFT = "compare " + " and ".join(
    format_session_reference_mention(SessionReferenceInput(sid, f"[{sid}]")) for sid in SOURCES
)


async def settle_tasks() -> None:
    """Give cancelled reads a moment, then require that none is left pending."""
    me = asyncio.current_task()
    for _ in range(200):
        if not [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
            return
        await asyncio.sleep(0.005)
    left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    raise AssertionError(f"tasks left behind: {left}")


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        async with MemorySessionStore() as memory:
            await seed(memory)
            yield memory
    else:
        async with await SqliteSessionStore.open(tmp_path / "cancel.sqlite3") as sqlite:
            await seed(sqlite)
            yield sqlite


async def test_cancel_at_every_query_point(store: SessionStore) -> None:
    query = PointQuery(SessionQuery(store))
    service = SessionReferenceService(query)
    header = await store.read_header("target")
    chat = ChatSession(store, query, service, OfflineProvider(), header)

    # A dry run (on a copy of the draft's preparation only) counts the points.
    await chat.prepare_draft(DRAFT)
    count = len(query.points)
    assert count == 2 * len(SOURCES)  # one read per source, each bracketed
    before = await everything(store)

    cancelled = 0
    for how in ("task", "event"):
        for k in range(count):
            query.points.clear()
            query.trigger = k
            event = asyncio.Event()
            task = asyncio.ensure_future(chat.submit(DRAFT, cancel=event))
            query.action = canceller(task) if how == "task" else event.set
            if how == "task":
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                with pytest.raises(SessionReferenceError) as info:
                    await task
                assert info.value.code == SESSION_REFERENCE_CANCELLED
            cancelled += 1
            await settle_tasks()
            assert await everything(store) == before, (how, k, query.points)
    assert cancelled == 2 * count

    # The store stays usable: an uncancelled send appends exactly its one batch.
    query.trigger = None
    submitted = await chat.submit(DRAFT)
    after = await everything(store)
    assert after["target"] == [*before["target"], *submitted.events]
    assert len(submitted.events) == 2
    assert {k: v for k, v in after.items() if k != "target"} == {
        k: v for k, v in before.items() if k != "target"
    }


async def test_cancel_after_every_number_of_loop_steps() -> None:
    """Cancel the send after 0, 1, 2, … event-loop steps until it completes on its own."""
    async with MemorySessionStore() as store:
        await seed(store, messages=40)
        query = PointQuery(SessionQuery(store))  # its points make every read a real suspension
        service = SessionReferenceService(query)
        header = await store.read_header("target")
        chat = ChatSession(store, query, service, OfflineProvider(), header)
        before = await everything(store)
        steps = 0
        while True:
            task = asyncio.ensure_future(chat.submit(DRAFT))
            for _ in range(steps):
                await asyncio.sleep(0)
            if task.done():
                break
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await settle_tasks()
            assert await everything(store) == before, steps
            steps += 1
        submitted = task.result()
        assert steps >= 2 * len(SOURCES)  # at least every query point was a cancel point
        after = await everything(store)
        assert after["target"] == [*before["target"], *submitted.events]

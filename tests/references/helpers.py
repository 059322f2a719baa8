"""Small builders over the real stores for the session-reference tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    Event,
    Replace,
    assistant_message,
    user_message,
)
from stores import SessionStore


class Log:
    """Appends typed events to one session of a store."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.turn = 0

    async def user(
        self,
        content: str | Sequence[Mapping[str, Any]],
        *,
        source: Mapping[str, Any] | None = None,
        replace: Replace | None = None,
        seqs: Sequence[int] | None = None,
    ) -> Event:
        return await self.store.append(
            self.session_id,
            "user/message",
            user_message(content, source=source),
            surface_op=replace or "append",
            source_event_seqs=seqs,
        )

    async def checkpoint(self, text: str, **kw: Any) -> Event:
        return await self.user(text, source=COMPACT_CHECKPOINT_SOURCE, **kw)

    async def steering(self, text: str, *, source: Mapping[str, Any] | None = None) -> Event:
        return await self.store.append(
            self.session_id,
            "steering/message",
            {"turn": self.turn, "message": user_message(text, source=source)},
            surface_op="append",
        )

    async def assistant(
        self,
        content: str | Sequence[Mapping[str, Any]],
        *,
        replace: Replace | None = None,
        seqs: Sequence[int] | None = None,
    ) -> Event:
        return await self.store.append(
            self.session_id,
            "assistant/message",
            {
                "turn": self.turn,
                "step": 0,
                "message": assistant_message(content, provider="test", model="m"),
            },
            surface_op=replace or "append",
            source_event_seqs=seqs,
        )

    async def tool_result(self, text: str) -> Event:
        message = {
            "id": "t1",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": "c1"},
        }
        return await self.store.append(
            self.session_id,
            "tool/result",
            {"turn": self.turn, "step": 0, "message": message},
            surface_op="append",
        )

    async def chunk(self, text: str) -> Event:
        return await self.store.append(
            self.session_id,
            "assistant/chunk",
            {
                "turn": self.turn,
                "step": 0,
                "chunk": {"type": "text-delta", "index": 0, "text": text},
            },
        )

    async def title(self, title: str, kind: str = "user") -> Event:
        return await self.store.append(
            self.session_id, "session/title", {"title": title, "source": {"kind": kind}}
        )

    async def raw(self, type: str, data: Mapping[str, Any]) -> Event:
        return await self.store.append(self.session_id, type, data)


class ScriptedQuery:
    """A real ``SessionQuery`` with hooks: reads can wait on a barrier, hang forever or
    fail per session id, and every call and cancellation is recorded (no store mocking)."""

    def __init__(
        self,
        inner: Any,
        *,
        hang: Sequence[str] = (),
        fail: Mapping[str, BaseException] | None = None,
        barrier: Any = None,
    ) -> None:
        import asyncio
        from collections import Counter

        self.inner = inner
        self.hang = set(hang)
        self.fail = dict(fail or {})
        self.barrier = barrier
        self.calls: Counter[str] = Counter()
        self.log: list[str] = []
        self.cancelled: list[str] = []
        self.started = asyncio.Event()
        self.hang_lists = False
        self.tasks: list[asyncio.Task[Any]] = []

    async def list_sessions(self) -> Any:
        self.calls["list_sessions"] += 1
        if self.hang_lists:
            import asyncio

            self.started.set()
            await asyncio.Event().wait()
        if "list_sessions" in self.fail:
            raise self.fail["list_sessions"]
        return await self.inner.list_sessions()

    async def read_title(self, session_id: str) -> Any:
        self.calls["read_title"] += 1
        return await self.inner.read_title(session_id)

    async def read_titles(self, session_ids: Sequence[str] | None = None) -> Any:
        self.calls["read_titles"] += 1
        return await self.inner.read_titles(session_ids)

    async def read_surface(self, session_id: str) -> Any:
        import asyncio

        self.calls["read_surface"] += 1
        self.calls[f"read_surface:{session_id}"] += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.append(task)
        self.log.append(f"start:{session_id}")
        try:
            if self.barrier is not None:
                await self.barrier.wait()
            self.started.set()
            if session_id in self.hang:
                await asyncio.Event().wait()  # never returns
            await asyncio.sleep(0)
            if session_id in self.fail:
                raise self.fail[session_id]
            result = await self.inner.read_surface(session_id)
        except asyncio.CancelledError:
            self.cancelled.append(session_id)
            raise
        self.log.append(f"end:{session_id}")
        return result


_FINISHING = ("._transaction", "._transaction_sync")
"""The stores' transaction tasks (the SQLite store runs its hot ones as ``_transaction_sync``),
by their coroutines' names: the stores' connection parts (``_Connection``, ``PgConnection``)
define them, so the class in the name is not the store's."""


async def tasks_left_behind() -> list[asyncio.Task[Any]]:
    """The other tasks still alive, once the store's own in-flight transactions have ended.

    A durable store finishes a transaction it started even when its caller is cancelled
    (so nothing is ever half written); that task ends on its own within moments. Anything
    else still running was left behind by the code under test.
    """
    me = asyncio.current_task()
    finishing = [
        t
        for t in asyncio.all_tasks()
        if t is not me and t.get_coro().__qualname__.endswith(_FINISHING)  # type: ignore[union-attr]
    ]
    if finishing:
        await asyncio.wait(finishing, timeout=10)
    return [t for t in asyncio.all_tasks() if t is not me]

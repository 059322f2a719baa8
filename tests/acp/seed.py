"""Seeding the database the agent subprocess opens, from the test process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.config import DshConfig
from core.engine import ChatSession
from core.log import SESSION_TITLE, Event
from stores import open_store
from tui.shared.runtime import open_runtime

__all__ = ["converse", "kinds", "read_log", "seed_session"]


async def seed_session(
    db: Path | str,
    *,
    cwd: str | None = None,
    title: str | None = None,
    session_id: str | None = None,
    created_at: int | None = None,
) -> str:
    """Create an empty session (optionally titled) straight in the store."""
    async with await open_store(db) as store:
        header = await store.create_session(session_id, cwd=cwd, created_at=created_at)
        if title is not None:
            await store.append(
                header.id, SESSION_TITLE, {"title": title, "source": {"kind": "user"}}
            )
        return header.id


async def converse(db: Path | str, session_id: str, drafts: Sequence[str]) -> None:
    """Send ``drafts`` to a session through the engine (offline provider), as the TUI would."""
    async with open_runtime(DshConfig(database=db)) as runtime:
        chat: ChatSession = await runtime.chat(session_id)
        for draft in drafts:
            async for _ in chat.send(draft):
                pass


async def read_log(db: Path | str, session_id: str) -> list[Event]:
    async with await open_store(db) as store:
        return await store.read_events(session_id)


def kinds(events: Sequence[Event]) -> list[tuple[str, Any]]:
    """``(type, source kind)`` of each event (source kind ``None`` for non-messages)."""
    out: list[tuple[str, Any]] = []
    for event in events:
        source = event.data.get("source") if event.type == "user/message" else None
        out.append((event.type, source.get("kind") if isinstance(source, dict) else None))
    return out

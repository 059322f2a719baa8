"""Huge folded bodies in the TUI (issue 12 §7): reasoning, compaction summaries, tool results
and context messages are shown cut like messages, so expanding one no longer wraps megabytes
on every relayout (1 MB: 7 s per expand before); the log keeps them whole."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.config import DshConfig
from core.log import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    user_message,
)
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.ui.conftest import FIXED_NOW, SIZE, make_app
from tests.ui.transcript_harness import TranscriptApp, settle, shown_text
from tui.app.transcript.cards import CollapsedItem
from tui.app.transcript.transcript import MAX_SHOWN_CHARS
from tui.shared.runtime import open_runtime

BIG = 200_000


async def test_expanded_huge_bodies_are_shown_cut(tmp_path: Path) -> None:
    path = tmp_path / "huge.sqlite3"
    text = "H" * BIG
    reply = assistant_message(
        [{"type": "reasoning", "text": text}, {"type": "text", "text": "ok"}],
        provider="offline",
        model="echo-1",
    )
    tool = user_message(text, source={"kind": "tool", "callId": "c1"})
    events = [
        NewEvent(
            USER_MESSAGE,
            user_message(text, source={"kind": "plugin", "plugin": "compact"}),
            "append",
            time=FIXED_NOW - 50_000,
        ),
        NewEvent(
            ASSISTANT_MESSAGE,
            {"turn": 1, "step": 0, "message": reply},
            "append",
            time=FIXED_NOW - 40_000,
        ),
        NewEvent(
            TOOL_RESULT, {"turn": 1, "step": 0, "message": tool}, "append", time=FIXED_NOW - 30_000
        ),
        NewEvent(
            USER_MESSAGE,
            user_message(text, source={"kind": "plugin", "plugin": "notes"}),
            "append",
            time=FIXED_NOW - 20_000,
        ),
    ]
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session("huge", created_at=FIXED_NOW - 60_000)
        await store.append_batch("huge", events)
        config = DshConfig(database=path)
        async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:
            app = make_app(rt, initial_session="huge")
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                await asyncio.wait_for(app.transcript.wait_until_settled(), 60)
                items = list(app.query(CollapsedItem))
                assert len(items) == 4  # summary, reasoning, tool result, context
                for item in items:
                    item.action_toggle_fold()
                    await pilot.pause()
                    await asyncio.wait_for(app.transcript.wait_until_settled(), 60)
                    body = item.body
                    assert body is not None
                    shown = shown_text(body)
                    assert "more characters not shown here" in shown, type(item).__name__
                    assert shown.count("H") <= MAX_SHOWN_CHARS
        stored = await store.read_events("huge")
    assert stored[0].data["content"][0]["text"] == text
    assert stored[3].data["content"][0]["text"] == text


async def test_a_huge_streamed_reply_is_shown_cut_and_kept_whole() -> None:
    """Each flush re-rendered the whole growing paragraph and each delta copied the whole
    reply (1 MB in 10-byte deltas: 24-40 s of a frozen UI, 1.5 s now)."""
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        view = app.transcript.begin_reply()
        for i in range(BIG // 10):
            view.append("text", "0123456789")
            view.append("reasoning", "r")
            if i % 2000 == 0:
                await pilot.pause()
        await view.finish("completed")
        await settle(pilot)
        source = view.source
        hidden = BIG - MAX_SHOWN_CHARS
        assert source.startswith("0123456789" * (MAX_SHOWN_CHARS // 10))
        assert source.endswith(
            f"[… {hidden:,} more characters not shown here; export the session to read it all]"
        )
        assert len(source) < MAX_SHOWN_CHARS + 200
        assert view.text == "0123456789" * (BIG // 10)  # the record keeps it all
        assert view.record.reasoning == "r" * (BIG // 10)
        assert app.transcript.last_reply_text() == view.text

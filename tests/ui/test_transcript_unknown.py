"""Events of types dsh does not know (a reference implementation's ``step/start``,
``agent/inbox/spliced``…) in the transcript: collapsed generic items (the type and an
escaped one-line JSON preview, expanding to the whole JSON) between the surface items in
seq order, only those after the newest compaction; the same whether the session is read
whole or a page at a time."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from core.log import (
    Event,
)
from stores import SessionQuery, SqliteSessionStore
from tests.stores.test_unknown_events import build
from tests.ui.test_transcript_window import signature
from tests.ui.transcript_harness import TranscriptApp, settle, shown_text
from tui.app.transcript.cards import CollapsedItem
from tui.app.transcript.transcript import Transcript
from tui.shared.items import with_unknown_events

SIZE = (100, 40)


async def whole(query: SessionQuery, sid: str) -> list[Event]:
    snapshot, unknown = await query.read_surface_with_unknown(sid)
    return with_unknown_events(snapshot.events, unknown)


async def test_unknown_events_shown_whole(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await build(store)
        events = await whole(SessionQuery(store), "s")
    types = [e.type for e in events]
    # Nothing from before the compaction's checkpoint (seq order): not the first event,
    # not the compacted turns' step/start, not what happened while it ran.
    assert "session/opened" not in types
    assert "agent/inbox/spliced" not in types
    # Those of the kept early turns are older than the checkpoint too: only the late ones.
    assert types.count("step/start") == 7
    assert types[:6] == [
        "user/message",  # the checkpoint
        *["user/message", "assistant/message"] * 2,  # the early turns it kept
        "request/header",
    ]
    assert types[6:10] == ["user/message", "step/start", "assistant/message", "step/end"]
    # After the checkpoint's kept turns, in seq order with the surface items.
    seqs = [e.seq for e in events[5:]]
    assert seqs == sorted(seqs)


@pytest.mark.parametrize("page", [2, 3, 5])
async def test_paged_unknown_events_match_the_whole_load(tmp_path: Path, page: int) -> None:
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await build(store)
        query = SessionQuery(store)
        expected_app = TranscriptApp(await whole(query, "s"), page_size=page)
        async with expected_app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await page_to_start(expected_app.transcript)
            await settle(pilot)
            expected = [signature(w) for w in expected_app.transcript.item_widgets]
        assert sum("step/start" in str(s) for s in expected) == 7

        calls: list[tuple[int, int]] = []

        async def fetch(seqs: Any) -> list[Event]:
            return await query.read_events_at("s", seqs)

        async def fetch_unknown(after: int, through: int) -> list[Event]:
            calls.append((after, through))
            return await query.read_unknown_events("s", after, through)

        app = TranscriptApp(page_size=page)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            window = await query.read_surface_window("s", page + 1)
            await app.transcript.load_window(window, fetch, fetch_unknown)
            await settle(pilot)
            await page_to_start(app.transcript)
            await settle(pilot)
            got = [signature(w) for w in app.transcript.item_widgets]
        assert got == expected
        # Each unknown event was read once: the ranges read do not overlap.
        spans = sorted(calls)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


async def page_to_start(transcript: Transcript) -> None:
    """Press "Load earlier messages" until everything is mounted (a page read with its
    unknown events may take two presses to mount: a page of items at a time)."""
    for _ in range(200):
        if not transcript.hidden_count:
            return
        before = (transcript.hidden_count, transcript.unread_count)
        await transcript.load_earlier()
        assert (transcript.hidden_count, transcript.unread_count) != before
    raise AssertionError("never reached the start")


def _unknown_items(app: TranscriptApp) -> list[CollapsedItem]:
    return [w for w in app.transcript.item_widgets if w.has_class("unknown")]  # type: ignore[misc]


async def test_an_unknown_event_is_a_collapsed_literal_item(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await build(store)
        events = await whole(SessionQuery(store), "s")
    app = TranscriptApp(events, page_size=40)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        items = _unknown_items(app)
        hostile = next(w for w in items if "hostile" in shown_text(w))
        header = shown_text(hostile)
        assert header.startswith("▸ step/start event · {")
        # Literal: the markup is text, the escape and bidi characters are escaped.
        assert "[bold red]PWNED[/]" in header and "[link=x]" in header
        assert "\x1b" not in header and "\u202e" not in header and "\x07" not in header
        assert "\\u001b[2J" in header
        assert not hostile.expanded
        hostile.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert hostile.expanded
        body = shown_text(hostile)
        assert '"hostile": "[bold red]PWNED[/]' in body
        assert "\x1b" not in body
        # A long preview is cut with a notice; the expanded body has it all.
        long = next(w for w in items if "request/header" in shown_text(w))
        assert "more characters]" in shown_text(long)

"""Opening is bounded by the page (issue 15): the app opens a session from its newest
surface rows alone (``read_surface_page``: one backwards range of the surface index),
reads every earlier seq only when an earlier page is wanted, and shows exactly what a
whole load shows; a live append still lands at the end without a reload."""

from __future__ import annotations

import asyncio
from typing import Any

from core.log import NewEvent, user_message
from core.query import SurfaceWindow
from stores import SessionQuery, SqliteSessionStore
from tests.ui.conftest import FIXED_NOW, MINUTE, SIZE, exchange
from tests.ui.test_app import settle, wait_for
from tests.ui.test_follow import shown
from tests.ui.test_transcript_window import signature
from tests.ui.transcript_harness import TranscriptApp
from tests.ui.transcript_harness import settle as settle_transcript
from tui.app.transcript.transcript import PAGE_SIZE, Transcript, format_time
from tui.shared.runtime import Runtime

LONG = "long-history"
TURNS = 40  # 80 items: three pages and more


class CountingQuery(SessionQuery):
    """The real query, counting the reads that fold every surface row; those of the
    earlier seqs wait for ``gate``."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.whole_reads: list[str] = []
        self.gate = asyncio.Event()

    async def read_surface_window(self, session_id: str, newest: int) -> SurfaceWindow:
        self.whole_reads.append("window")
        return await super().read_surface_window(session_id, newest)

    async def read_surface_seqs(self, session_id: str) -> tuple[tuple[int, ...], int]:
        self.whole_reads.append("seqs")
        await self.gate.wait()
        return await super().read_surface_seqs(session_id)


async def long_runtime(runtime: Runtime) -> tuple[Runtime, CountingQuery]:
    store = runtime.store
    # Newer than every seeded session: the app opens it first.
    await store.create_session(LONG, cwd="/w", created_at=FIXED_NOW - 1000)
    events: list[NewEvent] = []
    for turn in range(TURNS):
        at = FIXED_NOW - 10**8 + turn * MINUTE
        events += exchange(f"question {turn}", f"answer {turn}", turn, at)
        events.append(NewEvent("step/start", {"turn": turn}, time=at + 1))
    await store.append_batch(LONG, events)
    query = CountingQuery(store)
    return Runtime(runtime.config, store, query, runtime.service, runtime.provider), query


async def page_to_start(transcript: Transcript) -> None:
    for _ in range(100):
        if not transcript.hidden_count:
            return
        await transcript.load_earlier()
    raise AssertionError("never reached the start")


async def test_open_reads_the_newest_rows_and_pages_like_a_whole_load(runtime: Runtime) -> None:
    from tests.ui.conftest import make_app
    from tui.shared.items import with_unknown_events

    rt, query = await long_runtime(runtime)
    snapshot, unknown = await query.read_surface_with_unknown(LONG)
    query.whole_reads.clear()
    expected_app = TranscriptApp(
        with_unknown_events(snapshot.events, unknown), time_format=format_time
    )
    async with expected_app.run_test(size=SIZE) as pilot:
        await settle_transcript(pilot)
        await page_to_start(expected_app.transcript)
        await settle_transcript(pilot)
        expected = [signature(w) for w in expected_app.transcript.item_widgets]

    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        transcript = app.transcript
        await wait_for(pilot, lambda: app.current_id == LONG and shown(app, "answer 39"))
        # The newest page is on screen while the earlier items are not even counted:
        # no read of every surface row comes before it (the count waits at the gate).
        assert query.whole_reads in ([], ["seqs"])
        assert transcript.mounted_count == PAGE_SIZE
        assert str(transcript.load_earlier_button.label) == "Load earlier messages"
        query.gate.set()  # the count, after the page
        await settle(app, pilot)
        assert query.whole_reads == ["seqs"]
        assert "more)" in str(transcript.load_earlier_button.label)
        await page_to_start(transcript)
        await settle(app, pilot)
        got = [signature(w) for w in transcript.item_widgets]
        assert query.whole_reads == ["seqs"]
    assert got == expected


async def test_a_live_append_lands_at_the_end_of_a_page_opened_from_the_newest_rows(
    runtime: Runtime,
) -> None:
    from tests.ui.conftest import make_app

    rt, query = await long_runtime(runtime)
    query.gate.set()
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        transcript = app.transcript
        assert query.whole_reads == ["seqs"]  # counted once, after the page
        before = transcript.mounted_count
        async with await SqliteSessionStore.open(rt.config.database) as elsewhere:
            await elsewhere.append(
                LONG, "user/message", user_message("from another window"), surface_op="append"
            )
        await wait_for(pilot, lambda: shown(app, "from another window"))
        await settle(app, pilot)
        # Added, not reloaded: nothing was folded again, the count goes on.
        assert transcript.mounted_count == before + 1
        assert query.whole_reads == ["seqs"]
        assert "more)" in str(transcript.load_earlier_button.label)


async def test_counting_earlier_seqs_of_a_surface_changed_meanwhile_reads_nothing(
    runtime: Runtime,
) -> None:
    """The earlier seqs are read when wanted; if the page's first item is no longer on the
    surface by then (a compaction elsewhere), nothing earlier is read from this view (the
    follower reloads it) and nothing fails."""
    _rt, query = await long_runtime(runtime)
    window = await query.read_surface_page(LONG, 5)
    assert not window.complete
    reads: list[object] = []

    async def fetch(seqs: Any) -> Any:
        reads.append(list(seqs))
        return await query.read_events_at(LONG, seqs)

    async def fetch_unknown(after: int, through: int) -> Any:
        reads.append((after, through))
        return await query.read_unknown_events(LONG, after, through)

    async def changed_seqs() -> tuple[tuple[int, ...], int]:
        return (10_000, 10_001), 10_000  # none of what the page holds

    app = TranscriptApp(page_size=4)
    async with app.run_test(size=SIZE) as pilot:
        await settle_transcript(pilot)
        await app.transcript.load_window(window, fetch, fetch_unknown, changed_seqs)
        await settle_transcript(pilot)
        assert app.transcript.hidden_count >= 1
        while app.transcript.hidden_count > app.transcript.unread_count:
            await app.transcript.load_earlier()  # items read with the page, not mounted
        await app.transcript.load_earlier()
        await settle_transcript(pilot)
        assert reads == []
        assert app.transcript.unread_count == 0
        assert app.transcript.load_earlier_button.display is (app.transcript.hidden_count > 0)

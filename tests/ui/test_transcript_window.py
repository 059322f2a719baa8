"""A transcript loaded from a surface window: only the newest page is read on open, earlier
pages are read on demand, and what ends up on screen is exactly what a whole load shows."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from core.errors import SessionNotFoundError
from core.log import Event
from core.references import SessionReferenceInput
from stores import SessionQuery, SqliteSessionStore
from tests.ui.transcript_harness import (
    Stored,
    TranscriptApp,
    assistant,
    new_session,
    plain,
    send_with_references,
    settle,
    user,
)
from tui.app.transcript.transcript import Transcript, UserMessage

SIZE = (100, 40)


async def card_heavy_session(stored: Stored, turns: int) -> None:
    """Every third turn references another session, so with small pages some page boundary
    falls between a reference card and the user message whose labels it names."""
    for i in range(turns):
        if i % 3 == 0:
            await send_with_references(
                stored, f"turn {i} about @Source notes", [SessionReferenceInput("src", "Source")]
            )
        else:
            await stored.append(user(f"turn {i}"))
        await stored.append(assistant(f"answer {i} with **bold**"))


async def make_sessions(tmp_path: Path) -> tuple[SqliteSessionStore, Stored]:
    store = await SqliteSessionStore.open(tmp_path / "dsh.sqlite3")
    source = await new_session(store, session_id="src", cwd="/src")  # type: ignore[arg-type]
    await source.append(user("what is in the source?"), assistant("notes"))
    target = await new_session(store, session_id="target")  # type: ignore[arg-type]
    await card_heavy_session(target, 14)
    return store, target


def signature(widget: Widget) -> tuple[object, ...]:
    """What a widget shows, including the styled spans of a user message (mention labels)."""
    texts = tuple(plain(s) for s in widget.query(Static)) if not isinstance(widget, Static) else ()
    if isinstance(widget, UserMessage):
        shown = widget.render()
        assert isinstance(shown, (Text, Content))
        return ("user", shown.plain, tuple((s.start, s.end, str(s.style)) for s in shown.spans))
    if isinstance(widget, Static):
        return (type(widget).__name__, plain(widget))
    return (type(widget).__name__, texts)


async def page_to_start(transcript: Transcript) -> None:
    while transcript.hidden_count:
        before = transcript.hidden_count
        await transcript.load_earlier()
        assert transcript.hidden_count < before


class CountingFetch:
    def __init__(self, query: SessionQuery, session_id: str) -> None:
        self.query, self.session_id = query, session_id
        self.calls: list[list[int]] = []

    async def __call__(self, seqs: Sequence[int]) -> list[Event]:
        self.calls.append(list(seqs))
        return await self.query.read_events_at(self.session_id, seqs)


async def test_windowed_paging_shows_exactly_what_a_whole_load_shows(tmp_path: Path) -> None:
    store, target = await make_sessions(tmp_path)
    async with store:
        query = SessionQuery(store)
        whole = await target.surface()
        for page in (2, 3, 4, 5):
            expected_app = TranscriptApp(whole, page_size=page)
            async with expected_app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                await page_to_start(expected_app.transcript)
                await settle(pilot)
                expected = [signature(w) for w in expected_app.transcript.item_widgets]

            app = TranscriptApp(page_size=page)
            fetch = CountingFetch(query, "target")
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                transcript = app.transcript
                window = await query.read_surface_window("target", page + 1)
                await transcript.load_window(window, fetch)
                await settle(pilot)
                assert transcript.item_count == len(whole)
                assert transcript.mounted_count == page
                assert transcript.unread_count == len(whole) - page
                assert f"({len(whole) - page:,} more)" in str(transcript.load_earlier_button.label)
                await page_to_start(transcript)
                await settle(pilot)
                got = [signature(w) for w in transcript.item_widgets]
            assert got == expected, f"page size {page}"
            # Each read is one page plus at most one event of context, none read twice
            # except those context events.
            assert all(len(call) <= page + 1 for call in fetch.calls)
            read = [seq for call in fetch.calls for seq in call]
            assert len(read) <= len(whole) - page - 1 + len(fetch.calls) + 1
            assert sorted(set(read)) == [e.seq for e in whole[: len(whole) - page]]


async def test_a_failed_read_keeps_the_button_and_reports_once(tmp_path: Path) -> None:
    store, _ = await make_sessions(tmp_path)
    async with store:
        query = SessionQuery(store)
        failures: list[Transcript.LoadFailed] = []

        class App(TranscriptApp):
            def on_transcript_load_failed(self, message: Transcript.LoadFailed) -> None:
                failures.append(message)

        async def gone(seqs: Sequence[int]) -> list[Event]:
            raise SessionNotFoundError("target")

        app = App(page_size=4)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            transcript = app.transcript
            await transcript.load_window(await query.read_surface_window("target", 5), gone)
            hidden = transcript.hidden_count
            await transcript.load_earlier()
            await settle(pilot)
            assert [type(f.error) for f in failures] == [SessionNotFoundError]
            assert transcript.hidden_count == hidden and transcript.mounted_count == 4
            button = transcript.load_earlier_button
            assert button.display and not button.disabled
            assert str(button.label).startswith("Load earlier messages (")


async def test_a_late_page_of_an_old_session_is_dropped(tmp_path: Path) -> None:
    store, target = await make_sessions(tmp_path)
    async with store:
        query = SessionQuery(store)
        gate = asyncio.Event()

        async def slow(seqs: Sequence[int]) -> list[Event]:
            await gate.wait()
            return await query.read_events_at("target", seqs)

        app = TranscriptApp(page_size=4)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            transcript = app.transcript
            await transcript.load_window(await query.read_surface_window("target", 5), slow)
            pending = asyncio.ensure_future(transcript.load_earlier())
            await pilot.pause()
            button = transcript.load_earlier_button
            assert button.disabled and str(button.label) == "Loading earlier messages…"
            await transcript.load_earlier()  # a second click while reading does nothing
            # Another session is shown before the read finishes.
            await transcript.load((await target.surface())[:2])
            gate.set()
            await pending
            await settle(pilot)
            assert transcript.item_count == 2 and transcript.hidden_count == 0
            assert "turn 0 about @Source notes" in plain(transcript.item_widgets[1])
            assert not transcript.load_earlier_button.display

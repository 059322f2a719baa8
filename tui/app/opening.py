"""Opening sessions in the app: the session list, the one way the shown session changes
(``open_session``), the choices that lead there (sidebar, palette, reference cards), the
transcript's window of the open session and its sent history, and the ordinary faults of
store calls (``faults``: a notice, never a crash)."""

from __future__ import annotations

from collections.abc import Sequence

from textual import on, work
from textual.await_complete import AwaitComplete
from textual.command import CommandPalette

from core.damage import damage_notice
from core.display import single_line
from core.engine import ChatSession, CompactionError, unanswered_message
from core.errors import DshError, SessionNotFoundError, StoreError
from core.log import Event
from core.query import SurfaceWindow
from core.references import SessionDiscovery
from tui.app.commands import ReferenceCommands, focused_card
from tui.app.composer.composer import Composer
from tui.app.faults import FaultGuard
from tui.app.host import run_in_worker
from tui.app.lifetime import AppLifetime
from tui.app.parts import MESSAGE_PLACEHOLDER
from tui.app.sent_history import sent_messages
from tui.app.sidebar.sidebar import Sidebar
from tui.app.statusbar import TitleBar
from tui.app.transcript.cards import ReferenceCard, source_name
from tui.app.transcript.transcript import Transcript
from tui.shared.errors import fault_message

__all__ = ["HISTORY_EVENTS", "SOURCE_GONE", "AppOpening"]

HISTORY_EVENTS = 2000
"""How many surface events before the newest page are read for Up/Down history."""

SOURCE_GONE = "That session was deleted or is no longer shared with you"
"""What a reference card's "Open session" says when its source cannot be read (the store
answers alike for both, so nobody learns that a session they may not read exists)."""


class AppOpening(AppLifetime):
    """The session list, opening a session and its window, and store faults."""

    # ------------------------------------------------------------------ ordinary faults

    def faults(self, doing: str) -> FaultGuard:
        """``with self.faults("rename the session"):`` around store calls: an ordinary
        fault (tui.app.faults) ends the block with a notice instead of crashing the app."""
        return FaultGuard(self.report_fault, doing)

    def report_fault(self, err: BaseException, doing: str) -> None:
        """The one place a failed store call is shown. The draft is never touched."""
        self.notice.show_notice(fault_message(err, doing), warning=isinstance(err, CompactionError))
        if isinstance(err, SessionNotFoundError):
            run_in_worker(self, self.refresh_sessions, group="refresh-sessions")

    # ------------------------------------------------------------------ sessions

    async def refresh_sessions(self) -> None:
        with self.faults("read the session list"):
            headers = await self.runtime.query.list_sessions()
            titles = await self.runtime.query.read_titles()
            last_active = await self.runtime.query.read_last_event_times()
            self.sidebar.set_sessions(
                headers, titles, self.current_id, last_active, me=self.runtime.store.current_user()
            )
            self.update_title()
            self.control.read_lineage(headers)  # which are forks: in the background
            self._tell_damage()

    def _tell_damage(self) -> None:
        """The rows the latest listing could not read, in the notice line: once, not again
        at each refresh, and again only when they change."""
        damaged = self.runtime.store.damaged_rows()
        if damaged and damaged != self._damage_told:
            self.notice.show_notice(damage_notice(damaged), warning=True)
        self._damage_told = damaged

    def _last_active_of(self, session_id: str) -> int | None:
        """When a session was last active, as the session list knows it (the picker's ages)."""
        entry = self.sidebar.entry(session_id)
        return entry.last_active if entry is not None else None

    def label_of(self, session_id: str) -> str:
        entry = self.sidebar.entry(session_id)
        return entry.label if entry is not None else session_id

    def update_title(self) -> None:
        bar = self._main.query_one("#title-bar", TitleBar)
        shown = self.profiles.shown()
        if self.chat is None:
            bar.show(None, None, None, shown)
            return
        entry = self.sidebar.entry(self.chat.session_id)
        bar.show(entry.label if entry else None, self.chat.session_id, self.chat.header.cwd, shown)

    async def open_last_session(self) -> None:
        """Open the session that was on screen when the app last quit (with this database),
        if it is still listed, else the one used last."""
        remembered = self._ui_state.state.open_session(self._database_key)
        if remembered is not None and self.sidebar.entry(remembered) is not None:
            await self.open_session(remembered)
            if self.current_id == remembered:
                return
        await self.open_newest_session()

    async def open_session(self, session_id: str | None) -> None:
        """The one way the app changes the session it shows (startup, the sidebar and the
        palette through ``switch_to``, Ctrl+N, a deletion here or elsewhere): replay its
        current surface (windowed), bring its own draft and sent history to the composer,
        mark it in the sidebar and the title. ``None``: no session (the newcomer's guide)."""
        if session_id is None:
            self.chat = None
            self.control.leave_session()
            self.transcript.show_empty_state()
            self.set_unanswered(False)
            self.update_title()
            self.meter.refresh()
            return
        with self.faults("open the session") as guard:
            try:
                chat = await self.profiles.open_chat(session_id)
                window = await self.read_window(session_id)
            except SessionNotFoundError:
                self.notice.show_notice("That session no longer exists.", warning=True)
                await self.refresh_sessions()
                return
        if guard.failed:
            return
        previous = self.current_id
        self.chat = chat
        if previous != session_id:
            self.control.leave_session()  # an edit of the other session ends there
            self._enter_session_draft(previous, session_id)
            # Up/Down walk this session's own sent messages: the newest page's at once;
            # going past the oldest reads those of the HISTORY_EVENTS events before it.
            self.composer.set_history(sent_messages(window.events))
            self.composer.history_incomplete = bool(window.unread) or not window.complete
            self._history_window = window
        self.sidebar.set_current(session_id)
        self._keep_ui_state()  # the next run opens this session again
        self.show_window(window)
        self.control.show_origin()
        self.set_unanswered(unanswered_message(window.events) is not None)
        self.update_title()
        self.profiles.tell_note(session_id)
        self.meter.refresh()
        self.composer.send_enabled = self._can_send and not self.preparing
        owner = self.foreign_owner
        if owner is not None:
            self.notice.show_notice(self.foreign_notice(owner), warning=True)
        if not self.read_only:  # (a read-only database says why itself, once)
            self.composer.placeholder = (
                MESSAGE_PLACEHOLDER
                if owner is None
                else f"Read-only: shared with you by {single_line(owner, 40)}; nothing can be sent"
            )
        self.refresh_bindings()

    async def open_newest_session(self) -> None:
        """Open the session used last (the sidebar's first), or none when there is none.
        When no session is open, the composer's draft goes to the one opened."""
        entries = self.sidebar.entries
        await self.open_session(entries[0].header.id if entries else None)

    def switch_to(self, session_id: str, *, seq: int | None = None) -> None:
        """Open ``session_id`` because the user chose it (the sidebar, or "Switch to" in the
        palette): not while the app is busy (the notice says why); a newer choice supersedes
        one still opening. Either way typing goes on in the composer, as a message.
        ``seq``: chosen by a body match of that message; the transcript shows it."""
        if self.busy:
            self.say_busy("switching")
            self.composer.focus()
            return
        self._switch(session_id, seq)

    @work(exclusive=True, group="switch")
    async def _switch(self, session_id: str, seq: int | None = None) -> None:
        await self.open_session(session_id)
        self.composer.focus()
        if seq is not None and self.current_id == session_id:
            await self.transcript.wait_until_settled()
            await self.transcript.reveal(seq)

    def open_referenced_session(self, session_id: str, name: str | None = None) -> None:
        """Switch to a reference card's source ("Open session", ``o``, the palette) when it
        is still there and the user may read it; else say so in the notice line, naming it
        (``name``, escaped again here: how the card names it; the id without one), and
        stay. Like the sidebar's choice: not while busy, a newer choice supersedes it."""
        shown = single_line(name if name is not None else session_id)
        if self.busy:
            self.say_busy("opening a referenced session")
            return
        if session_id == self.current_id:
            self.notify(f"{shown} is the session already open.", markup=False)
            return
        self._open_referenced(session_id, shown)

    @work(exclusive=True, group="switch")
    async def _open_referenced(self, session_id: str, shown: str) -> None:
        with self.faults("open the referenced session") as guard:
            try:
                await self.runtime.store.read_header(session_id)
            except SessionNotFoundError:
                await self.refresh_sessions()  # the list may still show it
                self.notice.show_notice(f"{SOURCE_GONE}: {shown}.", warning=True)
                return  # the card keeps focus: another source may be tried
            if self.sidebar.entry(session_id) is None:
                await self.refresh_sessions()  # shared a moment ago: not listed yet
        if guard.failed:
            return
        await self.open_session(session_id)  # the sidebar's way (``_switch``)
        self.composer.focus()

    @on(ReferenceCard.OpenRequested)
    def _card_open_requested(self, message: ReferenceCard.OpenRequested) -> None:
        """A card's source button or ``o``: open its one source, or ask which one in a
        palette of the card's "Open referenced session" entries."""
        sources = message.sources
        if len(sources) == 1:
            self.open_referenced_session(sources[0].session_id, source_name(sources[0]))
            return
        if self.busy:
            self.say_busy("opening a referenced session")
            return
        if sources and not isinstance(self.screen, CommandPalette):
            if focused_card(self.screen.focused) is not message.card:
                message.card.focus()  # the chooser lists the focused card's sources
            self.push_screen(
                CommandPalette(
                    providers=[ReferenceCommands], placeholder="Open which referenced session?"
                )
            )

    async def session_deleted_elsewhere(self, session_id: str) -> None:
        """The open session was deleted by another window or process: say so and open the
        newest remaining one (the composer's draft stays)."""
        if self.current_id != session_id:
            return
        self.chat = None
        await self.refresh_sessions()
        await self.open_newest_session()
        self.notice.show_notice(
            "The session you had open was deleted in another window.", warning=True
        )

    @on(Composer.HistoryWanted)
    def _history_wanted(self) -> None:
        window = self._history_window
        if window is not None and self.current_id == window.session.id:
            self._load_history(window)

    @work(exclusive=True, group="history", exit_on_error=False)
    async def _load_history(self, window: SurfaceWindow) -> None:
        session_id = window.session.id
        query = self.runtime.query
        try:
            unread = window.unread
            if not window.complete and window.events:  # only the newest rows were read
                seqs, _floor = await query.read_surface_seqs(session_id)
                first = window.events[0].seq
                unread = seqs[: seqs.index(first)] if first in seqs else ()
            older = unread[-HISTORY_EVENTS:]
            events = await query.read_events_at(session_id, older)
        except (StoreError, DshError, OSError) as err:
            self.log.warning(f"could not read the message history: {err!r}")
            return
        if self.current_id == session_id:
            entries = sent_messages([*events, *window.events])
            self.composer.set_history(entries, keep_place=True)

    async def read_window(self, session_id: str) -> SurfaceWindow:
        """The newest page of the session's surface (plus one event of context): opening a
        long session reads one page of rows and data, not the whole surface (the earlier
        seqs are read when an earlier page or older sent messages are wanted)."""
        return await self.runtime.query.read_surface_page(session_id, self.transcript.page_size + 1)

    def show_window(self, window: SurfaceWindow) -> AwaitComplete:
        query, session_id = self.runtime.query, window.session.id

        async def fetch(seqs: Sequence[int]) -> list[Event]:
            return await query.read_events_at(session_id, seqs)

        async def fetch_unknown(after: int, through: int) -> list[Event]:
            return await query.read_unknown_events(session_id, after, through)

        async def fetch_seqs() -> tuple[tuple[int, ...], int]:
            return await query.read_surface_seqs(session_id)

        return self.transcript.load_window(window, fetch, fetch_unknown, fetch_seqs)

    @on(Transcript.LoadFailed)
    def _load_failed(self, message: Transcript.LoadFailed) -> None:
        if isinstance(message.error, SessionNotFoundError):
            text = "That session no longer exists."
            run_in_worker(self, self.refresh_sessions, group="refresh-sessions")
        else:
            text = "Could not read earlier messages: " + single_line(str(message.error), 200)
        self.notice.show_notice(text, warning=True)

    async def _candidates(self, query: str) -> list[SessionDiscovery]:
        """The picker's rows: the candidates, then the sessions found by what was said in
        them (``SessionReferenceService.discover``, the merge every host shares)."""
        if self.chat is None:
            return []
        return await self.runtime.service.discover(self.chat.header, query)

    async def _found_by_text(self, query: str, shown: Sequence[str]) -> list[SessionDiscovery]:
        """The session list filter's body matches: sessions not ``shown`` whose messages
        contain ``query``, best first."""
        return await self.runtime.service.search_sessions(query, exclude=shown)

    async def ensure_session(self) -> ChatSession | None:
        """The open session, or a new one (``None`` when it could not be opened; store
        faults of creating it are raised)."""
        if self.chat is None:
            header = await self.runtime.store.create_session(cwd=self._cwd)
            await self.refresh_sessions()
            await self.open_session(header.id)
        return self.chat

    @on(Sidebar.Selected)
    def _sidebar_selected(self, message: Sidebar.Selected) -> None:
        self.switch_to(message.session_id, seq=message.seq)

"""Conversation control in the app: retry the last reply, edit and resend one of your
messages, fork at a message (issue 32). All three write new events only (``core.control``,
``ChatSession.retry``/``edit``): the transcript shows what they replaced, folded.

The keys live on a focused message (``r``, ``e``, ``f``: ``tui.app.transcript.navigation``)
and the palette offers the same actions; the app's ``action_*`` methods call in here and
``check_action`` asks ``check``. A retry and an edit run through the app's own send flow
(its reply lease, busy state, streaming display and Esc), so they behave exactly as a send
does. Editing is a mode of the composer: the message's text (its mentions rebuilt from the
reference card stored just before it) replaces the draft, a bar above the composer says so,
Esc gives the earlier draft back, and a failed resend keeps the edited text (still editing).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from functools import partial

from rich.text import Text
from textual.app import SystemCommand
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from core.cards import parse_reference_card
from core.control import fork_session, is_direct_user_message, retry_run
from core.display import single_line
from core.engine import ChatSession, EngineUpdate, Submitted, unanswered_message
from core.errors import DshError
from core.log import SESSION_FORK, SESSION_PROFILE, USER_MESSAGE, Event, message_text
from core.log import SessionHeader as Header
from tui.app.busy import IDLE, Activity, Busy
from tui.app.host import AppHost
from tui.app.sent_history import rebuild_draft
from tui.app.transcript.navigation import MessageItem
from tui.shared.lineage import fork_parent
from tui.shared.runtime import read_latest_events

__all__ = ["CONTROL_ACTIONS", "ConversationControl", "Editing", "EditingBar"]

CONTROL_ACTIONS = frozenset({"retry_reply", "edit_message", "fork_session", "focus_messages"})
"""The app's actions this module answers for (``DshApp.check_action`` asks ``check``)."""


@dataclass(frozen=True, slots=True)
class Editing:
    """The composer holds an edit of message ``seq`` of ``session_id``; ``saved_draft`` is
    what it held before (Esc, or a sent edit, gives it back)."""

    session_id: str
    seq: int
    saved_draft: str


class EditingBar(Static):
    """Above the composer while it holds an edit: which message, and how to get out."""

    DEFAULT_CSS = """
    EditingBar {
        height: 1;
        margin: 0 1;
        padding: 0 1;
        border-left: thick $warning;
        background: $warning 15%;
    }
    """

    def show_edit(self, seq: int) -> None:
        text = Text("✎ ", no_wrap=True, overflow="ellipsis")
        text.append(f"Editing your message #{seq}", "bold")
        text.append(" · Enter resends it · Esc cancels")
        self.update(text)
        self.display = True


class ConversationControl:
    """Retry, edit and fork for one app (see the module docstring)."""

    def __init__(self, app: AppHost) -> None:
        self._app = app
        self.editing: Editing | None = None
        self._bar: EditingBar | None = None

    # ------------------------------------------------------------------ what is focused

    def focused_event(self) -> Event | None:
        """The stored surface event of the message that has focus on the main screen."""
        app = self._app
        screen = app.main_screen
        if screen is None or not screen.is_mounted:
            return None
        return app.transcript.event_of(screen.focused)

    def _last_own_message(self) -> Event | None:
        """The newest of the user's own messages among the transcript's mounted items."""
        transcript = self._app.transcript
        for widget in reversed(transcript.item_widgets):
            event = transcript.event_of(widget)
            if event is not None and is_direct_user_message(event):
                return event
        return None

    def check(self, action: str) -> bool | None:
        """``DshApp.check_action`` for ``CONTROL_ACTIONS``: ``False`` (hidden) while the app
        is busy, ``None`` (dimmed) when it cannot run here, else ``True``."""
        app = self._app
        if action == "focus_messages":
            return True
        if app.busy:
            return False
        if app.chat is None or app.read_only:
            return None
        if action == "fork_session":  # a fork is one's own session, even of a shared one
            return True
        if app.foreign_owner is not None:
            return None
        if action == "edit_message" and isinstance(app.transcript.focused_item(), MessageItem):
            event = self.focused_event()  # a reply, or a message not stored yet: not yours
            if event is None or not is_direct_user_message(event):
                return None
        return True

    def _cannot(self, action: str) -> bool:
        """Say why ``action`` cannot run now (``True``), for the palette, whose entries
        call the actions whatever the footer shows."""
        app = self._app
        state = self.check(action)
        if state:
            return False
        if state is False:
            doing = {"retry_reply": "retrying", "fork_session": "forking"}
            app.say_busy(doing.get(action, "editing"))
        elif app.chat is None:
            pass
        elif app.read_only:
            app.notice.show_notice(f"{app.read_only_why()}: nothing can be changed.", warning=True)
        elif (owner := app.foreign_owner) is not None:
            app.notice.show_notice(app.foreign_notice(owner), warning=True)
        else:
            app.notice.show_notice(
                "Only your own messages can be edited; press e on one of them.", warning=True
            )
        return True

    # ------------------------------------------------------------------ retry

    def retry(self) -> None:
        """Answer the last request again (the earlier reply stays in the log, folded)."""
        app = self._app
        chat = app.chat
        if chat is None or self._cannot("retry_reply"):
            return
        app.notice.clear()
        app.composer.focus()  # as after a send: the reply streams, typing goes on
        app.activity = Activity(Busy.STREAMING, "Retrying…")  # no second start meanwhile
        app.run_worker(partial(self._retry, chat), group="send", exclusive=True)

    async def _retry(self, chat: ChatSession) -> None:
        app = self._app
        try:
            await app.leased(
                chat,
                lambda: self._retry_leased(chat),
                doing="retry the reply",
                later="Retry when that reply is done.",
            )
        finally:
            app.activity = IDLE
        if app.chat is chat:
            await self.reload(chat)

    async def _retry_leased(self, chat: ChatSession) -> None:
        app = self._app
        surface = (await app.runtime.query.read_surface(chat.session_id)).events
        run = retry_run(surface)
        if run is None:
            app.notice.show_notice(
                "Nothing to retry: the conversation has no request to answer.", warning=True
            )
            return
        transcript = app.transcript
        transcript.follow()
        for widget in transcript.item_widgets:  # the new reply streams in their place
            event = transcript.event_of(widget)
            if event is not None and event.seq in run:
                widget.display = False
        interrupt = asyncio.Event()
        await app.stream_reply(chat, stream=chat.retry(interrupt=interrupt), interrupt=interrupt)

    async def reload(self, chat: ChatSession) -> None:
        """Show the session's surface again (what a retry or an edit replaced, folded)."""
        app = self._app
        with app.faults("show the conversation"):
            window = await app.read_window(chat.session_id)
            if app.chat is chat:
                await app.show_window(window)
                app.set_unanswered(unanswered_message(window.events) is not None)

    # ------------------------------------------------------------------ edit

    def edit(self) -> None:
        """Put the focused message (else the last of the user's own) in the composer."""
        app = self._app
        chat = app.chat
        if chat is None or self._cannot("edit_message"):
            return
        event = self.focused_event() or self._last_own_message()
        if event is None or not is_direct_user_message(event):
            app.notice.show_notice("There is no message of yours to edit here.", warning=True)
            return
        app.run_worker(partial(self._begin_edit, chat, event), group="edit", exclusive=True)

    async def _begin_edit(self, chat: ChatSession, event: Event) -> None:
        app = self._app
        with app.faults("read the message to edit") as guard:
            references = await self._references_before(chat.session_id, event.seq)
        if guard.failed or app.chat is not chat or app.busy:
            return
        composer = app.composer
        editing = self.editing
        saved = (
            editing.saved_draft
            if editing is not None and editing.session_id == chat.session_id
            else composer.draft
        )
        app.keep_draft(chat.session_id, saved)  # kept across restarts, not the edit
        self.editing = Editing(chat.session_id, event.seq, saved)
        composer.set_draft(rebuild_draft(message_text(event.data), references))
        composer.focus()
        self._show_bar(event.seq)

    async def _references_before(self, session_id: str, seq: int) -> list[tuple[str, str]]:
        """The sessions a message referenced: those of the reference card stored right
        before it (its own batch), as ``(id, label)``."""
        if seq <= 0:
            return []
        (before,) = await self._app.runtime.query.read_events_at(session_id, [seq - 1])
        card = parse_reference_card(before.data) if before.type == USER_MESSAGE else None
        return [] if card is None else [(s.session_id, s.label) for s in card.sources]

    async def submitted(self, stream: AsyncIterator[EngineUpdate]) -> Submitted:
        """The first update of an edit's stream: its stored batch (preparing the
        references, checking the message and storing the batch raise before it)."""
        first = await anext(stream)
        if not isinstance(first, Submitted):  # ChatSession.edit yields it first, always
            raise TypeError(f"an edit began with {type(first).__name__}, not Submitted")
        return first

    def edit_seq(self, session_id: str | None) -> int | None:
        """The message the composer's draft is an edit of, in ``session_id`` (else ``None``)."""
        editing = self.editing
        return editing.seq if editing is not None and editing.session_id == session_id else None

    def cancel_edit(self) -> bool:
        """Esc: leave the edit, the earlier draft back in the composer (``False``: no edit)."""
        editing = self.editing
        if editing is None:
            return False
        self._end_edit()
        self._app.composer.set_draft(editing.saved_draft)
        return True

    async def edit_sent(self, chat: ChatSession) -> None:
        """The edited message is stored: the edit is over, the earlier draft comes back
        (before what was typed meanwhile), and the transcript shows the fold."""
        editing = self.editing
        self._end_edit()
        if editing is not None and editing.saved_draft:
            self._app.restore_draft(editing.saved_draft)
        await self.reload(chat)

    def leave_session(self) -> None:
        """Another session opens: an edit ends, its earlier draft stays with its session."""
        if self.editing is not None and self.editing.session_id != self._app.current_id:
            saved = self.editing.saved_draft
            self._end_edit()
            self._app.composer.set_draft(saved)

    def _show_bar(self, seq: int) -> None:
        bar = self._bar
        if bar is None:
            composer = self._app.composer
            bar = self._bar = EditingBar(id="editing-bar")
            parent = composer.parent
            if isinstance(parent, Widget):
                parent.mount(bar, before=composer)
        bar.show_edit(seq)

    def _end_edit(self) -> None:
        self.editing = None
        if self._bar is not None:
            self._bar.display = False

    # ------------------------------------------------------------------ fork

    def fork(self) -> None:
        """A new session with the conversation up to the focused message (the whole
        conversation without one), answering with the same profile; then open it."""
        app = self._app
        chat = app.chat
        if chat is None or self._cannot("fork_session"):
            return
        event = self.focused_event()
        app.activity = Activity(Busy.CREATING, "Forking the session…")
        app.run_worker(partial(self._fork, chat, event.seq if event else None), group="new-session")

    async def _fork(self, chat: ChatSession, seq: int | None) -> None:
        app = self._app
        header: Header | None = None
        try:
            with app.faults("fork the session"):
                store = app.runtime.store
                latest = await read_latest_events(store, SESSION_PROFILE, [chat.session_id])
                profile = recorded_profile(latest.get(chat.session_id))
                header = await fork_session(
                    store, app.runtime.query, chat.session_id, at_seq=seq, profile=profile
                )
                await app.refresh_sessions()
                await app.open_session(header.id)
                app.composer.focus()
        finally:
            app.activity = IDLE
        if header is not None:
            where = "" if seq is None else f" at message #{seq}"
            app.notify(f"Forked {single_line(app.label_of(chat.session_id), 60)}{where}.")

    # ------------------------------------------------------------------ lineage

    def read_lineage(self, headers: Iterable[Header]) -> None:
        """After each listing: which sessions are forks, and of what (one read of the
        latest ``session/fork`` event of every session listed), in a worker: the list
        never waits for it, and a newer listing's read replaces one still running."""
        ids = [header.id for header in headers]
        self._app.run_worker(
            partial(self._read_lineage, ids), group="lineage", exclusive=True, exit_on_error=False
        )

    async def _read_lineage(self, ids: list[str]) -> None:
        app = self._app
        try:
            found = await read_latest_events(app.runtime.store, SESSION_FORK, ids) if ids else {}
        except (DshError, OSError) as err:  # lineage is a help, never a reason to fail
            app.log.warning(f"could not read which sessions are forks: {err!r}")
            return
        parents = {sid: parent for sid, event in found.items() if (parent := fork_parent(event))}
        app.sidebar.set_parents(parents)
        self.show_origin()

    def show_origin(self) -> None:
        """The open session's parent, at the top of its transcript (a fork only)."""
        app = self._app
        entry = app.sidebar.entry(app.current_id) if app.current_id is not None else None
        parent = entry.parent if entry is not None else None
        label = app.sidebar.label_of(parent.id) if parent is not None else None
        app.transcript.set_origin(parent, label)

    # ------------------------------------------------------------------ the palette

    def commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette's entries (they act on the focused message, as the keys do)."""
        app = self._app
        if app.chat is None:
            return
        event = self.focused_event() if screen is app.main_screen else None
        yield SystemCommand(
            "Retry last reply",
            "Answer the last message again; the earlier reply stays, folded (r on a message)",
            app.action_retry_reply,
        )
        own = event if event is not None and is_direct_user_message(event) else None
        yield SystemCommand(
            "Edit last message" if own is None else f"Edit message #{own.seq}",
            "Change it in the composer and resend it; what followed stays, folded (e)",
            app.action_edit_message,
        )
        yield SystemCommand(
            "Fork session" if event is None else f"Fork at message #{event.seq}",
            "A new session with this conversation up to "
            + ("its end" if event is None else "that message")
            + " (f on a message)",
            app.action_fork_session,
        )


def recorded_profile(event: Event | None) -> Mapping[str, object] | None:
    """The data of a ``session/profile`` event that names a profile (``None``: none): what
    a fork records, so that it answers as its parent does."""
    if event is None or not isinstance(event.data.get("profile"), str):
        return None
    return dict(event.data)

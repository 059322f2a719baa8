"""The app's parts: the main screen and its widgets, the state every part of ``DshApp``
shares, and the facts they all ask (is the app busy, is the database read-only, whose is the
open session).

``DshApp`` is built in layers, each a class on the one before, by concern: this one; the keys
and what may run now (``tui.app.keys``); what outlives the moment, kept state, drafts, stop
signals and crashes (``tui.app.lifetime``); opening sessions and their windows
(``tui.app.opening``); sending and replies (``tui.app.sending``); the session actions and
the palette (``tui.app.actions``); and the app itself, set-up and store life
(``tui.app.app``). What the app's helpers (follower, commands, control, meter, profiles)
may use of it is ``tui.app.host.AppHost``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen

from core.config import DshConfig
from core.damage import DamagedRow
from core.display import escape_control, single_line
from core.engine import ChatSession
from core.log import SessionHeader
from core.query import SurfaceWindow
from tui.app.busy import IDLE, Activity, Busy
from tui.app.composer.composer import Composer
from tui.app.control import ConversationControl
from tui.app.drafts import DraftKeeper
from tui.app.follow import StoreFollower
from tui.app.meter import ContextMeter
from tui.app.profiles import ProfileKeeper
from tui.app.sidebar.sidebar import Sidebar
from tui.app.statusbar import KeyFooter, NoticeBar, StatusLine, TitleBar
from tui.app.transcript.transcript import Transcript
from tui.app.uistate import UiStateKeeper
from tui.shared.runtime import Runtime

__all__ = ["MESSAGE_PLACEHOLDER", "AppParts", "ChatScreen"]

MESSAGE_PLACEHOLDER = "Message… (@ to reference another session, Enter to send)"
"""What the empty composer says when the open session takes messages."""


class ChatScreen(Screen[None]):
    """The one main screen: sidebar, title, transcript, status, notice and composer."""

    def __init__(
        self, app_now: Callable[[], int], cursor_blink: bool, max_refs: int, limit: int
    ) -> None:
        super().__init__()
        self._now = app_now
        self._cursor_blink = cursor_blink
        self._max_refs = max_refs
        self._limit = limit

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        with Horizontal(id="main"):
            yield Sidebar(now=self._now, id="sidebar")
            with Vertical(id="chat"):
                yield Transcript(id="transcript")
                yield StatusLine(id="status")
                yield NoticeBar(id="notice")
                yield Composer(
                    id="composer",
                    now_ms=self._now,
                    cursor_blink=self._cursor_blink,
                    max_references=self._max_refs,
                    candidate_limit=self._limit,
                    placeholder=MESSAGE_PLACEHOLDER,
                )
        yield KeyFooter(compact=True)


class AppParts(App[int]):
    """The widgets, the shared state (set by ``DshApp.__init__``) and the facts."""

    _chat_screen: ChatScreen | None = None  # set by get_default_screen (may run in App.__init__)

    activity: reactive[Activity] = reactive(IDLE, bindings=True, init=False)
    """What the app is busy with: the status line shows it, and the bindings it keeps out
    hide from the footer until it is done (``check_action``)."""

    # The state the layers share (``DshApp.__init__`` sets it; see there).
    _runtime: Runtime | None
    _config: DshConfig
    _stack: AsyncExitStack
    _now: Callable[[], int]
    _cwd: str
    chat: ChatSession | None
    _cancel_prepare: asyncio.Event | None
    _interrupt: asyncio.Event | None
    _sidebar_choice: bool | None  # None until the user toggles it
    _remove_stop_handler: Callable[[], None] | None
    _terminal_fds: tuple[int, ...]
    _stopping: set[asyncio.Task[None]]
    _unanswered: bool  # the open session ends with a message nothing answered
    _ui_state: UiStateKeeper
    follower: StoreFollower
    control: ConversationControl  # retry, edit and resend, fork
    profiles: ProfileKeeper
    meter: ContextMeter
    _drafts: DraftKeeper
    _history_window: SurfaceWindow | None
    _drafts_timer_armed: bool
    _unindexed_note: str | None
    """Sessions of a read-only database that search cannot find yet (its notice)."""
    _damage_told: tuple[DamagedRow, ...]
    """The damaged rows the notice line last told of (told again only when they change)."""

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None, "the runtime is opened on mount"
        return self._runtime

    @property
    def has_runtime(self) -> bool:
        """Whether the runtime is open yet (``runtime`` may be read)."""
        return self._runtime is not None

    def cancel_workers(self, group: str) -> None:
        """Cancel the app's workers of ``group`` (a newer measure, read, … replaces them)."""
        self.workers.cancel_group(self, group)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast is plain text, escaped (a toast may quote untrusted text)."""
        super().notify(
            escape_control(message),
            title=single_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # ------------------------------------------------------------------ widgets

    @property
    def _main(self) -> ChatScreen:
        assert self._chat_screen is not None, "the main screen is built first"
        return self._chat_screen

    @property
    def main_screen(self) -> Screen[None] | None:
        """The main screen, once built (``None`` before)."""
        return self._chat_screen

    @property
    def composer(self) -> Composer:
        return self._main.query_one("#composer", Composer)

    @property
    def transcript(self) -> Transcript:
        return self._main.query_one("#transcript", Transcript)

    @property
    def sidebar(self) -> Sidebar:
        return self._main.query_one("#sidebar", Sidebar)

    @property
    def notice(self) -> NoticeBar:
        return self._main.query_one("#notice", NoticeBar)

    @property
    def status(self) -> StatusLine:
        return self._main.query_one("#status", StatusLine)

    @property
    def current_id(self) -> str | None:
        return self.chat.session_id if self.chat is not None else None

    # ------------------------------------------------------------------ busy state

    @property
    def busy(self) -> bool:
        return self.activity.busy

    @property
    def preparing(self) -> bool:
        return self.activity.state is Busy.PREPARING

    @property
    def streaming(self) -> bool:
        return self.activity.state is Busy.STREAMING

    @property
    def read_only(self) -> bool:
        return self._runtime is not None and bool(getattr(self.runtime.store, "read_only", False))

    def _owner_if_not_mine(self, header: SessionHeader | None) -> str | None:
        """Who owns ``header``'s session when it is not the user (shared with them: they
        may read it, not write it); ``None`` for their own."""
        if header is None or header.owner is None or self._runtime is None:
            return None
        return None if header.owner == self.runtime.store.current_user() else header.owner

    @property
    def foreign_owner(self) -> str | None:
        """The owner of the open session when it is someone else's."""
        return self._owner_if_not_mine(self.chat.header if self.chat is not None else None)

    @property
    def _can_send(self) -> bool:
        return not self.read_only and self.foreign_owner is None

    def foreign_notice(self, owner: str) -> str:
        return (
            f"This session belongs to {single_line(owner, 40)} and is shared with you: "
            "you can read it and @-mention it, not write to it."
        )

    def read_only_why(self) -> str:
        """Why the database is read-only, as the start of a sentence (a full disk, or not
        writable)."""
        reason = getattr(self.runtime.store, "read_only_reason", None)
        if not isinstance(reason, str) or not reason:
            return "This database is read-only"
        return reason[:1].upper() + reason[1:]

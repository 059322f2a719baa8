"""The dsh Textual app: session list, transcript, composer, and the send flow.

The app builds nothing itself beyond the widgets: it is handed a ``Runtime`` (store, query,
service, provider), or a config to open one. Every store call is awaited off the UI's
event loop (aiosqlite), long work runs in workers, and untrusted text is only ever
rendered as ``rich.text.Text``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path, PurePath
from typing import ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Horizontal, Vertical
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import HelpPanel, Input, TextArea
from textual.worker import Worker

from core.config import DshConfig
from core.damage import DamagedRow, damage_notice
from core.display import escape_control, single_line
from core.engine import (
    ChatSession,
    CompactionError,
    EngineUpdate,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    TitleChanged,
    unanswered_message,
)
from core.errors import (
    DiskFullError,
    DshError,
    LeaseLostError,
    ReplyUnsavedError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
    StoreUnreachableError,
)
from core.log import Event, SessionHeader, now_ms
from core.logfile import export_jsonl
from core.query import SurfaceWindow
from core.references import (
    SessionDiscovery,
    SessionReferenceError,
    find_session_reference_spans,
)
from core.search import unindexed_notice
from tui.app.busy import IDLE, Activity, Busy, action_available, busy_reason
from tui.app.commands import ReferenceCommands, SessionCommands, focused_card
from tui.app.composer.composer import Composer
from tui.app.control import CONTROL_ACTIONS, ConversationControl
from tui.app.drafts import DraftKeeper, drafts_path
from tui.app.faults import FAULTS, FaultGuard
from tui.app.follow import StoreFollower
from tui.app.meter import ContextMeter
from tui.app.profiles import ProfileKeeper
from tui.app.screens.help import HelpScreen
from tui.app.screens.modals import (
    ConfirmScreen,
    RenameScreen,
    UserNameScreen,
    compact_question,
    delete_question,
    share_question,
)
from tui.app.screenshot import save_screenshot_file, screenshot_directory, xml_safe
from tui.app.sent_history import sent_messages
from tui.app.sidebar.sidebar import Sidebar
from tui.app.statusbar import KeyFooter, NoticeBar, StatusLine, TitleBar
from tui.app.transcript.cards import Foldable, ReferenceCard, source_name
from tui.app.transcript.history import ForkBanner
from tui.app.transcript.navigation import MessageItem
from tui.app.transcript.transcript import Transcript, last_assistant_text
from tui.app.uistate import UiStateKeeper, default_state_path
from tui.app.waiting import RETRY_SECONDS, open_when_reachable
from tui.shared.errors import describe_error, fault_message, sentence, unlock_hint
from tui.shared.export import export_markdown
from tui.shared.files import write_new_file
from tui.shared.history import whole_history
from tui.shared.progress import indexing_words
from tui.shared.runtime import Runtime, offline_delay_from_env, open_runtime
from tui.shared.signals import (
    detach_from_terminal,
    install_stop_handler,
    stop_status,
    terminal_fds,
    terminal_gone,
)

__all__ = ["DshApp", "run_app"]

WRITING_ACTIONS = frozenset(
    {"new_session", "rename_session", "compact_session", "delete_session", "answer_again"}
)
"""Actions that write to the store: dimmed when it is read-only."""

SESSION_WRITING_ACTIONS = frozenset(
    {
        "rename_session",
        "compact_session",
        "delete_session",
        "answer_again",
        "share_session",
        "unshare_session",
    }
)
"""Actions that write to the open session: dimmed when another user owns it (issue 17:
a session shared with you is read-only to you)."""

MESSAGE_PLACEHOLDER = "Message… (@ to reference another session, Enter to send)"
"""What the empty composer says when the open session takes messages."""

HISTORY_EVENTS = 2000
"""How many surface events before the newest page are read for Up/Down history."""

STOP_GRACE_SECONDS = 10.0
"""After SIGTERM/SIGHUP, how long a reply in flight gets to store what it received."""

SOURCE_GONE = "That session was deleted or is no longer shared with you"
"""What a reference card's "Open session" says when its source cannot be read (the store
answers alike for both, so nobody learns that a session they may not read exists)."""


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


class DshApp(App[int]):
    """dsh in the terminal."""

    _chat_screen: ChatScreen | None = None  # set by get_default_screen (may run in App.__init__)
    CSS_PATH: ClassVar[list[str | PurePath]] = ["app.tcss"]
    TITLE = "dsh"
    COMMANDS = App.COMMANDS | {SessionCommands, ReferenceCommands}
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer shows these in this order and cuts what does not fit: the keys a
        # newcomer needs first come first (Ctrl+B is also in the palette and the help).
        # Ctrl+R comes first: it is lit only while the last message has no reply (a reply
        # failed to store), and dimmed otherwise, like every action that cannot run now.
        Binding("ctrl+r", "answer_again", "Answer again"),
        Binding("escape", "cancel", "Back"),
        Binding("f1", "help", "Help"),
        Binding("ctrl+l", "focus_sessions", "Sessions"),
        Binding("ctrl+n", "new_session", "New"),
        Binding("f2", "rename_session", "Rename"),
        Binding("f4", "compact_session", "Compact"),
        Binding("f8", "delete_session", "Delete"),
        Binding("ctrl+b", "toggle_sidebar", "Sidebar"),
        Binding("ctrl+up,alt+up", "focus_messages", "Messages", show=False),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    activity: reactive[Activity] = reactive(IDLE, bindings=True, init=False)
    """What the app is busy with: the status line shows it, and the bindings it keeps out
    hide from the footer until it is done (``check_action``)."""

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        config: DshConfig | None = None,
        now: Callable[[], int] = now_ms,
        cwd: str | None = None,
        cursor_blink: bool = True,
        initial_session: str | None = None,
        offline_delay: float = 0.01,
        state_path: Path | None = None,
        keep_drafts: bool = True,
    ) -> None:
        """``state_path``: the file that keeps the theme across runs (``None``: not kept);
        ``keep_drafts``: unsent drafts are kept across runs (not for a replay)."""
        super().__init__()
        if runtime is None and config is None:
            raise ValueError("DshApp needs a runtime or a config")
        self._runtime = runtime
        self._config = config if config is not None else runtime.config  # type: ignore[union-attr]
        self._stack = AsyncExitStack()
        self._now = now
        self._cwd = cwd if cwd is not None else os.getcwd()
        self._cursor_blink = cursor_blink
        self._initial_session = initial_session
        self._offline_delay = offline_delay
        self.chat: ChatSession | None = None
        self._cancel_prepare: asyncio.Event | None = None
        self._interrupt: asyncio.Event | None = None
        self.startup_error: str | None = None
        self.connect_retry_seconds = RETRY_SECONDS  # while the server cannot be reached
        self._sidebar_choice: bool | None = None  # None until the user toggles it
        self._remove_stop_handler: Callable[[], None] | None = None
        self._terminal_fds: tuple[int, ...] = ()
        self._stopping: set[asyncio.Task[None]] = set()
        self._unanswered = False  # the open session ends with a message nothing answered
        self._ui_state = UiStateKeeper(state_path)
        self._keep_drafts = keep_drafts
        self.follower = StoreFollower(self)
        self.control = ConversationControl(self)  # retry, edit and resend, fork
        self.profiles = ProfileKeeper(self)
        self.meter = ContextMeter(self)
        self._drafts = DraftKeeper(None)
        self._history_window: SurfaceWindow | None = None
        self._drafts_timer_armed = False
        self._unindexed_note: str | None = None
        """Sessions of a read-only database that search cannot find yet (its notice)."""
        self._damage_told: tuple[DamagedRow, ...] = ()
        """The damaged rows the notice line last told of (told again only when they change)."""

    # ------------------------------------------------------------------ set-up

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None, "the runtime is opened on mount"
        return self._runtime

    async def on_event(self, event: events.Event) -> None:
        # An ``Input`` (rename, session filter, command palette) draws its value as is: what
        # is pasted into one gets its first line made safe with the one escaping rule. (The
        # composer draws unsafe characters visibly itself; its text is kept exact.)
        if isinstance(event, events.Paste) and isinstance(self.focused, Input) and event.text:
            event = events.Paste(single_line(event.text.splitlines()[0]))
        await super().on_event(event)

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

    def get_default_screen(self) -> Screen[None]:
        limits = self._config.references
        self._chat_screen = ChatScreen(
            self._now, self._cursor_blink, limits.max_references, limits.candidate_limit
        )
        return self._chat_screen

    async def on_ready(self) -> None:
        """After the main screen is composed: open the store and show the session used last
        (a server that cannot be reached yet is waited for: ``_wait_for_server``)."""
        await self._restore_ui_state()
        if self._runtime is None:
            try:
                self._runtime = await self._open_runtime()
            except StoreUnreachableError as err:
                self._wait_for_server(err)
                return
            except (StoreError, DshError, OSError) as err:
                self.startup_error = describe_error(err)
                self.exit(1)
                return
        await self._start()

    async def _open_runtime(self) -> Runtime:
        return await self._stack.enter_async_context(
            open_runtime(
                self._config,
                offline_delay=self._offline_delay,
                progress=self._indexing_progress,
            )
        )

    @work(exclusive=True, group="connect")
    async def _wait_for_server(self, first: StoreUnreachableError) -> None:
        """The store's server cannot be reached yet (down, restarting): say so, try again
        every few seconds (nothing that needs the store can run meanwhile), then start."""
        self.composer.focus()
        self.activity = Activity(Busy.CONNECTING, "Waiting for the server…")
        try:
            runtime = await open_when_reachable(
                self._open_runtime,
                first,
                lambda words: self.notice.show_notice(words, warning=True),
                retry_seconds=self.connect_retry_seconds,
            )
        except (StoreError, DshError, OSError) as err:  # reached, and refused (a login…)
            self.startup_error = describe_error(err)
            self.exit(1)
            return
        finally:
            self.activity = IDLE
        self._runtime = runtime
        self.notice.clear()
        await self._start()

    async def _start(self) -> None:
        """The store is open: fill the screen, open the session used last, follow."""
        composer = self.composer
        composer.candidate_source = self._candidates
        self.sidebar.body_source = self._found_by_text
        composer.picker.last_active_of = self._last_active_of
        composer.focus()
        self._drafts = DraftKeeper(
            drafts_path(self._config.database) if self._keep_drafts else None
        )
        await self._drafts.load()
        if getattr(self.runtime.store, "read_only", False):
            composer.send_enabled = False
            # Not "Message…": a replay (or a read-only database) takes no message.
            composer.placeholder = f"{self._read_only_why()}: nothing can be sent"
            unindexed = getattr(self.runtime.store, "unindexed_sessions", None)
            if unindexed is not None:
                self._unindexed_note = unindexed_notice(await unindexed())
            self._show_read_only_notice()
        self._fit_sidebar(self.size.width)
        await self.follower.prime()
        await self.refresh_sessions()
        if self._initial_session is not None:
            await self.open_session(self._initial_session)
        else:
            await self.open_last_session()
        self.profiles.tell_default_key()
        self._damage_told = ()  # opening the session cleared the notice line: tell it now
        self._tell_damage()
        self.follower.start()

    def _indexing_progress(self, done: int, total: int) -> None:
        """An older database's messages are being indexed for search as it opens: say so
        in the notice line until it is done."""
        if done < total:
            self.notice.show_notice(indexing_words(done, total) + "…", warning=True)
        else:
            self.notice.clear()

    # ------------------------------------------------------------------ kept across runs

    async def _restore_ui_state(self) -> None:
        """Apply the saved theme, then save every theme the user picks from now on."""
        if self._ui_state.path is None:
            return
        state = await self._ui_state.load()
        if state.theme is not None and state.theme in self.available_themes:
            self.theme = state.theme
        self.theme_changed_signal.subscribe(self, lambda theme: self._keep_ui_state(theme=True))

    @property
    def _database_key(self) -> str:
        return os.fspath(self._config.database)

    async def open_last_session(self) -> None:
        """Open the session that was on screen when the app last quit (with this database),
        if it is still listed, else the one used last."""
        remembered = self._ui_state.state.open_session(self._database_key)
        if remembered is not None and self.sidebar.entry(remembered) is not None:
            await self.open_session(remembered)
            if self.current_id == remembered:
                return
        await self.open_newest_session()

    def _keep_ui_state(self, *, theme: bool = False) -> None:
        """Save the open session (and ``theme``: the theme) in the background for next run."""
        keeper = self._ui_state
        if keeper.path is None:
            return
        if theme:
            keeper.state = replace(keeper.state, theme=self.theme)
        if self.current_id is not None:
            keeper.state = keeper.state.with_open_session(self._database_key, self.current_id)
        self.run_worker(self._save_ui_state(), group="ui-state")

    async def _save_ui_state(self) -> None:
        try:
            await self._ui_state.save()
        except OSError as err:
            self.notify(
                sentence(
                    f"Could not keep the theme and open session for next time: {describe_error(err)}"
                ),
                severity="warning",
            )

    async def on_unmount(self) -> None:
        if self._remove_stop_handler is not None:
            self._remove_stop_handler()
        with contextlib.suppress(OSError):
            await self._drafts.flush()  # unsent drafts survive quitting
        with contextlib.suppress(OSError):
            await self._ui_state.save()  # a save cut short by quitting
        await self._stack.aclose()

    def _show_read_only_notice(self) -> None:
        text = f"{self._read_only_why()}: you can read sessions but not send."
        if self._unindexed_note is not None:  # search cannot find those sessions yet
            text += f" {self._unindexed_note[:1].upper()}{self._unindexed_note[1:]}."
        self.notice.show_notice(text, warning=True)

    # ------------------------------------------------------------------ drafts

    @on(TextArea.Changed, "#composer")
    def _draft_changed(self, event: TextArea.Changed) -> None:
        """The draft belongs to the open session; it is written out shortly after typing.

        (The composer is the message's own: when the app quits, the screen may already
        have lost its widgets by the time the last change arrives.)"""
        composer, session_id = event.text_area, self.current_id
        if isinstance(composer, Composer) and self._chat_screen is not None:
            self.meter.draft_changed(composer.draft)
        if self.control.editing is not None:
            return  # an edit is not the session's draft: the one it replaced is kept
        if (
            isinstance(composer, Composer)
            and session_id is not None
            and self._drafts.set(session_id, composer.draft)
        ):
            self._schedule_drafts_flush()

    def _schedule_drafts_flush(self) -> None:
        if not self._drafts_timer_armed:
            self._drafts_timer_armed = True
            self.set_timer(0.5, self._flush_drafts_soon)

    def _flush_drafts_soon(self) -> None:
        self._drafts_timer_armed = False
        self.run_worker(self._flush_drafts(), group="drafts")

    async def _flush_drafts(self) -> None:
        try:
            await self._drafts.flush()
        except OSError as err:
            self.log.warning(f"could not save drafts: {err!r}")

    def _enter_session_draft(self, previous: str | None, session_id: str) -> None:
        """Switching sessions: the open draft stays with the session it was typed in, the
        new session's own draft comes back, and notices about the old session go."""
        composer = self.composer
        if previous is not None:
            self._drafts.set(previous, composer.draft)
        # Text typed before any session existed goes into the first one opened.
        kept = composer.draft if previous is None else ""
        composer.set_draft(self._drafts.get(session_id) or kept)
        self.notice.clear()
        if getattr(self.runtime.store, "read_only", False):
            self._show_read_only_notice()
        self._schedule_drafts_flush()

    # ------------------------------------------------------------------ stop signals

    def on_mount(self) -> None:
        self._terminal_fds = terminal_fds()
        self._remove_stop_handler = install_stop_handler(
            asyncio.get_running_loop(), self._on_stop_signal
        )

    def _on_stop_signal(self, signum: int) -> None:
        """SIGTERM, or SIGHUP when the terminal closes: stop the reply as Esc does (the
        partial reply is stored, marked interrupted), then exit 128 + the signal number."""
        hung_up = terminal_gone(self._terminal_fds)
        if hung_up:  # drawing goes on until we exit: let it go nowhere instead of failing
            detach_from_terminal(self._terminal_fds)
        if self._cancel_prepare is not None:
            self._cancel_prepare.set()
        if self._interrupt is not None:
            self._interrupt.set()
        task = asyncio.get_running_loop().create_task(self._exit_after_stop(signum, hung_up))
        self._stopping.add(task)

    async def _exit_after_stop(self, signum: int, hung_up: bool) -> None:
        async def finished(worker: Worker[None]) -> None:
            with contextlib.suppress(Exception):  # its outcome is shown, not ours to raise
                await worker.wait()

        running = [w for w in self.workers if w.group in ("send", "compact") and w.is_running]
        if running:
            await asyncio.wait(
                [asyncio.ensure_future(finished(w)) for w in running], timeout=STOP_GRACE_SECONDS
            )
        if hung_up:
            # The terminal is gone: there is nothing to restore, and Textual's output
            # thread may already have died writing to it (its shutdown would then wait
            # forever). The reply is stored; close the store and leave.
            await self._stack.aclose()
            os._exit(stop_status(signum))
        self.exit(stop_status(signum))

    # ------------------------------------------------------------------ crashes

    def _fatal_error(self) -> None:
        """Textual's crash report, but without frame locals and with secrets redacted.

        Textual shows every frame's locals on a crash; in the model-call path those could
        hold a key or an ``Authorization`` header. Called inside the ``except`` that caught
        the crash, like the method it replaces.
        """
        import rich
        from rich.segment import Segments
        from rich.text import Text
        from rich.traceback import Traceback

        from core.secrets import redact

        self.bell()
        exc_type, exc_value, tb = sys.exc_info()
        if exc_value is None and self._exception is not None:  # called outside the except
            exc_value = self._exception
            exc_type, tb = type(exc_value), exc_value.__traceback__
        report: Traceback | Text
        if exc_type is None or exc_value is None:
            report = Text("dsh stopped after an unexpected error.")
        else:
            trace = Traceback.extract(exc_type, exc_value, tb, show_locals=False)
            for stack in trace.stacks:
                stack.exc_value = redact(stack.exc_value)
                stack.notes = [redact(note) for note in stack.notes]
                for frame in stack.frames:
                    frame.locals = None
            report = Traceback(trace, width=None, show_locals=False, suppress=[rich])
        self._exit_renderables.append(Segments(self.console.render(report, self.console.options)))
        self._close_messages_no_wait()

    # ------------------------------------------------------------------ ordinary faults

    def faults(self, doing: str) -> FaultGuard:
        """``with self.faults("rename the session"):`` around store calls: an ordinary
        fault (tui.app.faults) ends the block with a notice instead of crashing the app."""
        return FaultGuard(self.report_fault, doing)

    def report_fault(self, err: BaseException, doing: str) -> None:
        """The one place a failed store call is shown. The draft is never touched."""
        self.notice.show_notice(fault_message(err, doing), warning=isinstance(err, CompactionError))
        if isinstance(err, SessionNotFoundError):
            self.run_worker(self.refresh_sessions(), group="refresh-sessions")

    # ------------------------------------------------------------------ widgets

    @property
    def _main(self) -> ChatScreen:
        assert self._chat_screen is not None, "the main screen is built first"
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

    def watch_activity(self, activity: Activity) -> None:
        if self._chat_screen is not None and self._chat_screen.is_mounted:
            self.status.set_status(activity.status)
            # While preparing, Enter says how to cancel (the composer's SendBlocked).
            self.composer.send_enabled = self._can_send and not self.preparing

    @property
    def _read_only(self) -> bool:
        return self._runtime is not None and bool(getattr(self.runtime.store, "read_only", False))

    def _owner_if_not_mine(self, header: SessionHeader | None) -> str | None:
        """Who owns ``header``'s session when it is not the user (shared with them: they
        may read it, not write it); ``None`` for their own."""
        if header is None or header.owner is None or self._runtime is None:
            return None
        return None if header.owner == self.runtime.store.current_user() else header.owner

    @property
    def _foreign_owner(self) -> str | None:
        """The owner of the open session when it is someone else's."""
        return self._owner_if_not_mine(self.chat.header if self.chat is not None else None)

    @property
    def _can_send(self) -> bool:
        return not self._read_only and self._foreign_owner is None

    def _foreign_notice(self, owner: str) -> str:
        return (
            f"This session belongs to {single_line(owner, 40)} and is shared with you: "
            "you can read it and @-mention it, not write to it."
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``None`` (shown dimmed, does nothing) for an action that cannot run now;
        ``False`` (hidden) for one that waits until the reply, compaction, … is done."""
        if not action_available(action, self.activity.state):
            return False
        if action in CONTROL_ACTIONS:
            return self.control.check(action)
        if action in WRITING_ACTIONS and self._read_only:  # a replay, or a full disk
            return None
        if action in SESSION_WRITING_ACTIONS and self._foreign_owner is not None:
            return None
        if action in ("share_session", "unshare_session") and (
            self.chat is None or self._read_only
        ):
            return None
        if action in ("rename_session", "compact_session", "delete_session") and self.chat is None:
            return None
        if action == "answer_again" and not (self.chat is not None and self._unanswered):
            return None
        return super().check_action(action, parameters)

    def _can(self, action: str) -> bool:
        """For the palette's entries, which call the actions directly."""
        return bool(self.check_action(action, ()))

    def _say_busy(self, before: str) -> None:
        """Why ``before`` (e.g. "switching") cannot happen now: for the sidebar, the palette
        and Enter, which reach actions whose keys the footer shows dimmed."""
        state = self.activity.state
        if state not in (Busy.PREPARING, Busy.STREAMING):
            text = f"Wait a moment: {busy_reason(state)}."
        elif before == "sending":
            text = "Still busy with the last message; press Esc to stop it."
        else:
            text = f"Wait for the current reply (or press Esc) before {before}."
        self.notice.show_notice(text, warning=True)

    # ------------------------------------------------------------------ sessions

    async def refresh_sessions(self) -> None:
        with self.faults("read the session list"):
            headers = await self.runtime.query.list_sessions()
            titles = await self.runtime.query.read_titles()
            last_active = await self.runtime.query.read_last_event_times()
            self.sidebar.set_sessions(
                headers, titles, self.current_id, last_active, me=self.runtime.store.current_user()
            )
            self._update_title()
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

    def _label_of(self, session_id: str) -> str:
        entry = self.sidebar.entry(session_id)
        return entry.label if entry is not None else session_id

    def _update_title(self) -> None:
        bar = self._main.query_one("#title-bar", TitleBar)
        shown = self.profiles.shown()
        if self.chat is None:
            bar.show(None, None, None, shown)
            return
        entry = self.sidebar.entry(self.chat.session_id)
        bar.show(entry.label if entry else None, self.chat.session_id, self.chat.header.cwd, shown)

    async def open_session(self, session_id: str | None) -> None:
        """The one way the app changes the session it shows (startup, the sidebar and the
        palette through ``switch_to``, Ctrl+N, a deletion here or elsewhere): replay its
        current surface (windowed), bring its own draft and sent history to the composer,
        mark it in the sidebar and the title. ``None``: no session (the newcomer's guide)."""
        if session_id is None:
            self.chat = None
            self.control.leave_session()
            self.transcript.show_empty_state()
            self._set_unanswered(False)
            self._update_title()
            self.meter.refresh()
            return
        with self.faults("open the session") as guard:
            try:
                chat = await self.profiles.open_chat(session_id)
                window = await self._read_window(session_id)
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
        self._show_window(window)
        self.control.show_origin()
        self._set_unanswered(unanswered_message(window.events) is not None)
        self._update_title()
        self.profiles.tell_note(session_id)
        self.meter.refresh()
        self.composer.send_enabled = self._can_send and not self.preparing
        owner = self._foreign_owner
        if owner is not None:
            self.notice.show_notice(self._foreign_notice(owner), warning=True)
        if not self._read_only:  # (a read-only database says why itself, once)
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
            self._say_busy("switching")
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
            self._say_busy("opening a referenced session")
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
            self._say_busy("opening a referenced session")
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

    async def _read_window(self, session_id: str) -> SurfaceWindow:
        """The newest page of the session's surface (plus one event of context): opening a
        long session reads one page of rows and data, not the whole surface (the earlier
        seqs are read when an earlier page or older sent messages are wanted)."""
        return await self.runtime.query.read_surface_page(session_id, self.transcript.page_size + 1)

    def _show_window(self, window: SurfaceWindow) -> AwaitComplete:
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
            self.run_worker(self.refresh_sessions(), group="refresh-sessions")
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

    async def _ensure_session(self) -> ChatSession | None:
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

    @on(Sidebar.DeleteRequested)
    def _sidebar_delete(self, message: Sidebar.DeleteRequested) -> None:
        self._confirm_delete(message.session_id)

    # ------------------------------------------------------------------ sending

    @on(Composer.Submitted)
    def _submitted(self, message: Composer.Submitted) -> None:
        draft = message.text
        if not draft.strip():
            return
        if self.busy:
            self._say_busy("sending")
            return
        if (no_key := self.profiles.send_blocked()) is not None:  # nothing stored, draft kept
            self.notice.show_notice(f"{no_key} Your message was not sent.", warning=True)
            return
        self.notice.clear()
        self._send(draft, self.control.edit_seq(self.current_id))

    @on(Composer.SendBlocked)
    def _send_blocked(self) -> None:
        if self.preparing:
            self.notice.show_notice(
                "Preparing the referenced sessions… press Esc to cancel.", warning=True
            )
        elif getattr(self.runtime.store, "read_only", False):
            self.notice.show_notice(f"{self._read_only_why()}: sending is disabled.", warning=True)
        elif (owner := self._foreign_owner) is not None:
            self.notice.show_notice(self._foreign_notice(owner), warning=True)

    def _read_only_why(self) -> str:
        """Why the database is read-only, as the start of a sentence (a full disk, or not
        writable)."""
        reason = getattr(self.runtime.store, "read_only_reason", None)
        if not isinstance(reason, str) or not reason:
            return "This database is read-only"
        return reason[:1].upper() + reason[1:]

    @work(exclusive=True, group="send")
    async def _send(self, draft: str, edit_seq: int | None = None) -> None:
        """Send ``draft`` (``edit_seq``: in place of that message of the user's)."""
        with self.faults("start a new session for the message") as guard:
            chat = await self._ensure_session()
        if guard.failed or chat is None:
            return  # the draft is still in the composer
        # One reply at a time per session, across processes: before anything is stored.
        await self._leased(chat, lambda: self._send_leased(chat, draft, edit_seq))

    async def _leased(
        self,
        chat: ChatSession,
        work: Callable[[], Awaitable[None]],
        *,
        doing: str = "send the message",
        later: str = "Your draft is kept; send it when that reply is done.",
    ) -> None:
        """``work`` under ``chat``'s reply lease (a send, an edit, a retry): another writer
        replying in the session is a notice ending with ``later``, a fault taking or giving
        back the lease one saying what could not be done (``doing``); the draft is
        untouched."""
        try:
            async with chat.reply_lease():
                await work()
        except SessionBusyError as err:
            hint = unlock_hint(err)  # a holder not known to run here may be gone
            self.notice.show_notice(
                "This session is busy: another window or process is writing a reply. "
                + later
                + ("" if hint is None else f" If none is, {hint}."),
                warning=True,
            )
        except FAULTS as err:  # taking or giving back the lease: the draft is untouched
            self.report_fault(err, doing)

    async def _send_leased(self, chat: ChatSession, draft: str, edit_seq: int | None) -> None:
        composer = self.composer
        spans = find_session_reference_spans(draft)
        labels = {s.session_id: s.label for s in spans if s.session_id is not None}
        count = len(labels)
        composer.clear_draft()
        self._cancel_prepare = asyncio.Event()
        plural = "session" if count == 1 else "sessions"
        self.activity = Activity(
            Busy.PREPARING,
            f"Preparing {count} referenced {plural}… (Esc cancels)" if count else None,
        )  # the composer's Enter is blocked meanwhile (watch_activity)
        interrupt = asyncio.Event()  # Esc stops the reply (set once it streams)
        stream: AsyncIterator[EngineUpdate] | None = None
        try:
            if edit_seq is None:
                submitted = await chat.submit(draft, cancel=self._cancel_prepare)
            else:  # the edited message and the reply, one stream (ChatSession.edit)
                stream = chat.edit(
                    edit_seq, draft, cancel=self._cancel_prepare, interrupt=interrupt
                )
                submitted = await self.control.submitted(stream)
        except SessionReferenceError as err:
            self._restore_draft(draft)
            self.notice.show_notice(
                sentence(
                    describe_error(err, name_of=lambda sid: labels.get(sid) or self._label_of(sid))
                ),
                err.code,
            )
            return
        except FAULTS as err:
            self._restore_draft(draft)
            doing = "send the message" if edit_seq is None else "resend the edited message"
            self.report_fault(err, doing)
            return
        finally:
            self.activity = IDLE
            self._cancel_prepare = None
        composer.add_to_history(draft)
        self.transcript.follow()
        if stream is None:
            self.transcript.add_events(submitted.events)
        else:
            await self.control.edit_sent(chat)  # the replaced messages, folded
        self._set_unanswered(True)
        await self._stream_reply(chat, stream=stream, interrupt=interrupt)

    def _restore_draft(self, draft: str) -> None:
        """Put a draft that was not sent back into the composer, losing nothing.

        When the user typed something meanwhile, the failed draft goes first, then a line
        break, then what they typed, with their cursor where it was: both texts stay in
        view and editable (sent history would hide the draft, and only sent messages
        belong there), in the order they were written.
        """
        composer = self.composer
        if not composer.draft:
            composer.set_draft(draft)
        else:
            composer.insert(draft + "\n", (0, 0))

    async def _stream_reply(
        self,
        chat: ChatSession,
        *,
        again: bool = False,
        stream: AsyncIterator[EngineUpdate] | None = None,
        interrupt: asyncio.Event | None = None,
    ) -> None:
        """Stream the reply to the message just sent, or (``again``) to the last one left
        unanswered by a reply that failed, or the reply updates of ``stream`` (a retry, an
        edit: made with ``interrupt``, which Esc then sets)."""
        self._interrupt = interrupt if interrupt is not None else asyncio.Event()
        replying = Activity(Busy.STREAMING, "Replying… (Esc stops)")
        self.activity = replying
        view = self.transcript.begin_reply()
        if stream is not None:
            updates = stream
        elif again:
            updates = chat.reply_to_last(interrupt=self._interrupt)
        else:
            updates = chat.reply(interrupt=self._interrupt)
        try:
            waiting = False
            async for update in updates:
                if isinstance(update, ReplyDelta):
                    if waiting:
                        waiting = False
                        self.activity = replying
                    view.append(update.kind, update.text)
                elif isinstance(update, ReplyWaiting):
                    waiting = True
                    self.activity = Activity(
                        Busy.STREAMING,
                        f"Waiting {update.seconds_text} before retrying (Esc stops): "
                        f"{single_line(update.reason, 160)}",
                    )
                elif isinstance(update, ReplyFinished):
                    error = str(update.error) if update.error is not None else None
                    lost = update.store_error if update.status == "error" else None
                    if lost is not None:  # said beside the reply too: the notice line moves on
                        error = f"{lost} — the reply so far is saved"
                    view.finish(update.status, error, event=update.message_event)
                    self._set_unanswered(update.message_event is None)
                    if lost is not None:
                        self.notice.show_notice(
                            "The connection to the server was lost mid-reply: "
                            f"{describe_error(lost)}. The reply so far is saved, marked as "
                            "failed; r on it asks again.",
                            warning=True,
                        )
                    elif update.status == "error" and error is not None:
                        self.notice.show_notice(
                            f"The model failed: {single_line(error, 200)}. "
                            + (
                                "Your message and the partial reply are saved."
                                if update.message_event is not None
                                else "Your message is saved; press Ctrl+R to ask again."
                            )
                        )
                elif isinstance(update, TitleChanged):
                    await self.refresh_sessions()
        except LeaseLostError as err:
            # Another process writes the session now (`dsh unlock`): what streamed stays in
            # view, and its writes show as any other window's do.
            words = describe_error(err)
            view.finish("error", words)
            self.notice.show_notice(sentence(words), warning=True)
        except ReplyUnsavedError as err:  # the server stayed away: the reply waits here
            view.finish("error", f"{err} — {KEPT_WORDS}")
            self._set_unanswered(False)
            self.notice.show_notice(
                f"The server is unreachable: {describe_error(err)}. Your message is saved; "
                f"{KEPT_WORDS}.",
                warning=True,
            )
        except FAULTS as err:
            view.finish("error", str(err))
            self.notice.show_notice(self._reply_not_stored(err))
        finally:
            self.activity = IDLE
            self._interrupt = None
            self.meter.refresh()

    def _reply_not_stored(self, err: BaseException) -> str:
        """What a store failure during a reply left, and how to go on (one line)."""
        if not self._unanswered:
            return sentence(f"Could not save the reply: {describe_error(err)}")
        then = "Free some space, then press" if isinstance(err, DiskFullError) else "Press"
        return (
            f"Your message is saved; the reply could not be stored: {describe_error(err)}. "
            f"{then} Ctrl+R to answer it."
        )

    def _set_unanswered(self, value: bool) -> None:
        if value != self._unanswered:
            self._unanswered = value
            self.refresh_bindings()

    def action_answer_again(self) -> None:
        """Ctrl+R: answer the last message again, after a reply that could not be stored."""
        if self.busy:  # only from the palette: the key is dimmed
            self._say_busy("answering again")
            return
        if self.chat is None:
            return
        if not self._can("answer_again"):
            self.notice.show_notice(
                "Nothing to answer: the last message already has a reply.", warning=True
            )
            return
        if (no_key := self.profiles.send_blocked()) is not None:
            self.notice.show_notice(no_key, warning=True)
            return
        self.notice.clear()
        self._answer_again(self.chat)

    @work(exclusive=True, group="send")
    async def _answer_again(self, chat: ChatSession) -> None:
        self.transcript.follow()
        await self._stream_reply(chat, again=True)

    def action_cancel(self) -> None:
        """Esc: cancel preparation (draft kept) or stop a streaming reply (partial kept);
        otherwise close the Keys panel and clear the notice. Either way, back to the composer."""
        if self._cancel_prepare is not None:
            self._cancel_prepare.set()
        elif self._interrupt is not None:
            self._interrupt.set()
        elif self.control.cancel_edit():
            pass  # the edit is dropped, the earlier draft is back
        else:
            if self.screen.query(HelpPanel):
                self.action_hide_help_panel()
            self.notice.clear()
        if self.screen is self._chat_screen and not self.composer.has_focus:
            self.composer.focus()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ conversation control

    def action_retry_reply(self) -> None:
        """``r`` on a message (or the palette): answer the last request again."""
        self.control.retry()

    def action_edit_message(self) -> None:
        """``e`` on one of your messages (or the palette): edit it and resend."""
        self.control.edit()

    def action_fork_session(self) -> None:
        """``f`` on a message (or the palette): a new session up to that message."""
        self.control.fork()

    def action_focus_messages(self) -> None:
        """Ctrl+Up: from the composer to the newest message (Up/Down then walk them)."""
        self.transcript.focus_last_item()

    @on(ForkBanner.OpenParent)
    def _open_parent(self, message: ForkBanner.OpenParent) -> None:
        self.switch_to(message.session_id)

    @on(Foldable.TypedAhead)
    @on(MessageItem.TypedAhead)
    def _typed_on_a_card(self, message: Foldable.TypedAhead | MessageItem.TypedAhead) -> None:
        """A key typed on a focused card is for the composer: it gets the key itself, so
        what the key means there (``@`` opens the picker) holds too."""
        composer = self.composer
        composer.focus()
        composer.post_message(events.Key(message.key, message.character))

    # ------------------------------------------------------------------ actions

    def action_new_session(self) -> None:
        if self.busy:  # only from the palette: the key is dimmed
            self._say_busy("starting a new session")
            return
        self.activity = Activity(Busy.CREATING, "Creating a session…")  # may take a while
        self._new_session()

    @work(group="new-session")
    async def _new_session(self) -> None:
        try:
            with self.faults("create a session"):
                header = await self.runtime.store.create_session(cwd=self._cwd)
                await self.refresh_sessions()
                await self.open_session(header.id)
                self.composer.focus()
        finally:
            self.activity = IDLE

    def action_rename_session(self) -> None:
        if self.chat is None:  # only from the palette: the key is dimmed
            return
        chat = self.chat

        async def done(title: str | None) -> None:
            if title:
                with self.faults("rename the session"):
                    await chat.rename(title)
                    await self.refresh_sessions()

        entry = self.sidebar.entry(chat.session_id)
        self.push_screen(RenameScreen(entry.title or "" if entry else ""), done)

    def action_delete_session(self) -> None:
        if self.chat is not None:
            self._confirm_delete(self.chat.session_id)

    def _confirm_delete(self, session_id: str) -> None:
        if self.busy:  # the key is dimmed; the sidebar's delete key says why
            self._say_busy("deleting")
            return
        entry = self.sidebar.entry(session_id)
        owner = self._owner_if_not_mine(entry.header if entry is not None else None)
        if owner is not None:  # the sidebar's delete key on a session shared with you
            self.notice.show_notice(
                f"Only {single_line(owner, 40)} can delete this session (it is shared with you).",
                warning=True,
            )
            return

        async def done(confirmed: bool | None) -> None:
            if not confirmed:
                return
            with (
                self.faults("delete the session") as guard,
                contextlib.suppress(SessionNotFoundError),  # deleted elsewhere: just as well
            ):
                await self.runtime.store.delete_session(session_id)
            if guard.failed:
                return
            if self.current_id == session_id:
                self.chat = None
            await self.refresh_sessions()
            if self.chat is None:
                await self.open_newest_session()

        self.push_screen(
            ConfirmScreen(delete_question(self._label_of(session_id), session_id)), done
        )

    def action_share_session(self) -> None:
        """From the palette: share the open session (one's own) with a user, read-only."""
        self._ask_user_to_share(share=True)

    def action_unshare_session(self) -> None:
        """From the palette: stop sharing the open session with a user."""
        self._ask_user_to_share(share=False)

    def _ask_user_to_share(self, *, share: bool) -> None:
        if self.chat is None or not self._can("share_session"):
            if self._foreign_owner is not None:
                self.notice.show_notice(self._foreign_notice(self._foreign_owner), warning=True)
            return
        session_id = self.chat.session_id
        label = self._label_of(session_id)

        async def done(user: str | None) -> None:
            if user:
                self._share(session_id, label, user, share)

        question = share_question(label, session_id, share=share)
        self.push_screen(UserNameScreen(question, "Share" if share else "Stop sharing"), done)

    @work(group="share")
    async def _share(self, session_id: str, label: str, user: str, share: bool) -> None:
        store = self.runtime.store
        doing = "share the session" if share else "stop sharing the session"
        with self.faults(doing) as guard:
            changed = await (store.share if share else store.unshare)(session_id, user)
        if guard.failed:
            return
        who, what = single_line(user, 40), single_line(label, 60)
        if share:
            text = (
                f"Shared {what} with {who} (read-only)."
                if changed
                else (f"{what} was already shared with {who}.")
            )
        else:
            text = (
                f"{what} is no longer shared with {who}."
                if changed
                else (f"{what} was not shared with {who}.")
            )
        self.notify(text, markup=False)

    def action_compact_session(self) -> None:
        """F4: ask first (the model sees only the summary afterwards), then compact."""
        if self.busy:  # only from the palette: the key is dimmed
            self._say_busy("compacting")
            return
        if self.chat is None:
            return
        session_id = self.chat.session_id

        def done(confirmed: bool | None) -> None:
            if confirmed and self.current_id == session_id:
                self._compact_session()

        self.push_screen(
            ConfirmScreen(
                compact_question(self._label_of(session_id), session_id), confirm_label="Compact"
            ),
            done,
        )

    def _compact_session(self) -> None:
        if self.chat is not None and not self.busy:  # it may have started while asking
            self.activity = Activity(Busy.COMPACTING, "Compacting…")
            self._compact(self.chat)

    @work(exclusive=True, group="compact")
    async def _compact(self, chat: ChatSession) -> None:
        try:
            with self.faults("compact the session") as guard:
                result = await chat.compact()
                if self.chat is chat:
                    self._show_window(await self._read_window(chat.session_id))
        finally:
            self.activity = IDLE
            self.meter.refresh()
        if not guard.failed:
            self.notify(f"Compacted {len(result.shadowed)} messages into a summary.", markup=False)

    NARROW = 80

    def _fit_sidebar(self, width: int) -> None:
        """Narrow terminals start without the sidebar (Ctrl+B still shows it)."""
        if self._sidebar_choice is None:
            self.sidebar.set_class(width < self.NARROW, "-hidden")

    def on_resize(self, event: events.Resize) -> None:
        if self._chat_screen is not None and self._chat_screen.query("#sidebar"):
            self._fit_sidebar(event.size.width)

    def action_toggle_sidebar(self) -> None:
        self._sidebar_choice = self.sidebar.has_class("-hidden")
        self.sidebar.toggle_class("-hidden")
        if self.sidebar.has_class("-hidden"):
            self.composer.focus()

    def action_focus_sessions(self) -> None:
        self.sidebar.remove_class("-hidden")
        self.sidebar.filter_input.focus()

    async def action_copy_last_reply(self) -> None:
        text = self.transcript.last_reply_text()
        if not text and self.transcript.unread_count and self.chat is not None:
            # Not among the items read so far: look through the whole surface.
            with self.faults("read the last reply") as guard:
                snapshot = await self.runtime.query.read_surface(self.chat.session_id)
                text = last_assistant_text(snapshot.events)
            if guard.failed:
                return
        if not text:
            self.notify("There is no reply to copy yet.", markup=False, severity="warning")
            return
        self.copy_to_clipboard(text)
        self.notify("Copied the last reply to the clipboard.", markup=False)

    async def action_export(self, fmt: str = "md") -> None:
        if self.chat is None:
            return
        chat = self.chat
        header = chat.header
        with self.faults("export the session") as guard:
            if fmt == "json":
                events = await self.runtime.store.read_events(header.id)
                lines = list(export_jsonl(header, events))
            else:
                history, taken = whole_history(await self.runtime.store.read_events(header.id))
                entry = self.sidebar.entry(header.id)
                lines = export_markdown(header, entry.title if entry else None, history, taken)
        if guard.failed:
            return
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in header.id)[:40] or "session"
        suffix = ".jsonl" if fmt == "json" else ".md"
        try:  # a new name (`dsh-x (2).md`) when the file exists: never overwrite one
            path = await asyncio.to_thread(
                write_new_file, Path(self._cwd), f"dsh-{safe}", suffix, "\n".join(lines) + "\n"
            )
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or err
            self.notice.show_notice(f"Could not export: {single_line(str(reason), 200)}")
            return
        self.notify(f"Exported to {single_line(str(path))}", markup=False)

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        """Textual's SVG of the screen, well-formed XML whatever the screen holds."""
        return xml_safe(super().export_screenshot(title=title, simplify=simplify))

    def deliver_screenshot(
        self,
        filename: str | None = None,
        path: str | None = None,
        time_format: str | None = None,
    ) -> str | None:
        """ "Save screenshot": into the downloads folder (created if missing), else the
        working directory; the notice names the file, or says why it could not be saved."""
        from textual._files import generate_datetime_filename

        svg = self.export_screenshot()
        name = filename or generate_datetime_filename(self.title, ".svg", time_format)
        folders = [Path(path)] if path else [screenshot_directory(), Path(self._cwd)]

        async def save() -> None:
            try:
                saved = await asyncio.to_thread(save_screenshot_file, svg, name, folders)
            except OSError as err:
                reason = err.strerror or str(err)
                where = f" in {err.filename}" if err.filename else ""
                self.notify(
                    single_line(f"Could not save the screenshot{where}: {reason}", 300),
                    severity="error",
                )
                return
            self.notify(f"Saved the screenshot to {single_line(str(saved))}")

        self.run_worker(save(), group="screenshot")
        return None

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "New session", "Start a new chat session (Ctrl+N)", self.action_new_session
        )
        yield self.profiles.system_command()
        yield SystemCommand(
            "Rename session", "Give the current session a title (F2)", self.action_rename_session
        )
        yield SystemCommand(
            "Compact session",
            "Replace the conversation by a summary (F4)",
            self.action_compact_session,
        )
        yield SystemCommand(
            "Delete session", "Delete the current session (F8)", self.action_delete_session
        )
        if self._foreign_owner is None:
            yield SystemCommand(
                "Share session…",
                "Let another user read this session (they cannot change it)",
                self.action_share_session,
            )
            yield SystemCommand(
                "Unshare session…",
                "Stop sharing this session with a user",
                self.action_unshare_session,
            )
        yield SystemCommand(
            "Export as Markdown",
            "Write the conversation to a .md file in the working directory",
            lambda: self.run_worker(self.action_export("md")),
        )
        yield SystemCommand(
            "Export as JSONL",
            "Write the raw log (importable with dsh import)",
            lambda: self.run_worker(self.action_export("json")),
        )
        yield SystemCommand(
            "Answer again",
            "Answer the last message, whose reply could not be stored (Ctrl+R)"
            if self._unanswered
            else "Nothing to answer now: the last message has a reply",
            self.action_answer_again,
        )
        yield from self.control.commands(screen)
        yield SystemCommand(
            "Copy last reply",
            "Copy the newest assistant reply to the clipboard",
            lambda: self.run_worker(self.action_copy_last_reply()),
        )
        yield SystemCommand(
            "Toggle sidebar", "Show or hide the session list (Ctrl+B)", self.action_toggle_sidebar
        )


KEPT_WORDS = "the reply shown is kept here and saved with your next message in this session"
"""What became of a reply whose server stayed away (``ReplyUnsavedError``)."""


def run_app(config: DshConfig, runtime: Runtime | None = None) -> int:
    """Run the TUI; returns the process exit code. With ``runtime`` (a replay), on that
    runtime, keeping no drafts and no theme."""
    app = DshApp(
        runtime,
        config=config,
        offline_delay=offline_delay_from_env(os.environ, 0.01),
        state_path=default_state_path() if runtime is None else None,
        keep_drafts=runtime is None,
    )
    code = app.run()
    if app.startup_error:
        print(f"dsh: error: {app.startup_error}", file=sys.stderr)
        return 1
    if app.return_code:  # a crash: Textual printed the report and set a non-zero code
        return app.return_code
    return int(code or 0)

"""The dsh Textual app: session list, transcript, composer, and the send flow.

The app builds nothing itself beyond the widgets: it is handed a ``Runtime`` (store, query,
service, provider), or a config to open one. Every store call is awaited off the UI's
event loop (aiosqlite), long work runs in workers, and untrusted text is only ever
rendered as ``rich.text.Text``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path, PurePath
from typing import ClassVar

from textual import events, work
from textual.app import App
from textual.screen import Screen
from textual.widgets import Input

from core.config import DshConfig
from core.display import single_line
from core.errors import DshError, StoreError, StoreUnreachableError
from core.log import now_ms
from core.search import unindexed_notice
from tui.app.actions import AppActions
from tui.app.busy import IDLE, Activity, Busy
from tui.app.commands import ReferenceCommands, SessionCommands
from tui.app.control import ConversationControl
from tui.app.drafts import DraftKeeper, drafts_path
from tui.app.follow import StoreFollower
from tui.app.host import run_in_worker
from tui.app.keys import SESSION_WRITING_ACTIONS, WRITING_ACTIONS
from tui.app.lifetime import STOP_GRACE_SECONDS
from tui.app.meter import ContextMeter
from tui.app.opening import HISTORY_EVENTS, SOURCE_GONE
from tui.app.parts import MESSAGE_PLACEHOLDER, ChatScreen
from tui.app.profiles import ProfileKeeper
from tui.app.screenshot import save_screenshot_file, screenshot_directory, xml_safe
from tui.app.sending import KEPT_WORDS
from tui.app.uistate import UiStateKeeper, default_state_path
from tui.app.waiting import RETRY_SECONDS, open_when_reachable
from tui.shared.errors import describe_error
from tui.shared.progress import indexing_words
from tui.shared.runtime import Runtime, offline_delay_from_env, open_runtime

__all__ = [
    "HISTORY_EVENTS",
    "KEPT_WORDS",
    "MESSAGE_PLACEHOLDER",
    "SESSION_WRITING_ACTIONS",
    "SOURCE_GONE",
    "STOP_GRACE_SECONDS",
    "WRITING_ACTIONS",
    "ChatScreen",
    "DshApp",
    "run_app",
]


class DshApp(AppActions):
    """dsh in the terminal."""

    CSS_PATH: ClassVar[list[str | PurePath]] = ["app.tcss"]
    TITLE = "dsh"
    COMMANDS = App.COMMANDS | {SessionCommands, ReferenceCommands}
    ENABLE_COMMAND_PALETTE = True

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
        self.chat = None
        self._cancel_prepare = None
        self._interrupt = None
        self.startup_error: str | None = None
        self.connect_retry_seconds = RETRY_SECONDS  # while the server cannot be reached
        self._sidebar_choice = None  # None until the user toggles it
        self._remove_stop_handler = None
        self._terminal_fds = ()
        self._stopping = set()
        self._unanswered = False  # the open session ends with a message nothing answered
        self._ui_state = UiStateKeeper(state_path)
        self._keep_drafts = keep_drafts
        self.meter = ContextMeter(self)
        self.profiles = ProfileKeeper(self, self.meter)
        self.follower = StoreFollower(self, self.profiles, self.meter)
        self.control = ConversationControl(self)  # retry, edit and resend, fork
        self._drafts = DraftKeeper(None)
        self._history_window = None
        self._drafts_timer_armed = False
        self._unindexed_note = None
        self._damage_told = ()

    # ------------------------------------------------------------------ set-up

    async def on_event(self, event: events.Event) -> None:
        # An ``Input`` (rename, session filter, command palette) draws its value as is: what
        # is pasted into one gets its first line made safe with the one escaping rule. (The
        # composer draws unsafe characters visibly itself; its text is kept exact.)
        if isinstance(event, events.Paste) and isinstance(self.focused, Input) and event.text:
            event = events.Paste(single_line(event.text.splitlines()[0]))
        await super().on_event(event)

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
            composer.placeholder = f"{self.read_only_why()}: nothing can be sent"
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

        run_in_worker(self, save, group="screenshot")
        return None


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

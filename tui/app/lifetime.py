"""What outlives the moment in the app: the theme and open session kept for the next run,
the unsent drafts kept per session, the stop signals (SIGTERM, SIGHUP: the reply in flight
stores what it received, then the app exits), and the crash report (no frame locals,
secrets redacted)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import replace

from textual import on
from textual.widgets import TextArea
from textual.worker import Worker

from tui.app.composer.composer import Composer
from tui.app.host import run_in_worker
from tui.app.keys import AppKeys
from tui.shared.errors import describe_error, sentence
from tui.shared.signals import (
    detach_from_terminal,
    install_stop_handler,
    stop_status,
    terminal_fds,
    terminal_gone,
)

__all__ = ["STOP_GRACE_SECONDS", "AppLifetime"]

STOP_GRACE_SECONDS = 10.0
"""After SIGTERM/SIGHUP, how long a reply in flight gets to store what it received."""


class AppLifetime(AppKeys):
    """Kept state, drafts, stop signals and the crash report."""

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

    def _keep_ui_state(self, *, theme: bool = False) -> None:
        """Save the open session (and ``theme``: the theme) in the background for next run."""
        keeper = self._ui_state
        if keeper.path is None:
            return
        if theme:
            keeper.state = replace(keeper.state, theme=self.theme)
        if self.current_id is not None:
            keeper.state = keeper.state.with_open_session(self._database_key, self.current_id)
        run_in_worker(self, self._save_ui_state, group="ui-state")

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
        text = f"{self.read_only_why()}: you can read sessions but not send."
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

    def keep_draft(self, session_id: str, draft: str) -> None:
        """Keep ``draft`` as ``session_id``'s draft (written out shortly after)."""
        if self._drafts.set(session_id, draft):
            self._schedule_drafts_flush()

    def _schedule_drafts_flush(self) -> None:
        if not self._drafts_timer_armed:
            self._drafts_timer_armed = True
            self.set_timer(0.5, self._flush_drafts_soon)

    def _flush_drafts_soon(self) -> None:
        self._drafts_timer_armed = False
        run_in_worker(self, self._flush_drafts, group="drafts")

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

"""What the app's helpers may use of the app: ``AppHost``, one named interface.

The follower (``tui.app.follow``), the palette's session commands (``tui.app.commands``),
the conversation control (``tui.app.control``), the context meter (``tui.app.meter``) and
the profile keeper (``tui.app.profiles``) are handed the app as an ``AppHost``: they see its
widgets, its open session, its busy state and the few steps of its flows they take part in,
under public names, and never import the app's module (``DshApp`` satisfies the protocol;
mypy checks it where the app builds them). The helpers the app holds that others need
(the meter, the profile keeper) are handed to them by the app when it builds them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol

from textual import Logger
from textual.await_complete import AwaitComplete
from textual.dom import DOMNode
from textual.screen import Screen
from textual.timer import Timer, TimerCallback
from textual.worker import Worker
from textual.worker_manager import WorkerManager

from core.engine import ChatSession, EngineUpdate
from core.query import SurfaceWindow
from tui.app.busy import Activity
from tui.app.composer.composer import Composer
from tui.app.faults import FaultGuard
from tui.app.sidebar.sidebar import Sidebar
from tui.app.statusbar import NoticeBar, StatusLine
from tui.app.transcript.transcript import Transcript
from tui.shared.runtime import Runtime

__all__ = ["AppHost", "run_in_worker"]


class AppHost(Protocol):
    """The app as its helpers see it (``tui.app.app.DshApp`` is one)."""

    # -- Textual's own, used as the app's helpers' event loop ---------------------------

    @property
    def log(self) -> Logger: ...

    @property
    def workers(self) -> WorkerManager: ...

    @property
    def screen(self) -> Screen[object]: ...

    def run_worker(
        self,
        work: Callable[[], Coroutine[Any, Any, None]],
        *,
        group: str = ...,
        exit_on_error: bool = ...,
        exclusive: bool = ...,
    ) -> Worker[None]: ...

    def cancel_workers(self, group: str) -> None:
        """Cancel the app's workers of ``group``."""

    def set_interval(
        self, interval: float, callback: TimerCallback | None = ..., *, name: str | None = ...
    ) -> Timer: ...

    def set_timer(self, delay: float, callback: TimerCallback | None = ...) -> Timer: ...

    def notify(self, message: str) -> None: ...

    def push_screen(self, screen: Screen[Any]) -> object: ...

    # -- the store and the open session --------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The store, query, service and config (once ``has_runtime``)."""

    @property
    def has_runtime(self) -> bool:
        """Whether the runtime is open yet."""

    chat: ChatSession | None
    """The open session (``None``: none); a profile switch replaces it."""

    @property
    def current_id(self) -> str | None:
        """The open session's id."""

    activity: Activity
    """What the app is busy with (a helper's own work sets it, then ``IDLE`` again)."""

    @property
    def busy(self) -> bool:
        """Whether the app is busy (a reply, a compaction, …): nothing else starts."""

    @property
    def read_only(self) -> bool:
        """The database takes no writes (a replay, a full disk)."""

    @property
    def foreign_owner(self) -> str | None:
        """The owner of the open session when it is someone else's (shared with the user)."""

    def read_only_why(self) -> str:
        """Why the database is read-only, as the start of a sentence."""

    def foreign_notice(self, owner: str) -> str:
        """What the notice line says of a session ``owner`` shared with the user."""

    def say_busy(self, before: str) -> None:
        """Say in the notice line why ``before`` (e.g. "forking") cannot happen now."""

    def faults(self, doing: str) -> FaultGuard:
        """``with host.faults("fork the session"):``: an ordinary fault is a notice."""

    # -- the widgets ---------------------------------------------------------------------

    @property
    def main_screen(self) -> Screen[None] | None:
        """The main screen, once built."""

    @property
    def composer(self) -> Composer: ...

    @property
    def transcript(self) -> Transcript: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def notice(self) -> NoticeBar: ...

    @property
    def status(self) -> StatusLine: ...

    def label_of(self, session_id: str) -> str:
        """How the session list names a session (its id when not listed)."""

    def update_title(self) -> None:
        """Show the open session (and its profile) in the title bar again."""

    # -- sessions --------------------------------------------------------------------------

    async def refresh_sessions(self) -> None:
        """Read the session list again."""

    async def open_session(self, session_id: str | None) -> None:
        """Show ``session_id`` (the one way the shown session changes)."""

    def switch_to(self, session_id: str, *, seq: int | None = None) -> None:
        """Open ``session_id`` because the user chose it."""

    def open_referenced_session(self, session_id: str, name: str | None = None) -> None:
        """Open a reference card's source, when it is there and may be read."""

    async def session_deleted_elsewhere(self, session_id: str) -> None:
        """The open session was deleted by another window: open another."""

    async def ensure_session(self) -> ChatSession | None:
        """The open session, or a new one."""

    async def read_window(self, session_id: str) -> SurfaceWindow:
        """The newest page of the session's surface, as opening it reads it."""

    def show_window(self, window: SurfaceWindow) -> AwaitComplete:
        """Show ``window`` in the transcript (its earlier pages read when wanted)."""

    # -- sending ---------------------------------------------------------------------------

    async def leased(
        self,
        chat: ChatSession,
        work: Callable[[], Awaitable[None]],
        *,
        doing: str = ...,
        later: str = ...,
    ) -> None:
        """``work`` under ``chat``'s reply lease (another writer: a notice, draft kept)."""

    async def stream_reply(
        self,
        chat: ChatSession,
        *,
        again: bool = ...,
        stream: AsyncIterator[EngineUpdate] | None = ...,
        interrupt: asyncio.Event | None = ...,
    ) -> None:
        """Stream a reply into the transcript, as a send does (Esc sets ``interrupt``)."""

    def set_unanswered(self, value: bool) -> None:
        """Whether the open session ends with a message nothing answered (Ctrl+R)."""

    def restore_draft(self, draft: str) -> None:
        """Put a draft that was not sent back into the composer, losing nothing."""

    def keep_draft(self, session_id: str, draft: str) -> None:
        """Keep ``draft`` as ``session_id``'s draft across runs."""

    # -- the conversation control's actions (the palette's entries call them) ------------

    def action_retry_reply(self) -> None: ...

    def action_edit_message(self) -> None: ...

    def action_fork_session(self) -> None: ...


def run_in_worker(
    node: DOMNode, work: Callable[[], Coroutine[Any, Any, None]], *, group: str = "default"
) -> Worker[None]:
    """``node.run_worker(work)``, typed for a coroutine function. The app's workers are
    given functions, not coroutines: a worker cancelled before it starts (by a newer one
    of its exclusive group, or as the app closes) then leaves no coroutine that was never
    awaited, which Python warns of."""
    worker: Worker[None] = node.run_worker(work, group=group)
    return worker

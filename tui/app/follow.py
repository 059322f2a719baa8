"""Following the database: what other windows and processes write shows up in this one.

Twice a second the app asks the store for its change token (``PRAGMA data_version`` for
SQLite: one cheap query, off the event loop; for PostgreSQL a count of the other clients'
commits heard through LISTEN/NOTIFY, no query at all, and a lost connection reopened there,
which the notice line reports). When it moved, the session list is read again
(the filter and the highlighted row are kept) and, unless this window is itself busy
(preparing or streaming a reply, compacting), the open session's transcript takes the new events: appended ones
are added at the end, anything else (a compaction elsewhere) reloads its newest page.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import DshError, SessionNotFoundError
from core.log import Event
from core.query import SurfaceWindow
from tui.app.host import AppHost
from tui.app.meter import ContextMeter
from tui.app.profiles import ProfileKeeper

__all__ = ["FOLLOW_INTERVAL_SECONDS", "StoreFollower", "appended_tail"]

FOLLOW_INTERVAL_SECONDS = 0.5


def appended_tail(window: SurfaceWindow, known: frozenset[int]) -> Sequence[Event] | None:
    """The events ``window`` holds beyond ``known`` when they were only appended after it
    (``()`` when nothing is new); ``None`` when the surface changed otherwise (a replace
    shadowed known events, or more arrived than the window read) and must be reloaded.

    A window that is not ``complete`` holds only the newest rows, none of them a replace:
    then nothing known was shadowed when those rows reach back into ``known`` and every
    known seq from its first row on is among them."""
    seqs = window.seqs
    cut = len(seqs)
    while cut and seqs[cut - 1] not in known:
        cut -= 1
    fresh = len(seqs) - cut
    if fresh > len(window.events):
        return None
    if window.complete:
        if cut != len(known) or set(seqs[:cut]) != known:
            return None
    else:
        inside = set(seqs[:cut])
        if not cut or not inside <= known:
            return None
        if any(seq >= seqs[0] and seq not in inside for seq in known):
            return None
    return window.events[len(window.events) - fresh :] if fresh else ()


class StoreFollower:
    """Polls the store for changes made elsewhere and brings the app up to date."""

    def __init__(self, app: AppHost, profiles: ProfileKeeper, meter: ContextMeter) -> None:
        self._app = app
        self._profiles = profiles
        self._meter = meter
        self._seen: int | None = None  # the token the whole app is up to date with
        self._listed: int | None = None  # the token the session list is up to date with
        self._checking = False

    async def prime(self) -> None:
        """Note the store's state before the app's first read: only later changes count."""
        try:
            self._seen = self._listed = await self._app.runtime.store.change_token()
        except DshError:
            self._seen = self._listed = None  # the first tick then looks at everything

    def start(self) -> None:
        self._app.set_interval(FOLLOW_INTERVAL_SECONDS, self._tick, name="follow-store")

    def _tick(self) -> None:
        if self._checking:
            return  # the last check is still reading: never queue behind it
        self._checking = True
        # A look that ends while the app closes (its widgets already gone) must not take
        # the app down with it: it is only a look, and the next tick looks again.
        self._app.run_worker(self._check_quietly, group="follow-store", exit_on_error=False)

    async def _check_quietly(self) -> None:
        try:
            await self.check()
        except DshError:
            pass  # a busy or failing store: the next tick looks again
        finally:
            self._checking = False
            self._tell_connection_news()

    def _tell_connection_news(self) -> None:
        """A store on a server says when its connection was lost and when it is back
        (``take_notice``); the user reads it in the notice line."""
        app = self._app
        take = getattr(app.runtime.store, "take_notice", None) if app.has_runtime else None
        news = take() if callable(take) else None
        if news is not None:
            message, warning = news
            app.notice.show_notice(message, warning=warning)

    async def check(self) -> bool:
        """One look at the store; ``True`` when it had changed and the app was updated."""
        app = self._app
        if not app.has_runtime:
            return False
        token = await app.runtime.store.change_token()
        if token == self._seen:
            return False
        if token != self._listed:
            await self._refresh_sidebar()
            self._listed = token
        if app.busy:
            return True  # not marked seen: the transcript follows once the reply is stored
        await self._profiles.follow()  # its profile switched elsewhere (dsh send --profile)
        if await self._follow_transcript():
            self._seen = token
        return True

    async def _refresh_sidebar(self) -> None:
        app = self._app
        sidebar = app.sidebar
        options = sidebar.option_list
        visible = sidebar.visible_ids
        index = options.highlighted
        highlighted = visible[index] if index is not None and 0 <= index < len(visible) else None
        await app.refresh_sessions()
        if highlighted is not None and highlighted != app.current_id:
            visible = sidebar.visible_ids
            if highlighted in visible:
                options.highlighted = visible.index(highlighted)

    async def _follow_transcript(self) -> bool:
        """Bring the open session's transcript up to date; ``False`` when the app got busy
        meanwhile (look again later)."""
        app = self._app
        chat = app.chat
        if chat is None:
            return True
        session_id = chat.session_id
        store = app.runtime.store
        try:
            last = await store.last_surface_seq(session_id)
            known = app.transcript.known_seqs
            if (last is None and not known) or last in known:
                return True
            window = await app.read_window(session_id)
        except SessionNotFoundError:
            if app.chat is chat and not app.busy:
                await app.session_deleted_elsewhere(session_id)
            return True
        if app.chat is not chat or app.busy:
            return False
        tail = appended_tail(window, app.transcript.known_seqs)
        if tail is None:
            app.show_window(window)
        elif tail or window.unknown:
            app.transcript.add_events(tail, window.unknown, through=window.captured_through_seq)
        self._meter.refresh()  # its surface changed: so did the next request
        return True

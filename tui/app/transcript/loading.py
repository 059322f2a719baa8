"""Loading the transcript: everything replaced by the replay of a session's surface, read
whole (``load``) or from a window of its newest events (``load_window``: earlier pages are
read when wanted, by ``paging``), or the newcomer's guide of an empty session.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.await_complete import AwaitComplete

from core.log import Event
from core.query import SurfaceWindow
from tui.app.transcript.entries import Entry, FetchEvents, FetchSeqs, FetchUnknown
from tui.app.transcript.history import with_history
from tui.app.transcript.state import TranscriptState
from tui.app.transcript.window import first_mounted
from tui.shared.items import classify_surface, with_unknown_events

__all__ = ["TranscriptLoading"]


class TranscriptLoading(TranscriptState):
    """For the transcript (mixed in before its widget class): what replaces its content."""

    def load(self, events: Sequence[Event]) -> AwaitComplete:
        """Replace everything with the replay of a whole current surface (newest page mounted)."""
        self._fetch_unknown, self._unknown_floor, self._unknown_low = None, -1, -1
        self._unknown_through = None
        self._counted, self._fetch_seqs, self._counting = True, None, None
        items = with_history(classify_surface(events))
        return self._replace(items, {event.seq for event in events}, [])

    def load_window(
        self,
        window: SurfaceWindow,
        fetch: FetchEvents,
        fetch_unknown: FetchUnknown | None = None,
        fetch_seqs: FetchSeqs | None = None,
    ) -> AwaitComplete:
        """Replace everything with the replay of a surface of which only the newest events
        were read; ``fetch`` reads earlier pages when the user asks for them, and
        ``fetch_unknown`` the unknown events among them (``window.unknown`` holds those
        among the newest events). A window that is not ``complete`` (read from the
        newest rows only) is shown at once and learns the earlier seqs from
        ``fetch_seqs`` afterwards (in the background, or when an earlier page is wanted
        first); until then the button gives no count.

        Unless the window starts at the surface's beginning, its first event only gives
        context (a user message after a reference card shows the card's labels) and is
        read again with the page before it.
        """
        unread = list(window.unread)
        events = list(window.events)
        counted = window.complete or fetch_seqs is None
        more = bool(unread) or not counted
        context: Event | None = None
        if more and len(events) > 1:
            context = events.pop(0)
            unread.append(context.seq)
        elif not unread:
            counted = True  # the window holds the whole surface
        floor = window.unknown_floor
        low = max(floor, events[0].seq) if unread and events else floor
        unknown = [event for event in window.unknown if event.seq > low]
        merged = with_unknown_events(events, unknown)
        items = with_history(
            classify_surface([context, *merged])[1:]
            if context is not None
            else classify_surface(merged)
        )
        self._unknown_floor, self._unknown_low = floor, low
        self._unknown_through = window.captured_through_seq
        self._fetch_unknown = fetch_unknown
        self._counted, self._fetch_seqs = counted, fetch_seqs
        replaced = self._replace(items, set(window.seqs), unread, fetch)
        self._counting = None
        if not counted and fetch_seqs is not None:
            # After the page is drawn (it does not wait for this): the earlier seqs,
            # so the button can say how many there are.
            self._counting = self._tracked(
                self._count_later(self._generation, fetch_seqs, replaced)
            )
        return replaced

    def _replace(
        self,
        entries: Sequence[Entry],
        known: set[int],
        unread: list[int],
        fetch: FetchEvents | None = None,
    ) -> AwaitComplete:
        old = [*self._widgets]
        self._generation += 1
        self._fetch = fetch
        self._reply = None
        self._entries = list(entries)
        self._unread = unread
        self._known_seqs = known
        self._first = first_mounted(len(self._entries), self.page_size)
        self._widgets = [self._make_widget(entry) for entry in self._entries[self._first :]]
        removing = self.remove_children(old)
        mounting = self.mount_all(self._widgets) if self._widgets else None
        self._update_chrome()
        self.anchor()

        async def loading() -> None:
            await removing
            if mounting is not None:
                await mounting

        return self._tracked(loading())

    def show_empty_state(self) -> AwaitComplete:
        """Clear the transcript and show the newcomer's guide (no session, or an empty one)."""
        self._origin.show_origin(None, None)
        return self.load(())

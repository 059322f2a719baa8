"""Paging in the transcript: "Load earlier messages" mounts the previous page above the
current items while keeping the reader's place, reading it from the store first when the
transcript was loaded from a surface window (the earlier seqs counted, the unknown events
among them read); a long live session unmounts its oldest items while the view follows the
tail. The arithmetic is the plain ``window`` module; this mixin applies it to the widget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from textual.await_complete import AwaitComplete
from textual.widget import Widget
from textual.widgets import Button

from core.errors import DshError
from core.log import Event
from tui.app.transcript.entries import FetchEvents, FetchSeqs
from tui.app.transcript.history import with_history
from tui.app.transcript.reply import done_already
from tui.app.transcript.state import TranscriptState
from tui.app.transcript.window import (
    Span,
    earlier_mount_start,
    earlier_read,
    place_to_keep,
    prune_count,
)
from tui.shared.items import TranscriptItem, classify_surface, with_unknown_events

__all__ = ["TranscriptPaging"]


class TranscriptPaging(TranscriptState):
    """For the transcript (mixed in before its widget class): its earlier pages, read and
    mounted on demand, and the pruning of a long live session."""

    @property
    def hidden_count(self) -> int:
        """Earlier items not mounted (what "Load earlier messages" would bring back)."""
        return len(self._unread) + self._first

    @property
    def unread_count(self) -> int:
        """Earlier items whose events were not read from the store yet."""
        return len(self._unread)

    # -- paging ------------------------------------------------------------------------

    def load_earlier(self) -> AwaitComplete:
        """Mount the previous page above the current items, keeping the view in place
        (reading it from the store first when it was not read yet)."""
        if self._first > 0:
            return self._mount_earlier()
        if not self._unread or self._fetch is None or self._fetching == self._generation:
            return done_already()
        return self._tracked(self._read_earlier(self._fetch))

    def _counted_earlier(self, seqs: Sequence[int], floor: int) -> None:
        """Every surface seq is known now (a transcript opened from the newest rows only):
        those before the items read so far become ``_unread``."""
        oldest = self._unread[0] if self._unread else None
        if oldest is None:
            oldest = next(
                (e.event.seq for e in self._entries if isinstance(e, TranscriptItem)), None
            )
        self._counted = True
        try:
            index = list(seqs).index(oldest) if oldest is not None else -1
        except ValueError:
            # The surface changed meanwhile (a compaction elsewhere): nothing earlier is
            # read from this view; the follower reloads the transcript.
            self._unread.clear()
            return
        earlier = list(seqs[:index]) if index > 0 else []
        self._unread[:0] = earlier
        self._known_seqs.update(earlier)
        self._unknown_floor = floor

    async def _count_later(
        self, generation: int, fetch_seqs: FetchSeqs, page: AwaitComplete
    ) -> None:
        """Count the earlier items once the newest ``page`` is mounted and drawn (a
        failure is left to paging, which reads them again and reports it)."""
        await page
        try:
            seqs, floor = await fetch_seqs()
        except DshError:
            return
        if generation == self._generation and not self._counted:
            self._counted_earlier(seqs, floor)
            self._update_chrome()

    async def _read_earlier(self, fetch: FetchEvents) -> None:
        generation = self._generation
        self._fetching = generation
        self._update_chrome()
        counting = self._counting
        if not self._counted and counting is not None and not counting.is_done:
            await counting  # the count load_window started
            if generation != self._generation:
                return
        if not self._counted and self._fetch_seqs is not None:
            try:
                seqs, floor = await self._fetch_seqs()
            except DshError as err:
                if generation == self._generation:
                    self._fetching = None
                    self._update_chrome()
                    self.post_message(self._load_failed(err))
                return
            if generation != self._generation:
                return
            self._counted_earlier(seqs, floor)
            if not self._unread:
                self._fetching = None
                self._update_chrome()
                return
        read = earlier_read(self._unread, self.page_size)
        try:
            events = list(await fetch(read.seqs))
            page = events[1:] if read.context is not None else events
            low, unknown = await self._read_unknown(page, len(self._unread) == len(read.page))
        except DshError as err:
            if generation == self._generation:
                self.post_message(self._load_failed(err))
            return
        finally:
            if self._fetching == generation:
                self._fetching = None
            if generation == self._generation:
                self._update_chrome()
        if generation != self._generation or self._first > 0:
            return  # another session was loaded meanwhile
        self._unknown_low = min(low, self._unknown_low)
        if unknown:
            merged = with_unknown_events(page, unknown)
            events = [events[0], *merged] if read.context is not None else merged
        items = classify_surface(events)
        if read.context is not None:
            items = items[1:]
        items = with_history(items)
        del self._unread[-len(read.page) :]
        self._entries[:0] = items
        self._first = len(items)
        await self._mount_earlier()

    async def _read_unknown(
        self, page: Sequence[Event], first_page: bool
    ) -> tuple[int, list[Event]]:
        """The unknown events shown with an earlier ``page`` (the surface's first page
        when ``first_page``): those between it and the items already read; with the new
        lower bound of what was read."""
        fetch = self._fetch_unknown
        high = self._unknown_low
        if fetch is None:
            return high, []
        floor = self._unknown_floor
        low = floor if first_page or not page else max(floor, page[0].seq)
        if high <= low:
            return high, []
        return low, [event for event in await fetch(low, high) if low < event.seq <= high]

    def _mount_earlier(self) -> AwaitComplete:
        start = earlier_mount_start(self._first, self.page_size)
        widgets = [self._make_widget(entry) for entry in self._entries[start : self._first]]
        position = self._capture_position()
        self._first = start
        self._widgets[:0] = widgets
        mounting = self.mount_all(widgets, after=self._button)
        self._update_chrome()
        count, remaining = len(widgets), self.hidden_count

        async def loading() -> None:
            await mounting
            if position is not None:
                self.call_after_refresh(self._restore_position, position)
            self.post_message(self._earlier_loaded(count, remaining))

        return self._tracked(loading())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._button:
            event.stop()
            self.load_earlier()

    def _prune(self) -> Awaitable[Any] | None:
        """Unmount the oldest items of a long live session while the view follows the tail."""
        excess = prune_count(len(self._widgets), self.max_mounted, self.page_size)
        if not excess or not self.following:
            return None
        gone = [w for w in self._widgets[:excess] if w is not self._reply]
        if len(gone) != excess:
            return None
        del self._widgets[:excess]
        self._first += excess
        return self.remove_children(gone)

    def _capture_position(self) -> tuple[Widget, int] | None:
        """The first item that starts in the view and its offset from the top of the view
        (None when following: Textual then keeps the bottom pinned by itself)."""
        if self.following:
            return None
        spans = (Span(w.virtual_region.y, w.virtual_region.bottom) for w in self._widgets)
        place = place_to_keep(spans, round(self.scroll_y))
        if place is None:
            return None
        index, offset = place
        return self._widgets[index], offset

    def _restore_position(self, position: tuple[Widget, int]) -> None:
        widget, offset = position
        if widget.is_attached and not self.following:
            self.scroll_to(y=widget.virtual_region.y - offset, animate=False, immediate=True)

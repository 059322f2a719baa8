"""Reading a whole session out of a store in bounded pages (issue 31: ``dsh show``,
``dsh export`` and ``dsh replay --text`` of a 1 GB session held 3-4 times the log).

Every read here is a range of seqs fixed before the first page is read: the session's last
seq (or its folded surface, with that seq) comes from one consistent read, and events never
change, so later pages read exactly that prefix even while a writer appends to the session.
Memory is bounded by a page of events (``PAGE_EVENTS``), never by the log; the only thing
kept whole is the current surface's seqs (a few bytes per node).
"""

from __future__ import annotations

import asyncio
import threading
from array import array
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from core.log import Event, SessionHeader
from core.store import SessionStore

__all__ = [
    "PAGE_EVENTS",
    "Stopped",
    "SurfaceStream",
    "event_pages",
    "flattened_in_thread",
    "open_surface_stream",
    "read_last_seq",
    "unknown_event_pages",
]

T = TypeVar("T")

PAGE_EVENTS = 128
"""Events per page read (a page of ordinary messages is well under a megabyte)."""


async def read_last_seq(store: SessionStore, session_id: str) -> tuple[SessionHeader, int | None]:
    """The session's header and last seq (``None``: an empty log), in one read whose cost
    does not grow with the session (an empty surface tail)."""
    header, last, _rows = await store.read_surface_tail(session_id, 0)
    return header, last


async def event_pages(
    store: SessionStore,
    session_id: str,
    through: int | None,
    *,
    after: int = -1,
    page: int = PAGE_EVENTS,
) -> AsyncIterator[list[Event]]:
    """The events with ``after < seq <= through`` in seq order, ``page`` at a time (a
    dense ``read_events_at``: one range of the store's key per page)."""
    if through is None:
        return
    start = after + 1
    while start <= through:
        stop = min(start + page, through + 1)
        yield await store.read_events_at(session_id, range(start, stop))
        start = stop


async def unknown_event_pages(
    store: SessionStore,
    session_id: str,
    through: int | None,
    *,
    after: int = -1,
    page: int = PAGE_EVENTS,
) -> AsyncIterator[list[Event]]:
    """The events of types dsh does not know with ``after < seq <= through``, in seq
    order, read ``page`` seqs of the log at a time (so a read holds at most ``page``)."""
    if through is None:
        return
    low = after
    while low < through:
        high = min(low + page, through)
        found = await store.read_unknown_events(session_id, low, high)
        if found:
            yield found
        low = high


class Stopped(Exception):
    """The reader of ``flattened_in_thread`` was told to stop (its awaiting side is gone)."""


def flattened_in_thread(
    pages: AsyncIterator[Sequence[T]],
    loop: asyncio.AbstractEventLoop,
    stop: threading.Event | None = None,
) -> Iterator[T]:
    """The items of ``pages`` one by one, for a worker thread (``asyncio.to_thread``)
    while ``loop`` runs the reads: the plain generators that write an export or a
    transcript consume a store's pages without holding them all. Each page is read on
    the loop when the one before is used up; a read's error is raised here. Once
    ``stop`` is set (Ctrl+C cancelled the wait for the thread) the next page is
    ``Stopped`` instead, so the thread ends within a page."""

    async def following() -> Sequence[T] | None:
        try:
            return await anext(pages)
        except StopAsyncIteration:
            return None

    while True:
        if stop is not None and stop.is_set():
            raise Stopped("the reader was stopped")
        page = asyncio.run_coroutine_threadsafe(following(), loop).result()
        if page is None:
            return
        yield from page


class _UnknownCursor:
    """The events of unknown types with ``after < seq <= through`` in seq order, read
    ``page`` seqs of the log at a time (so one read holds at most ``page`` events)."""

    def __init__(
        self, store: SessionStore, session_id: str, after: int, through: int, page: int
    ) -> None:
        self._store, self._sid, self._page = store, session_id, page
        self._low, self._through = after, through
        self._pending: list[Event] = []  # read, not yet handed out (seq order)

    async def below(self, seq: int) -> AsyncIterator[list[Event]]:
        """Hand out every remaining one with a seq lower than ``seq``."""
        while True:
            count = 0
            while count < len(self._pending) and self._pending[count].seq < seq:
                count += 1
            if count:
                yield self._pending[:count]
                del self._pending[:count]
            if self._pending or self._low >= min(seq - 1, self._through):
                return
            high = min(self._low + self._page, self._through)
            self._pending = await self._store.read_unknown_events(self._sid, self._low, high)
            self._low = high


@dataclass
class SurfaceStream:
    """A session's current surface as ``dsh show`` prints it (node order, with the unknown
    events after its newest replace in place: ``tui.shared.items.with_unknown_events``),
    read page by page. ``header`` and ``last_seq`` are those of the one read that fixed
    the surface."""

    store: SessionStore
    header: SessionHeader
    last_seq: int | None
    seqs: Sequence[int]
    floor: int
    page: int = PAGE_EVENTS
    unknown: bool = True  # False: the surface alone (a Markdown export)

    async def pages(self) -> AsyncIterator[list[Event]]:
        """The shown events in order, a page (or a little more) at a time."""
        sid = self.header.id
        last = -1 if self.last_seq is None else self.last_seq
        unknown = _UnknownCursor(self.store, sid, self.floor, last, self.page)
        out: list[Event] = []
        for start in range(0, len(self.seqs), self.page):
            chunk = list(self.seqs[start : start + self.page])
            for event in await self.store.read_events_at(sid, chunk):
                # Up to the newest replace no unknown event is shown; after it every
                # node is an append, in seq order, and they interleave by seq.
                if self.unknown and event.seq > self.floor:
                    async for found in unknown.below(event.seq):
                        out += found
                        if len(out) >= self.page:  # a long run of them: hand it on
                            yield out
                            out = []
                out.append(event)
            yield out
            out = []
        if self.unknown:
            async for found in unknown.below(last + 1):
                yield found


async def open_surface_stream(
    store: SessionStore, session_id: str, *, page: int = PAGE_EVENTS, unknown: bool = True
) -> SurfaceStream:
    """Fix the session's current surface (one consistent read of its nodes' seqs, its
    last seq and the seq of its newest replace) for reading it page by page."""
    header, last, seqs, floor = await store.read_surface_nodes(session_id)
    return SurfaceStream(store, header, last, array("q", seqs), floor, page, unknown)

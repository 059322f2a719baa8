"""A streamed reply's chunks, gathered and written in batches (not one transaction per
token), and how long a store wants them gathered."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from core.errors import LeaseLostError
from core.log import Event, NewEvent
from core.store import SessionStore

CHUNK_FLUSH_EVENTS = 256
CHUNK_FLUSH_SECONDS = 0.05
"""How long a streamed reply's chunks are gathered before they are written (one write per
batch, not per token), unless the store asks for longer (``chunk_flush_seconds``)."""


def chunk_flush_seconds(store: SessionStore) -> float:
    """How long to gather a reply's chunks before writing them to ``store``: a store whose
    every write costs its other clients something (PostgreSQL's writes wake every member's
    follower) says how long it wants (``store.chunk_flush_seconds()``), never less than
    ``CHUNK_FLUSH_SECONDS``; the others get ``CHUNK_FLUSH_SECONDS``."""
    asked = getattr(store, "chunk_flush_seconds", None)
    if not callable(asked):
        return CHUNK_FLUSH_SECONDS
    return max(CHUNK_FLUSH_SECONDS, float(asked()))


@dataclass
class _ChunkBuffer:
    """Collects chunk events and writes them in batches, not one transaction per token.

    A timer writes pending chunks ``flush_seconds`` after the first of them even when no
    further delta arrives: a stalled stream must not hold back text already shown. That is
    ``CHUNK_FLUSH_SECONDS`` unless the store asks for longer (``chunk_flush_seconds``).
    Writes are serialised (FIFO lock), so chunks are stored in order. Once ``lost`` is set
    (another writer took the session's lease) nothing more is written: pending chunks are
    dropped and ``flush`` raises ``LeaseLostError``.
    """

    store: SessionStore
    session_id: str
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    flush_seconds: float = CHUNK_FLUSH_SECONDS
    pending: list[NewEvent] = field(default_factory=list)
    first_pending_at: float = 0.0
    written: int = 0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _timer: asyncio.TimerHandle | None = None
    _background: asyncio.Task[list[Event]] | None = None

    def add(self, event: NewEvent) -> None:
        if not self.pending:
            self.first_pending_at = time.monotonic()
            if self._timer is None:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.flush_seconds, self._on_timer)
        self.pending.append(event)

    def due(self) -> bool:
        return bool(self.pending) and (
            len(self.pending) >= CHUNK_FLUSH_EVENTS
            or time.monotonic() - self.first_pending_at >= self.flush_seconds
        )

    def _on_timer(self) -> None:
        self._timer = None
        background = self._background
        if (
            not self.pending
            or self.lost.is_set()
            or (
                background is not None
                and background.done()
                and not background.cancelled()
                and background.exception() is not None
            )
        ):
            return  # nothing to write, or a write failed: close() reports that failure
        if background is None or background.done():
            self._background = asyncio.ensure_future(self.flush())
        else:  # a write is still running: look again later rather than queue behind it
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.flush_seconds, self._on_timer)

    async def flush(self, *tail: NewEvent) -> list[Event]:
        async with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch = [*self.pending, *tail]
            self.pending = []
            if self.lost.is_set():  # the session is another writer's now
                raise LeaseLostError(self.session_id)
            if not batch:
                return []
            written = await self.store.append_batch(self.session_id, batch)
            self.written += len(batch) - len(tail)
            return written

    def discard(self) -> None:
        """Drop the pending chunks and stop the timer (the lease was lost: none is written)."""
        self.pending = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def close(self) -> None:
        """Stop the timer and wait for a write it started (its failure is raised here)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        background, self._background = self._background, None
        if background is not None:
            await background

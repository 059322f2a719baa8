"""``append`` and ``append_batch`` as every store takes them: the session id checked, then
the events' shape; the store's own ``_append`` then checks the session (found, readable,
the user's) and the log-state rules against its surface, and writes the batch whole. One
order of checks in every store, so the same bad call fails the same way everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.log import Event, NewEvent, SurfaceOp, ValidatedEvent
from stores.validation import check_session_id, validate_batch, validate_event

__all__ = ["ValidatedAppends"]


class ValidatedAppends:
    """The two append methods of ``SessionStore``, over a store's ``_append``."""

    async def _append(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        """Write ``batch`` (already validated) to session ``sid``, whole or not at all."""
        raise NotImplementedError

    async def append(
        self,
        session_id: str,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        time: int | None = None,
    ) -> Event:
        sid = check_session_id(session_id)
        validated = validate_event(type, data, surface_op, source_event_seqs, time)
        return (await self._append(sid, [validated]))[0]

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        sid = check_session_id(session_id)
        return await self._append(sid, validate_batch(events))

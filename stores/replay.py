"""A read-only store over one session log file, for ``dsh replay`` (QA of how a log replays).

It holds the log in memory (a ``MemorySessionStore``) and refuses every write: replaying a
file never opens or writes a database. Reads are those of the memory store, so the app, the
CLI's printer and the snapshot renderer show the log exactly as they show a stored session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from core.errors import StoreError
from core.log import Event, NewEvent, SessionHeader, SurfaceOp
from stores.memory import MemorySessionStore

__all__ = ["ReplayStore"]


class ReplayStore(MemorySessionStore):
    """One session, read-only. ``reason`` says why writes are refused (shown by the app)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self._reason = reason

    @classmethod
    async def holding(
        cls, header: SessionHeader, events: Sequence[NewEvent], reason: str
    ) -> ReplayStore:
        """A store holding exactly this session (validated as an import would be)."""
        store = cls(reason)
        await MemorySessionStore.import_session(store, header, events)
        return store

    @property
    def read_only(self) -> bool:
        return True

    @property
    def read_only_reason(self) -> str:
        return self._reason

    def _refuse(self) -> NoReturn:
        raise StoreError(f"{self._reason}: nothing can be written")

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        self._refuse()

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
        self._refuse()

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        self._refuse()

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent]
    ) -> SessionHeader:
        self._refuse()

    async def delete_session(self, session_id: str) -> None:
        self._refuse()

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        self._refuse()

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        return None

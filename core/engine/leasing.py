"""The session's reply lease: taken (a reply kept in memory stored first), renewed in
the background, checked before a final write, and the error once another writer took it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from core.engine.state import _SessionState
from core.errors import DshError, LeaseLostError, SessionBusyError
from core.leases import lease_owner, lease_owner_is_dead


class _Leasing(_SessionState):
    """One reply (or compaction) at a time per session, across processes."""

    @asynccontextmanager
    async def reply_lease(self) -> AsyncIterator[None]:
        """Hold the session's reply lease in the store (one reply at a time per session,
        across processes), renewed in the background; raises ``SessionBusyError`` when
        another writer holds it. Re-entrant: inside it, ``send`` and ``reply`` use it as is,
        so a host can take it before storing the user's message.

        When a renewal finds the lease gone to another writer (broken by ``dsh unlock``, or
        run out during a stall and taken), the reply or compaction under it stops and stores
        nothing more (``LeaseLostError``)."""
        if self._lease_owner is not None:
            yield
            return
        owner = self._unreleased or lease_owner()
        if not await self.store.take_reply_lease(
            self.session_id, owner, ttl_ms=self.lease_ttl_ms, dead=lease_owner_is_dead
        ):
            raise SessionBusyError(self.session_id, await self._lease_holder())
        self._unreleased = None
        self._lease_owner = owner
        self._lease_lost = lost = asyncio.Event()
        renewing = asyncio.ensure_future(self._renew_lease(owner, lost))
        try:
            await self._store_unsaved()
            yield
        finally:
            self._lease_owner = None
            renewing.cancel()
            try:
                await asyncio.shield(self.store.release_reply_lease(self.session_id, owner))
            except DshError:  # it expires on its own; this session takes it again meanwhile
                self._unreleased = owner

    async def _store_unsaved(self) -> None:
        """Store the reply kept in memory when its server went away (unless the write that
        failed was stored after all): before anything else, so turns and seqs stay in
        order. Raises the store's error when it still cannot (nothing else is written)."""
        if self._unsaved is None:
            return
        tail, message_id = self._unsaved
        if await self._stored_reply(message_id) is None:
            await self.store.append_batch(self.session_id, tail)
        self._unsaved = None

    async def _lease_holder(self) -> str | None:
        """Who holds the session's lease now, for the busy error's words (``None``: none
        any more, or it cannot be read)."""
        with contextlib.suppress(DshError):
            lease = await self.store.read_reply_lease(self.session_id)
            return None if lease is None else lease.holder
        return None

    async def _renew_lease(self, owner: str, lost: asyncio.Event) -> None:
        """Renew the lease every ``lease_renew_seconds`` until it is lost (then set ``lost``
        and stop). A renewal that fails with a store error is tried again at the next one:
        the reply's own writes report store faults."""
        while True:
            await asyncio.sleep(self.lease_renew_seconds)
            try:
                # One step: never takes back a lease broken or taken meanwhile.
                kept = await self.store.renew_reply_lease(
                    self.session_id, owner, ttl_ms=self.lease_ttl_ms
                )
            except DshError:
                continue
            if not kept:
                lost.set()
                return

    async def _still_holds(self, owner: str) -> bool:
        """Whether the session's lease is still ``owner``'s: ``False`` once it was broken
        (``dsh unlock``: a renewal must not take it back) or another writer holds it. One of
        ours that ran out with nobody taking it is still ours. Store errors are raised."""
        held = await self.store.read_reply_lease(self.session_id)
        return held is not None and held.holder == owner

    async def _check_lease(self) -> None:
        """Just before a final write: raise ``LeaseLostError`` (``lost`` set) when the lease
        is no longer ours, however recently that happened. A check that fails with a store
        error says nothing (the write that follows reports the fault)."""
        owner = self._lease_owner
        if owner is None or self._lease_lost.is_set():
            return
        try:
            holds = await self._still_holds(owner)
        except DshError:
            return
        if not holds:
            self._lease_lost.set()

    async def _lost_error(self, what: Literal["reply", "compaction", "message"]) -> LeaseLostError:
        return LeaseLostError(self.session_id, what, await self._lease_holder())

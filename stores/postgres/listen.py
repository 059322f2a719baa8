"""The PostgreSQL store's change tracking: other writers' commits heard through
LISTEN/NOTIFY, or polled behind a pooler (``stores.postgres.pooling``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg

from core.errors import StoreError
from stores.postgres.connection import (
    _CONNECT_TIMEOUT_S,
    CHANGES_CHANNEL,
    PgConnection,
    _server_settings,
)
from stores.postgres.location import connect_error
from stores.postgres.pooling import BOUND_SQL, POLL_SQL, XMIN_SQL


class ChangeTracking(PgConnection):
    """Counting the commits of other stores (``change_token``, ``take_notice``)."""

    # ------------------------------------------------------------------ change tracking

    async def _listen(self) -> None:
        """(Re)open the LISTEN connection; a missed stretch counts as a change."""
        async with self._listen_lock:
            if self.listening:
                return
            old, self._listener = self._listener, None
            if old is not None:
                with contextlib.suppress(Exception):
                    old.terminate()
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(
                    self._location.dsn,
                    timeout=_CONNECT_TIMEOUT_S,
                    server_settings=_server_settings(self._limits),
                )
                conn.add_termination_listener(self._listener_terminated)
                await conn.add_listener(CHANGES_CHANNEL, self._notified)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as err:
                if conn is not None:
                    conn.terminate()
                lost = self._listener_lost
                error = connect_error(
                    self._location, err, "lost the connection" if lost else "cannot connect"
                )
                if lost and not self._outage_told:  # once per outage
                    self._notice = (f"{error}; retrying", True)
                    self._outage_told = True
                raise error from err
            if self._listener_lost:
                self._others += 1  # commits may have been missed while it was down
                self._notice = (
                    f"Reconnected to {self.location} after the connection was lost.",
                    False,
                )
            self._listener = conn
            self._listener_lost = False
            self._outage_told = False

    async def _poll_changes(self) -> int:
        async def body(conn: asyncpg.Connection) -> tuple[int, Any, Any]:
            value = await conn.fetchval(POLL_SQL)
            bound = None
            if self._poller.wants_bound(value, self._bumps):
                bound = await conn.fetchval(BOUND_SQL)
            return value, bound, await conn.fetchval(XMIN_SQL)

        try:
            value, bound, xmin = await self._run(body, write=False, what="lost the connection")
        except StoreError as err:
            if not self._poll_lost:  # once per outage
                self._poll_lost = True
                self._poller.missed()
                self._notice = (f"{err}; retrying", True)
            raise
        if self._poll_lost:
            self._poll_lost = False
            self._notice = (f"Reconnected to {self.location} after the connection was lost.", False)
        return self._poller.observe(value, bound, xmin, self._bumps)

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if payload != self._token:
            self._others += 1

    def _listener_terminated(self, conn: object) -> None:
        if conn is self._listener:
            self._listener_lost = True

    @property
    def listening(self) -> bool:
        """Whether other writers' commits are being heard right now."""
        return (
            self._listener is not None
            and not self._listener.is_closed()
            and not self._listener_lost
        )

    def take_notice(self) -> tuple[str, bool] | None:
        """What a host should tell its user about the connection since it last asked, once:
        ``(message, is_warning)`` (it was lost and is being retried; it is back), or
        ``None`` when nothing happened."""
        notice, self._notice = self._notice, None
        return notice

    async def change_token(self) -> int:
        """The number of other stores' commits heard through LISTEN/NOTIFY (no query at
        all while the listening connection is up). The first call opens that connection:
        the commits it counts are those after it. A lost connection is reopened here, and
        counts as a change since commits may have been missed meanwhile; see
        :meth:`take_notice` for what to tell the user.

        Behind a pooler, where LISTEN cannot work, the ``dsh_changes`` counter is polled
        instead (two small statements; ``stores.postgres.pooling.ChangePoller``)."""
        self._live()
        if self._pooled:
            return await self._poll_changes()
        if not self.listening:
            if self._listener is not None and not self._listener_lost:
                self._listener_lost = True  # closed under us without the callback
            await self._listen()
        return self._others

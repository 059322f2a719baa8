"""Reply leases in the SQLite store: one reply at a time per session, across processes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import aiosqlite

from core.leases import ReplyLease, check_lease_ttl, lease_blocks
from core.log import now_ms
from stores.columns import encode_text
from stores.sqlite.sharing import _Access
from stores.validation import check_session_id


class _LeasesMixin(_Access):
    """The reply lease of a session: one reply at a time, across processes."""

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            now = now_ms()
            # BEGIN IMMEDIATE (a write) makes the check and the take one step for every process.
            for held, expires_at in raw.execute(
                "SELECT owner, expires_at FROM reply_leases WHERE session = ?", (key,)
            ).fetchall():
                if lease_blocks(held, expires_at, owner, now, dead):
                    return False
            raw.execute(
                "INSERT OR REPLACE INTO reply_leases (session, owner, expires_at) VALUES (?, ?, ?)",
                (key, owner, now + ttl),
            )
            return True

        return await self._run_sync(body, write=True)

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "DELETE FROM reply_leases WHERE owner = ? AND session = "
                "(SELECT key FROM sessions WHERE id = ?)",
                (owner, encode_text(sid)),
            )

        await self._run(body, write=True)

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            return (
                raw.execute(
                    "UPDATE reply_leases SET expires_at = ? WHERE session = ? AND owner = ?",
                    (now_ms() + ttl, key, owner),
                ).rowcount
                > 0
            )

        return await self._run_sync(body, write=True)

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> ReplyLease | None:
            key, _ = self._own(raw, sid)
            row = raw.execute(
                "SELECT owner, expires_at FROM reply_leases WHERE session = ?", (key,)
            ).fetchone()
            return None if row is None else ReplyLease(row[0], row[1] - now_ms())

        return await self._run_sync(body, write=False)

    async def break_reply_lease(self, session_id: str) -> bool:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            return raw.execute("DELETE FROM reply_leases WHERE session = ?", (key,)).rowcount > 0

        return await self._run_sync(body, write=True)

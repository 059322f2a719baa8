"""The PostgreSQL store's reply leases (``core.leases``), judged by the server's clock."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from core.leases import ReplyLease, check_lease_ttl, lease_blocks
from stores.columns import decode_text, encode_text
from stores.postgres.connection import _BY_ID, PgConnection
from stores.validation import check_session_id

_SERVER_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
"""The server's clock, in epoch milliseconds: what leases are judged by."""
_RELEASED = 0
"""The expiry of a lease given back (members may update a lease, not delete it)."""


def _holder(raw: bytes) -> str:
    """A lease's holder as stored (``encode_text``'s, so it compares equal to the string a
    holder took it with); bytes written by hand that do not decode are shown escaped
    rather than refused (its owner's own rows)."""
    try:
        return decode_text(raw)
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace")


class Leases(PgConnection):
    """Taking, renewing, reading, releasing and breaking a session's reply lease."""

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        """As every store (``core.leases.lease_blocks``), by the server's clock: a client
        whose clock runs fast or slow neither makes its lease outlive its TTL nor sees
        another's as run out early."""
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        async def body(conn: asyncpg.Connection) -> bool:
            # Locking the session row makes the check and the take one step for every client.
            row = await conn.fetchrow(
                f"SELECT key, {_SERVER_NOW_MS} FROM dsh_sessions WHERE {_BY_ID} FOR UPDATE",
                encode_text(sid),
            )
            if row is None:
                await self._refuse(conn, sid)
            key, now = row
            held = await conn.fetchrow(
                "SELECT owner, expires_at FROM dsh_reply_leases WHERE session_key = $1", key
            )
            if held is not None and lease_blocks(_holder(held[0]), held[1], owner, now, dead):
                return False
            await conn.execute(
                "INSERT INTO dsh_reply_leases (session_key, owner, expires_at) "
                "VALUES ($1, $2, $3) ON CONFLICT (session_key) "
                "DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at",
                key,
                encode_text(owner),
                now + ttl,
            )
            return True

        return await self._run(body, write=True)

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> None:
            # Members may not DELETE (see stores.postgres.team): a released lease runs out at 0.
            await conn.execute(
                f"UPDATE dsh_reply_leases SET expires_at = {_RELEASED} WHERE owner = $2 "
                f"AND session_key = (SELECT key FROM dsh_sessions WHERE {_BY_ID})",
                encode_text(sid),
                encode_text(owner),
            )

        await self._run(body, write=True)

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            renewed = await conn.fetchval(
                f"UPDATE dsh_reply_leases SET expires_at = {_SERVER_NOW_MS} + $3 "
                f"WHERE session_key = $1 AND owner = $2 AND expires_at <> {_RELEASED} "
                "RETURNING true",
                key,
                encode_text(owner),
                ttl,
            )
            return bool(renewed)

        return await self._run(body, write=True)

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> ReplyLease | None:
            key, _ = await self._require_own(conn, sid)
            row = await conn.fetchrow(
                f"SELECT owner, expires_at - {_SERVER_NOW_MS} FROM dsh_reply_leases "
                f"WHERE session_key = $1 AND expires_at <> {_RELEASED}",
                key,
            )
            return None if row is None else ReplyLease(_holder(row[0]), row[1])

        return await self._run(body, write=False)

    async def break_reply_lease(self, session_id: str) -> bool:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            broken = await conn.fetchval(
                f"UPDATE dsh_reply_leases SET expires_at = {_RELEASED} "
                f"WHERE session_key = $1 AND expires_at <> {_RELEASED} RETURNING true",
                key,
            )
            return bool(broken)

        return await self._run(body, write=True)

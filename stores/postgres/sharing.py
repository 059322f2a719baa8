"""The PostgreSQL store's sharing (issue 17): grants in ``dsh_shares``, which row
security reads (``stores.postgres.security``).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from core.errors import ShareError
from core.limits import MAX_SESSION_ID_BYTES
from core.sharing import Share
from stores.postgres.connection import PgConnection
from stores.postgres.rows import read_id, within
from stores.sharing import check_grantee, share_target
from stores.validation import check_session_id


class Sharing(PgConnection):
    """``share``, ``unshare``, ``list_shares``."""

    # ------------------------------------------------------------------ sharing

    async def share(self, session_id: str, user: str) -> bool:
        sid, grantee = share_target(session_id, user)

        async def body(conn: asyncpg.Connection) -> bool:
            key, header = await self._require_own(conn, sid)
            check_grantee(grantee, self._user)
            if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", grantee):
                raise ShareError(f"there is no user {grantee!r} on {self.location}")
            added = await conn.fetchval(
                "INSERT INTO dsh_shares (session_key, owner, grantee) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING RETURNING true",
                key,
                header.owner,
                grantee,
            )
            return bool(added)

        return await self._run(body, write=True)

    async def unshare(self, session_id: str, user: str) -> bool:
        sid, grantee = share_target(session_id, user)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            check_grantee(grantee, self._user)
            return bool(await conn.fetchval("SELECT dsh_unshare($1, $2)", key, grantee))

        return await self._run(body, write=True)

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        sid = None if session_id is None else check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            if sid is None:
                return list(
                    await conn.fetch(
                        f"SELECT {within('s.id', MAX_SESSION_ID_BYTES)}, g.owner, g.grantee "
                        "FROM dsh_shares AS g JOIN dsh_sessions AS s ON s.key = g.session_key "
                        "ORDER BY s.created_at DESC, s.id, g.grantee"
                    )
                )
            key, _ = await self._require_session(conn, sid)
            return list(
                await conn.fetch(
                    "SELECT NULL, NULL, owner, grantee FROM dsh_shares WHERE session_key = $1 "
                    "ORDER BY grantee",
                    key,
                )
            )

        rows = await self._run(body, write=False)
        if sid is not None:
            return [Share(sid, owner, grantee) for _, _, owner, grantee in rows]
        # A grant on a session whose id cannot be read is left out (as the session is).
        return [
            Share(name, owner, grantee)
            for raw, size, owner, grantee in rows
            if (name := read_id(raw, size)) is not None
        ]

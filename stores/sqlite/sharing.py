"""Owners and shares in the SQLite store: the sessions the store's user may read
(``_readable``), the checks of a read and of a write, and ``share``/``unshare``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from core.errors import SessionNotFoundError
from core.log import SessionHeader
from core.sharing import Share
from stores.columns import decode_text, encode_text
from stores.sharing import check_grantee, check_owner, share_target
from stores.sqlite.connection import _Connection
from stores.validation import check_session_id

if TYPE_CHECKING:
    import aiosqlite


def _readable(alias: str) -> str:
    """The rows of ``sessions`` (as ``alias``) the store's user may read; its two
    parameters are that user (see ``SqliteSessionStore._readers``)."""
    return (
        f"({alias}.owner = ? OR EXISTS (SELECT 1 FROM shares AS g "
        f"WHERE g.session = {alias}.key AND g.grantee = ?))"
    )


class _Access(_Connection):
    """Who the store acts as, and the sessions that user may read or write."""

    _user: str
    _readers: tuple[str, str]

    def current_user(self) -> str:
        """Who this store acts as: the owner of what it creates."""
        return self._user

    async def _require_session(self, conn: aiosqlite.Connection, session_id: str) -> SessionHeader:
        rows = list(
            await conn.execute_fetchall(
                f"SELECT created_at, cwd, owner FROM sessions AS s WHERE id = ? AND {_readable('s')}",
                (encode_text(session_id), *self._readers),
            )
        )
        if not rows:
            raise SessionNotFoundError(session_id)
        created_at, cwd, owner = rows[0]
        return SessionHeader(
            id=session_id,
            created_at=created_at,
            cwd=None if cwd is None else decode_text(cwd),
            owner=owner,
        )

    def _session(self, raw: sqlite3.Connection, session_id: str) -> tuple[int, SessionHeader]:
        """The key and header of a session the user may read (``SessionNotFoundError``
        when there is none, or the user may not read it: no existence leak)."""
        row = raw.execute(
            f"SELECT key, created_at, cwd, owner FROM sessions AS s WHERE id = ? AND {_readable('s')}",
            (encode_text(session_id), *self._readers),
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        key, created_at, cwd, owner = row
        return key, SessionHeader(
            id=session_id,
            created_at=created_at,
            cwd=None if cwd is None else decode_text(cwd),
            owner=owner,
        )

    def _own(self, raw: sqlite3.Connection, session_id: str) -> tuple[int, SessionHeader]:
        """Like ``_session``, for a write: a session the user may read but does not own
        is ``SessionReadOnlyError``."""
        key, header = self._session(raw, session_id)
        check_owner(session_id, header.owner, self._user)
        return key, header


class _SharingMixin(_Access):
    """Sharing a session with another user, and the shares one may see."""

    async def share(self, session_id: str, user: str) -> bool:
        sid, grantee = share_target(session_id, user)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            check_grantee(grantee, self._user)
            cursor = raw.execute(
                "INSERT OR IGNORE INTO shares (session, grantee) VALUES (?, ?)", (key, grantee)
            )
            return cursor.rowcount > 0

        return await self._run_sync(body, write=True)

    async def unshare(self, session_id: str, user: str) -> bool:
        sid, grantee = share_target(session_id, user)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            check_grantee(grantee, self._user)
            cursor = raw.execute(
                "DELETE FROM shares WHERE session = ? AND grantee = ?", (key, grantee)
            )
            return cursor.rowcount > 0

        return await self._run_sync(body, write=True)

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        sid = None if session_id is None else check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> list[Share]:
            # As the database shows them: grants on one's own sessions, and one's own grants.
            mine = "(s.owner = ? OR g.grantee = ?)"
            if sid is None:
                rows = raw.execute(
                    "SELECT s.id, s.owner, g.grantee FROM shares AS g "
                    f"JOIN sessions AS s ON s.key = g.session WHERE {mine} "
                    "ORDER BY s.created_at DESC, s.id, g.grantee",
                    self._readers,
                ).fetchall()
            else:
                key, _ = self._session(raw, sid)
                rows = raw.execute(
                    "SELECT s.id, s.owner, g.grantee FROM shares AS g "
                    f"JOIN sessions AS s ON s.key = g.session WHERE s.key = ? AND {mine} "
                    "ORDER BY g.grantee",
                    (key, *self._readers),
                ).fetchall()
            return [Share(decode_text(i), owner or "", grantee) for i, owner, grantee in rows]

        return await self._run_sync(body, write=False)

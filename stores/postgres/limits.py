"""dsh's time limits on a PostgreSQL connection, and an admin's: the stricter wins.

dsh bounds every statement (``PostgresLimits``: ``lock_timeout``, ``statement_timeout``,
and ``idle_in_transaction_session_timeout`` as long as the statement timeout). An admin
may have set these too (``ALTER ROLE … SET``, ``ALTER DATABASE … SET``, the server's
configuration). Limits sent as startup parameters would silently override the admin's, so
they are set after connecting instead, each to the stricter of the two: an admin's tighter
limit is kept, a looser one does not loosen dsh's. What was chosen is remembered, so that a
statement it stops is reported with the limit that stopped it and who set it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from core.config import PostgresLimits

__all__ = ["LIMITS_SQL", "LIMIT_NAMES", "AppliedLimits", "apply_limits", "pooled_limits"]

LIMIT_NAMES = ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")

LIMITS_SQL = """
WITH chosen AS (
    SELECT o.name, o.ms::bigint AS ours, s.setting::bigint AS theirs
    FROM unnest($1::text[], $2::text[]) AS o(name, ms)
    JOIN pg_settings AS s ON s.name = o.name
), stricter AS (
    SELECT name, theirs > 0 AND theirs < ours AS admin,
           CASE WHEN theirs > 0 AND theirs < ours THEN theirs ELSE ours END AS ms
    FROM chosen
)
SELECT name, ms, admin, set_config(name, ms::text || 'ms', $3) FROM stricter
WHERE pg_backend_pid() = $4
"""
"""Sets each named limit (``$1``, dsh's values in ``$2`` ms) to the stricter of dsh's and
the connection's current one (an admin's; 0 is none), for the session or (``$3``) the
transaction; returns ``(name, ms, admin)`` rows. Only on a server connection of its own
(``$4``: the server process the client was given): through a pooler, whose connections
others share, it sets nothing (the store then sets its limits per transaction).

The values go as text: asyncpg knows ``text[]`` from the start, but looks ``bigint[]`` up
in the server's catalog on every new connection (a large recursive query, about 6 ms of
the server's time, and a round trip)."""

_ADMIN_SQL = "SELECT name, setting::bigint FROM pg_settings WHERE name = ANY($1::text[])"


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


@dataclass
class AppliedLimits:
    """The limits a store's connections run under (the latest connection's: every one has
    the same role and database), and whether an admin's setting chose each."""

    limits: PostgresLimits
    chosen: dict[str, tuple[int, bool]] = field(default_factory=dict)

    def wanted(self) -> tuple[list[str], list[int]]:
        statement = _ms(self.limits.statement_timeout)
        return list(LIMIT_NAMES), [_ms(self.limits.lock_timeout), statement, statement]

    def seconds(self, name: str) -> float:
        """The limit ``name`` in seconds, as last applied (dsh's own before any was)."""
        default = (
            self.limits.lock_timeout if name == "lock_timeout" else self.limits.statement_timeout
        )
        ms = self.chosen.get(name, (_ms(default), False))[0]
        return ms / 1000

    def words(self, name: str) -> str:
        """``statement_timeout`` or ``statement_timeout, set on the server by its
        administrator`` (for the words of an error)."""
        if self.chosen.get(name, (0, False))[1]:
            return f"{name}, set on the server by its administrator"
        return name


async def apply_limits(
    conn: asyncpg.Connection, applied: AppliedLimits, *, local: bool = False
) -> None:
    """Set ``conn``'s limits to the stricter of dsh's and the admin's (``local``: for the
    current transaction only) and remember what was chosen in ``applied``."""
    names, values = applied.wanted()
    as_text = [str(value) for value in values]
    rows = await conn.fetch(LIMITS_SQL, names, as_text, local, conn.get_server_pid())
    for name, ms, admin, _ in rows:
        applied.chosen[str(name)] = (int(ms), bool(admin))


async def pooled_limits(conn: asyncpg.Connection, applied: AppliedLimits) -> dict[str, str]:
    """Behind a pooler: the limits each transaction sets (``{name: "…ms"}``), the stricter
    of dsh's and the admin's as a server connection of the pool starts with them (read in
    a transaction: its statements reach one server connection)."""
    names, values = applied.wanted()
    async with conn.transaction():
        theirs = {str(n): int(v) for n, v in await conn.fetch(_ADMIN_SQL, names)}
    chosen: dict[str, str] = {}
    for name, ours in zip(names, values, strict=True):
        admin = 0 < theirs.get(name, 0) < ours
        ms = theirs[name] if admin else ours
        applied.chosen[name] = (ms, admin)
        chosen[name] = f"{ms}ms"
    return chosen

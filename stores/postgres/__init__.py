"""``PostgresSessionStore``: the ``SessionStore`` on a PostgreSQL server (asyncpg), for teams.

The same rules as the SQLite store, kept the same way: text the user controls (ids, cwds,
event types) is stored as ``bytea`` of its ``surrogatepass`` UTF-8 (every Python ``str``
round-trips, NUL and lone surrogates included, and byte order is code-point order); event
data is the JavaScript-identical JSON text of ``core.jsoncodec`` in a ``text`` column (not
``jsonb``, which would reorder keys and refuses ``\\u0000``).

Sessions have an integer key; events are keyed ``(session_key, seq)``. Seqs come from the
session row's ``next_seq``: the ``UPDATE`` that reserves them locks that row, so concurrent
appends to one session (any process, any host) queue there and seqs stay contiguous; the
primary key is only the last line of defence. Every operation is one transaction.

asyncpg was chosen over psycopg 3 by measuring both on dsh's append and read shapes
(see the commit that added this file): about 1.5x faster appends and 1.2x faster reads.

One module per concern: ``connection`` (the pool, transactions, retries), ``schema``
(``MIGRATIONS``), ``security`` (row-level security), ``team`` (what members may do),
``pairs`` and ``pooling`` (schema steps of their own), ``writes``, ``reads``, ``surfaces``,
``search``, ``leases``, ``sharing``, ``listen`` (change tracking), ``rows`` (listings),
``limits`` and ``location`` (time limits, URLs); ``store`` puts them together. Those
modules import one another directly, never this one. What every store decides the same
way is not here but beside it, backend-free: ``stores.surfaces``, ``stores.search``,
``stores.sharing``.

The names below load their module when first asked for: importing a light module of the
package (``stores.postgres.location``, to show a URL) does not load the driver; asyncpg
loads with the store (``stores.location.open_store``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

if TYPE_CHECKING:
    from stores.postgres.connection import CHANGES_CHANNEL
    from stores.postgres.schema import _MIGRATION_LOCK, MIGRATIONS, SCHEMA_VERSION
    from stores.postgres.security import session_row_security
    from stores.postgres.store import CHUNK_FLUSH_SECONDS, PostgresSessionStore
    from stores.postgres.surfaces import _backfill_surfaces
    from stores.postgres.team import GROUP_ROLE

__all__ = [
    "CHANGES_CHANNEL",
    "CHUNK_FLUSH_SECONDS",
    "GROUP_ROLE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "_MIGRATION_LOCK",
    "PostgresSessionStore",
    "_backfill_surfaces",
    "session_row_security",
]

_HOMES = {
    "CHANGES_CHANNEL": "connection",
    "CHUNK_FLUSH_SECONDS": "store",
    "GROUP_ROLE": "team",
    "MIGRATIONS": "schema",
    "SCHEMA_VERSION": "schema",
    "_MIGRATION_LOCK": "schema",
    "PostgresSessionStore": "store",
    "_backfill_surfaces": "surfaces",
    "session_row_security": "security",
}
"""The module of the package each exported name lives in."""


__getattr__ = lazy_names(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()})

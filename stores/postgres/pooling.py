"""PostgreSQL behind a transaction-pooling proxy (PgBouncer), and following other writers
without LISTEN/NOTIFY.

A pooler in transaction mode hands each transaction whichever server connection is free,
so nothing may outlive a transaction:

- *startup parameters*: PgBouncer refuses any beyond a few (``unsupported startup
  parameter``), and those it forwards would be lost with the connection. dsh's limits
  (``lock_timeout``…) and the URL's own server settings (``?search_path=…``) are set with
  ``set_config(…, true)`` at the start of every transaction instead (``local_settings_sql``);
- *prepared statements*: asyncpg's statement cache is turned off, and every statement runs
  inside a transaction (its parse and its execution reach the same server connection);
- *LISTEN*: a notification reaches whichever client holds the server connection then, or
  nobody. Other writers are followed by polling a counter instead (``ChangePoller``).

Every writer, pooled or not, bumps the ``dsh_changes`` sequence in its transaction (after
its first write) and notifies the ``dsh_changes`` channel, so listeners and pollers on one
database follow each other whatever their connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "BOUND_SQL",
    "CHANGES_SEQUENCE",
    "POLL_SQL",
    "XMIN_SQL",
    "ChangePoller",
    "local_settings_sql",
    "looks_like_pooler",
    "split_server_settings",
]

CHANGES_SEQUENCE = "dsh_changes"
"""Bumped by every write transaction (``nextval``): what pollers watch."""

# The URL query options the driver takes as connection parameters; any other is a server
# setting it would send at startup (asyncpg's rule, as libpq's ``options``).
_CONNECTION_OPTIONS = frozenset(
    {
        "host",
        "port",
        "dbname",
        "database",
        "user",
        "password",
        "passfile",
        "service",
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslnegotiation",
        "sslcrl",
        "sslpassword",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
        "application_name",
    }
)

# What a poll reads: the counter; when it moved, a bound on the ids of the transactions
# that moved it (``pg_current_xact_id``: the poll's own new id, above every id given out
# before it; only then, so a quiet poll writes nothing); and then the oldest transaction
# still running (``xmin`` of a snapshot taken after both).
# (A new sequence says 1 before its first ``nextval`` and after it: ``is_called`` tells.)
POLL_SQL = (
    f"SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {CHANGES_SEQUENCE}"
)
BOUND_SQL = "SELECT pg_current_xact_id()::text::numeric"
XMIN_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::numeric"


def split_server_settings(dsn: str) -> tuple[str, dict[str, str]]:
    """``dsn`` without its server settings (``?search_path=…``), and those settings."""
    parts = urlsplit(dsn)
    keep: list[tuple[str, str]] = []
    settings: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _CONNECTION_OPTIONS:
            keep.append((key, value))
        else:
            settings[key] = value
    return urlunsplit(parts._replace(query=urlencode(keep))), settings


def _literal(text: str) -> str:
    if "\x00" in text:
        raise ValueError("a server setting may not hold a NUL character")
    return "'" + text.replace("'", "''") + "'"


def local_settings_sql(settings: Mapping[str, str]) -> str:
    """One statement setting ``settings`` for the current transaction only (as a startup
    parameter would be parsed: ``search_path=a,b`` is a list)."""
    calls = ", ".join(
        f"set_config({_literal(name)}, {_literal(value)}, true)" for name, value in settings.items()
    )
    return f"SELECT {calls}" if calls else ""


def looks_like_pooler(err: BaseException) -> bool:
    """Whether connecting or running a statement failed the way a transaction pooler makes
    a direct client fail: a startup parameter refused, a prepared statement that the next
    transaction's server connection never saw."""
    import asyncpg

    said = str(err)
    if "unsupported startup parameter" in said:
        return True
    return isinstance(
        err, (asyncpg.InvalidSQLStatementNameError, asyncpg.DuplicatePreparedStatementError)
    )


class ChangePoller:
    """Counts other writers' commits from polls of the ``dsh_changes`` sequence.

    A writer bumps the sequence inside its transaction, after its first write (so it has a
    transaction id) and before it commits: a poll may see the bump while the rows are not
    yet visible, and a reader that looked then would miss them. So when a poll sees the
    counter move, it takes a transaction id of its own (``bound``: above the id of every
    writer whose bump it read), and the change is counted again, once, at the first poll
    whose snapshot ``xmin`` reaches that bound: every one of those writers has ended. On
    a quiet server that is the same poll: one change, one count. (A snapshot's ``xmax``
    would not do: it is one past the newest *ended* transaction, and a writer that began
    later is below no ``xmax`` yet.)

    Own writes move the sequence too: the ``own`` bumps (counted by the store) are taken
    off, so a lone writer's polls report nothing.
    """

    __slots__ = ("_barrier", "_count", "_own_seen", "_raw")

    def __init__(self) -> None:
        self._raw: int | None = None
        self._own_seen = 0
        self._barrier: int | None = None
        self._count = 0

    @property
    def count(self) -> int:
        """Changes made by others so far (the store's change token)."""
        return self._count

    def wants_bound(self, value: int, own: int) -> bool:
        """Whether this reading of the counter shows others' bumps (or is the first), so
        the poll must take a ``bound`` before it reads ``xmin``."""
        return self._raw is None or (value - self._raw) != (own - self._own_seen)

    def observe(self, value: int, bound: Any, xmin: Any, own: int) -> int:
        """Take one poll's reading: the counter's ``value`` (read first), the ``bound``
        (taken when ``wants_bound`` said so, else ``None``), then the oldest running
        transaction ``xmin``; ``own`` is how many bumps this store has made in all.
        Returns the count."""
        changed = self._raw is not None and self.wants_bound(value, own)
        self._raw, self._own_seen = value, own
        if bound is not None:  # a writer mid-commit is counted again when it ends
            self._barrier = max(self._barrier or 0, int(bound))
        if self._barrier is not None and int(xmin) >= self._barrier:
            self._barrier = None
            changed = True
        if changed:
            self._count += 1
        return self._count

    def missed(self) -> int:
        """The connection was lost: anything may have changed meanwhile."""
        self._count += 1
        self._raw = None
        self._barrier = None
        return self._count


def changes_step(group_role: str) -> tuple[str, ...]:
    """The schema step of issue 34: the counter every write bumps, which every member may
    bump and read (``nextval`` and ``last_value``; not set it back: no UPDATE)."""
    return (
        f"CREATE SEQUENCE {CHANGES_SEQUENCE}",
        f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{group_role}') THEN "
        f"GRANT USAGE, SELECT ON SEQUENCE {CHANGES_SEQUENCE} TO {group_role}; END IF; END $$",
    )

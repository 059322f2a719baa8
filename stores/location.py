"""``open_store``: the one door to a store. Hosts never name a store class.

``default_location`` (``core.config``) is re-exported here for hosts.

A location is a path (SQLite) or a ``postgresql://`` URL (PostgreSQL); ``None`` means the
default (``$DSH_DB``, else the platform's data directory).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from core.config import PostgresLimits, default_location, is_database_url
from core.store import SessionStore

__all__ = ["default_location", "display_location", "open_store"]


async def open_store(
    location: str | os.PathLike[str] | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    postgres: PostgresLimits | None = None,
) -> SessionStore:
    """Open (creating or migrating as needed) the store at ``location``. ``progress``
    (done, in all) follows a long upgrade: the indexing of an existing database's
    sessions for search. ``postgres``: the timeouts of a PostgreSQL store's statements
    (the config's ``[postgres]``; defaults when ``None``)."""
    if location is None:
        location = default_location()
    if isinstance(location, str) and is_database_url(location):
        from stores.postgres import PostgresSessionStore  # the driver loads only when used

        return await PostgresSessionStore.open(
            location, progress=progress, limits=postgres or PostgresLimits()
        )
    from stores.sqlite import SqliteSessionStore

    return await SqliteSessionStore.open(location, progress=progress)


def display_location(location: str | os.PathLike[str]) -> str:
    """How a user reads ``location``: the path, or the URL without its password."""
    if isinstance(location, str) and is_database_url(location):
        from stores.postgres.location import PgLocation

        try:
            return PgLocation.parse(location).display
        except Exception:  # an unparsable URL: show nothing that may be a credential
            return "the database URL"
    return os.fspath(location)

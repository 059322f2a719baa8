"""Persistence and queries: the session stores and ``SessionQuery`` (imports ``core`` only).

The names load their module when first asked for (``stores.sqlite.oneshot`` loads neither
the memory store nor the async SQLite store)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

if TYPE_CHECKING:
    from core.config import default_database_path
    from core.query import SessionTitle, SurfaceSnapshot
    from stores.base import SessionStore
    from stores.location import default_location, display_location, open_store
    from stores.memory import MemorySessionStore
    from stores.query import SessionQuery
    from stores.sqlite import SqliteSessionStore

__all__ = [
    "MemorySessionStore",
    "SessionQuery",
    "SessionStore",
    "SessionTitle",
    "SqliteSessionStore",
    "SurfaceSnapshot",
    "default_database_path",
    "default_location",
    "display_location",
    "open_store",
]

_HOMES = {
    "default_database_path": "core.config",
    "SessionTitle": "core.query",
    "SurfaceSnapshot": "core.query",
    "SessionStore": "stores.base",
    "default_location": "stores.location",
    "display_location": "stores.location",
    "open_store": "stores.location",
    "MemorySessionStore": "stores.memory",
    "SessionQuery": "stores.query",
    "SqliteSessionStore": "stores.sqlite",
}
"""The module each name lives in (the package's names load it when first asked for)."""


__getattr__ = lazy_names(__name__, _HOMES)

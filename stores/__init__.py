"""Persistence and queries: the session stores and ``SessionQuery`` (imports ``core`` only)."""

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

"""Persistence and queries: the session stores and ``SessionQuery`` (imports ``core`` only)."""

from core.config import default_database_path
from core.query import SessionTitle, SurfaceSnapshot
from stores.base import SessionStore
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
]

"""Where dsh keeps its database by default."""

from __future__ import annotations

import os
from pathlib import Path

from core.config import database_path
from core.config import default_database_path as platform_database_path

__all__ = ["DSH_DB_ENV", "default_database_path"]

DSH_DB_ENV = "DSH_DB"


def default_database_path() -> Path:
    """The session database file: ``$DSH_DB`` when set (``~`` and ``$VAR`` are expanded; a
    path still relative is a ``ConfigError``, as in the config), otherwise ``dsh.sqlite3``
    in the platform's user data directory (e.g. ``~/.local/share/dsh``).

    Only computes the path; ``SqliteSessionStore.open`` creates missing parent directories.
    """
    override = os.environ.get(DSH_DB_ENV)
    if override:
        return database_path(override, DSH_DB_ENV)
    return platform_database_path()

"""The one session filter of every front end (the app's sidebar, ``dsh mcp``'s
``list_sessions``): a session matches the words typed when its id, title or cwd contains
them, case-insensitively; and one working directory names the same folder however it is
spelled (``/a/b/`` and ``/a/./b``)."""

from __future__ import annotations

import os

__all__ = ["same_dir", "session_matches"]


def session_matches(query: str, session_id: str, title: str | None, cwd: str | None) -> bool:
    """Whether the session's id, title or cwd contains ``query`` (``str.casefold``; the
    caller strips it: an empty query matches every session)."""
    needle = query.casefold()
    return any(needle in value.casefold() for value in (session_id, title or "", cwd or ""))


def same_dir(a: str, b: str) -> bool:
    """Whether two working directories are the same path, once normalised."""
    return a == b or os.path.normpath(a) == os.path.normpath(b)

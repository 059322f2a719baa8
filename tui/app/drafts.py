"""Unsent drafts, one per session, kept outside the log so that they survive a restart.

One small JSON file per database (``{"version": 1, "drafts": {session_id: text}}``) in
``platformdirs.user_state_dir("dsh")``, named after a hash of the database's location.
Every function here does blocking file I/O: the TUI calls them in a worker thread. A
missing, unreadable or malformed file reads as "no drafts" (a draft is a convenience, never
a reason not to start); a write goes to a temporary file that replaces the old one, so a
crash or a full disk never leaves half a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from tui.shared.files import write_atomically

__all__ = ["DraftKeeper", "drafts_path", "load_drafts", "save_drafts"]

_VERSION = 1
MAX_DRAFT_CHARS = 1_000_000
"""A draft longer than this is not kept across restarts (the file stays small)."""


def drafts_path(database: str | os.PathLike[str], state_dir: Path | None = None) -> Path:
    """Where the drafts of ``database`` live (one file per database location)."""
    base = state_dir if state_dir is not None else Path(platformdirs.user_state_dir("dsh"))
    location = os.fspath(database)
    digest = hashlib.sha256(location.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return base / "drafts" / f"{digest}.json"


def load_drafts(path: Path) -> dict[str, str]:
    """The saved drafts (``{}`` when there are none or the file cannot be read)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        return {}
    drafts = raw.get("drafts")
    if not isinstance(drafts, dict):
        return {}
    return {
        key: value
        for key, value in drafts.items()
        if isinstance(key, str) and isinstance(value, str) and value.strip()
    }


def save_drafts(path: Path, drafts: Mapping[str, str]) -> None:
    """Replace the file by ``drafts`` (blank ones dropped; none at all removes the file).

    Raises ``OSError`` when the directory cannot be made or the disk is full; the old file
    is then left as it was.
    """
    kept = {
        key: value
        for key, value in drafts.items()
        if value.strip() and len(value) <= MAX_DRAFT_CHARS
    }
    if not kept:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps({"version": _VERSION, "drafts": kept}, ensure_ascii=True)
    write_atomically(path, data)  # private (0600), never through a symlink


class DraftKeeper:
    """The drafts of one database while the TUI runs: kept per session in memory, written
    to :func:`drafts_path` in a worker thread (one write at a time, the newest state last).

    ``path`` ``None`` keeps drafts in memory only (nothing survives a restart).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._drafts: dict[str, str] = {}
        self._dirty = False
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the saved drafts (in a thread); drafts typed meanwhile win."""
        if self.path is None:
            return
        saved = await asyncio.to_thread(load_drafts, self.path)
        self._drafts = {**saved, **self._drafts}

    def get(self, session_id: str) -> str:
        return self._drafts.get(session_id, "")

    def set(self, session_id: str, text: str) -> bool:
        """Remember ``text`` as the draft of ``session_id``; True when that changed anything."""
        old = self._drafts.get(session_id, "")
        if text.strip():
            self._drafts[session_id] = text
        else:
            self._drafts.pop(session_id, None)
        changed = self._drafts.get(session_id, "") != old
        self._dirty = self._dirty or changed
        return changed

    async def flush(self) -> None:
        """Write the drafts if they changed since the last write (in a thread).

        Raises ``OSError`` when the file cannot be written (the drafts stay in memory and
        the next flush tries again).
        """
        if self.path is None:
            self._dirty = False
            return
        async with self._lock:
            while self._dirty:
                self._dirty = False
                snapshot = dict(self._drafts)
                try:
                    await asyncio.to_thread(save_drafts, self.path, snapshot)
                except OSError:
                    self._dirty = True
                    raise

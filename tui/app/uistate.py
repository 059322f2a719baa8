"""What the terminal UI remembers between runs (the theme, and the session open at quit in
each database), in one small JSON file.

The file lives in the user's state directory (``platformdirs.user_state_dir("dsh")``), not
in the database: it is a preference of this terminal, not part of any session. Reading and
writing are plain blocking functions; the app calls them off its event loop. A missing,
unreadable or malformed file is the same as an empty one, and a write replaces the file
atomically (a crash or a full disk never leaves half a file behind).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from tui.shared.files import write_atomically

__all__ = [
    "UiState",
    "UiStateKeeper",
    "default_state_path",
    "load_ui_state",
    "save_ui_state",
    "write_text_atomically",
]

STATE_FILE = "tui.json"
MAX_DATABASES = 32
"""How many databases' open sessions are remembered (the least recently used is forgotten)."""


@dataclass(frozen=True, slots=True)
class UiState:
    theme: str | None = None
    open_sessions: Mapping[str, str] = field(default_factory=dict)
    """Database location → the session open when the app last showed that database, the
    most recently used database last."""

    def open_session(self, database: str) -> str | None:
        return self.open_sessions.get(database)

    def with_open_session(self, database: str, session_id: str) -> UiState:
        sessions = {k: v for k, v in self.open_sessions.items() if k != database}
        sessions[database] = session_id
        return replace(self, open_sessions=dict(list(sessions.items())[-MAX_DATABASES:]))


def default_state_path() -> Path:
    return Path(platformdirs.user_state_dir("dsh")) / STATE_FILE


def load_ui_state(path: Path) -> UiState:
    """The saved state; an empty one when the file is missing or not what we wrote."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return UiState()
    if not isinstance(data, dict):
        return UiState()
    theme = data.get("theme")
    sessions = data.get("open_sessions")
    return UiState(
        theme=theme if isinstance(theme, str) and theme else None,
        open_sessions={
            k: v for k, v in sessions.items() if isinstance(k, str) and isinstance(v, str)
        }
        if isinstance(sessions, dict)
        else {},
    )


def save_ui_state(path: Path, state: UiState) -> None:
    """Write ``state`` to ``path`` atomically (ASCII: an id's lone surrogate is escaped)."""
    data = {"theme": state.theme, "open_sessions": dict(state.open_sessions)}
    write_text_atomically(path, json.dumps(data, ensure_ascii=True) + "\n")


class UiStateKeeper:
    """The app's UI state and its file (``None``: nothing is kept). Saves run one at a time
    off the event loop and write the latest state, so a slower, older save never lands last."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.state = UiState()
        self._saved = UiState()
        self._lock = asyncio.Lock()

    async def load(self) -> UiState:
        if self.path is not None:
            self.state = self._saved = await asyncio.to_thread(load_ui_state, self.path)
        return self.state

    async def save(self) -> None:
        """Write the state if it changed since the last write (``OSError`` when it fails)."""
        async with self._lock:
            state = self.state
            if self.path is None or state == self._saved:
                return
            await asyncio.to_thread(save_ui_state, self.path, state)
            self._saved = state


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (``tui.shared.files``), creating the folder
    if needed: readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)

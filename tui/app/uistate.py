"""What the terminal UI remembers between runs (today: the theme), in one small JSON file.

The file lives in the user's state directory (``platformdirs.user_state_dir("dsh")``), not
in the database: it is a preference of this terminal, not part of any session. Reading and
writing are plain blocking functions; the app calls them off its event loop. A missing,
unreadable or malformed file is the same as an empty one, and a write replaces the file
atomically (a crash or a full disk never leaves half a file behind).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from tui.shared.files import write_atomically

__all__ = [
    "UiState",
    "default_state_path",
    "load_ui_state",
    "save_ui_state",
    "write_text_atomically",
]

STATE_FILE = "tui.json"


@dataclass(frozen=True, slots=True)
class UiState:
    theme: str | None = None


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
    return UiState(theme=theme if isinstance(theme, str) and theme else None)


def save_ui_state(path: Path, state: UiState) -> None:
    """Write ``state`` to ``path`` atomically."""
    write_text_atomically(path, json.dumps({"theme": state.theme}, ensure_ascii=False) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (``tui.shared.files``), creating the folder
    if needed: readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)

"""Saving an SVG screenshot of the app: where it goes, and writing it without surprises.

Textual's own delivery saves into ``~/Downloads`` and fails, saying nothing of why, when that
folder does not exist. dsh creates the folder, falls back to the working directory when it
cannot, never overwrites a file, and lets the caller name the file or the reason it failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import platformdirs

from tui.app.uistate import write_text_atomically

__all__ = ["save_screenshot_file", "screenshot_directory"]


def screenshot_directory() -> Path:
    """The user's downloads folder (it may not exist yet)."""
    return Path(platformdirs.user_downloads_dir())


def _free_name(directory: Path, name: str) -> Path:
    path = directory / name
    stem, suffix = path.stem, path.suffix
    number = 1
    while path.exists():
        number += 1
        path = directory / f"{stem}-{number}{suffix}"
    return path


def save_screenshot_file(svg: str, name: str, directories: Sequence[Path]) -> Path:
    """Write ``svg`` as ``name`` into the first of ``directories`` that works (created when
    missing) and return the file; raises the first directory's ``OSError`` when none works.
    Blocking: call it off the event loop."""
    first_error: OSError | None = None
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = _free_name(directory, name)
            write_text_atomically(path, svg)
        except OSError as err:
            first_error = first_error or err
            continue
        return path
    raise first_error if first_error is not None else OSError("no folder to save into")

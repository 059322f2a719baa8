"""Saving an SVG screenshot of the app: where it goes, and writing it without surprises.

Textual's own delivery saves into ``~/Downloads`` and fails, saying nothing of why, when that
folder does not exist. dsh creates the folder, falls back to the working directory when it
cannot, never overwrites a file (the same naming as exports: ``name (2).svg``), and lets the caller name the file or the reason it failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePath

import platformdirs

from tui.shared.files import write_new_file

__all__ = ["save_screenshot_file", "screenshot_directory", "xml_safe"]

# What XML 1.0 forbids anywhere in a document: C0 controls but TAB, LF and CR, lone
# surrogates, U+FFFE and U+FFFF.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(svg: str) -> str:
    """``svg`` with every character XML 1.0 forbids replaced by U+FFFD (one cell for one):
    the screen shows them escaped (``core.display``), so only text a widget printed raw
    could still hold one, and an SVG with it is not well-formed XML."""
    return _XML_FORBIDDEN.sub("\ufffd", svg)


def screenshot_directory() -> Path:
    """The user's downloads folder (it may not exist yet)."""
    return Path(platformdirs.user_downloads_dir())


def save_screenshot_file(svg: str, name: str, directories: Sequence[Path]) -> Path:
    """Write ``svg`` as ``name`` into the first of ``directories`` that works (created when
    missing) and return the file; raises the first directory's ``OSError`` when none works.
    Blocking: call it off the event loop."""
    first_error: OSError | None = None
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = write_new_file(directory, PurePath(name).stem, PurePath(name).suffix, svg)
        except OSError as err:
            first_error = first_error or err
            continue
        return path
    raise first_error if first_error is not None else OSError("no folder to save into")

"""The reader's face (the ``ForeignFormat`` of ``core.importers.foreign``): which files
are ChatGPT exports, where they are, and their sessions, file by file."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.importers.chatgpt.array import _BOM, _WS
from core.importers.chatgpt.conversations import _read_export
from core.importers.chatgpt.files import (
    _EMPTY_ZIP_MAGIC,
    _MEMBER,
    _ZIP_ERRORS,
    _ZIP_MAGIC,
    RefusedExportError,
    _file_chunks,
    _open_zip,
    _zip_chunks,
)
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from core.importers.source import NotRegularFileError, open_regular_file


def sniff(path: Path, head: bytes) -> bool:
    """A ChatGPT export: a JSON array whose first conversation has a ``mapping`` (or any
    array, for a file named ``conversations.json``), or a ``.zip`` holding one. No other
    tool's log nor dsh's starts with ``[``, and none is a zip."""
    if head.startswith((_ZIP_MAGIC, _EMPTY_ZIP_MAGIC)):
        try:
            with _open_zip(path) as (_archive, _member):
                return True
        except RefusedExportError:
            return True  # an export all the same: reading it says why it is refused
        except (ForeignImportError, *_ZIP_ERRORS):
            return False
    text = head.removeprefix(_BOM).lstrip(_WS)
    if not text.startswith(b"["):
        return False
    rest = text[1:].lstrip(_WS)
    if path.name == _MEMBER and (not rest or rest[:1] in b"{]"):
        return True
    return rest.startswith(b"{") and b'"mapping"' in head


def default_root() -> Path | None:
    """ChatGPT keeps no sessions on this machine: an export is imported by its path."""
    return None


def find_files(root: Path) -> list[Path]:
    """The exports under ``root``: ``.json`` and ``.zip`` files that ``sniff`` takes,
    symlinks (files or folders) not followed."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            if not name.endswith((".json", ".zip")):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                continue
            try:
                with open_regular_file(path) as file:
                    head = file.read(SNIFF_BYTES)
            except OSError:
                continue
            if sniff(path, head):
                found.append(path)
    return sorted(found)


def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
    """Each conversation of each export in ``paths``, one at a time; a conversation or file
    that cannot be read is a ``ForeignImportError`` in its place."""
    for path in paths:
        yield from _read_file(path)


def _read_file(path: Path) -> Iterator[ForeignSession | ForeignImportError]:
    name = os.fspath(path)
    try:
        file = open_regular_file(path)
    except NotRegularFileError as err:
        yield ForeignImportError(name, f"cannot read it: {err.strerror}")
        return
    except OSError as err:
        yield ForeignImportError(name, f"cannot read it: {err.strerror or err}")
        return
    with file:
        head = file.read(len(_ZIP_MAGIC))
        if head.startswith(_ZIP_MAGIC) or head == _EMPTY_ZIP_MAGIC:
            try:
                with _open_zip(file) as (archive, member), archive.open(member) as stream:
                    yield from _read_export(name, _zip_chunks(stream, member))
            except ForeignImportError as err:
                yield ForeignImportError(name, str(err), err.line, err.original_id)
            except _ZIP_ERRORS as err:
                yield ForeignImportError(
                    name, f"not a readable zip archive: {err or type(err).__name__}"
                )
            return
        yield from _read_export(name, _file_chunks(file, head))

"""Files written whole or not at all: the one place dsh writes a file a reader may see.

Exports, drafts, UI state and screenshots all go through here, so a full disk or a crash
mid-write leaves the old file (or none), never a part of the new one.

Every file written here is its user's alone (issue 31): mode 0600 whatever the umask, an
existing file's wider mode narrowed, and a symlink at the name is never written through
(``write_atomically`` replaces the link itself, ``write_new_file`` takes the next name). The
rule is :func:`private_open`, which every writer opens its file with.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "PRIVATE_MODE",
    "private_open",
    "write_atomically",
    "write_new_file",
    "write_streamed_atomically",
]

PRIVATE_MODE = 0o600
"""The mode of every file dsh writes for its user: drafts, UI state, exports, screenshots."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows, where links need privileges
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def private_open(path: Path, flags: int) -> int:
    """``os.open(path, flags)`` for writing a file of dsh's: never through a symlink (one at
    ``path`` is an ``OSError``, ``ELOOP``), created with ``PRIVATE_MODE`` and set to it
    whatever the umask or the file's mode before. Returns the descriptor."""
    fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC, PRIVATE_MODE)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, PRIVATE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_temp(directory: Path, name: str, chunks: Iterable[bytes]) -> Path:
    """``chunks`` in a new hidden private file beside ``name`` in ``directory``, flushed to
    disk; removed again when writing them fails (or making them: they may be lazy)."""
    while True:
        temp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = private_open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return temp


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or file system allows it
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` all or nothing: a private temp file in the same
    directory, fsynced, then renamed over ``path`` (a full disk leaves the old file as it
    was). The file is ``PRIVATE_MODE``; a symlink at ``path`` is replaced by the file, its
    target left untouched. Returns the path written."""
    data = text.encode("utf-8")  # a lone surrogate fails here, before any file is touched
    return _replace(path, (data,))


def write_streamed_atomically(path: Path, chunks: Iterable[str]) -> Path:
    """``write_atomically`` of the text ``chunks`` as they come: an export of a session
    larger than memory. Any failure (a full disk, a chunk that does not encode, an error of
    the reader that makes them) removes the temp file and leaves ``path`` as it was."""
    return _replace(path, (chunk.encode("utf-8") for chunk in chunks))


def _replace(path: Path, chunks: Iterable[bytes]) -> Path:
    target = Path(os.path.abspath(path))
    temp = _write_temp(target.parent, target.name, chunks)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _sync_directory(target.parent)
    return target


def write_new_file(directory: Path, stem: str, suffix: str, text: str) -> Path:
    """Write ``text`` to a file that did not exist: ``stem + suffix``, else ``stem (2)
    + suffix``, ``(3)``… Never overwrites, even when another process creates the same name
    meanwhile (the finished temp file is hard-linked to the name, which fails if it
    exists). Returns the path written."""
    data = text.encode("utf-8")
    temp = _write_temp(directory, stem + suffix, (data,))
    try:
        number = 1
        while True:
            name = f"{stem}{suffix}" if number == 1 else f"{stem} ({number}){suffix}"
            target = directory / name
            try:
                os.link(temp, target)
            except FileExistsError:
                number += 1
                continue
            except OSError:  # no hard links here (FAT, some network shares)
                if target.exists() or target.is_symlink():
                    number += 1
                    continue
                os.replace(temp, target)
            break
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    _sync_directory(directory)
    return target

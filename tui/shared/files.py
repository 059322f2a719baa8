"""Files written whole or not at all: the one place dsh writes a file a reader may see.

Exports, drafts, UI state and screenshots all go through here, so a full disk or a crash
mid-write leaves the old file (or none), never a part of the new one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_atomically", "write_new_file", "write_streamed_atomically"]


def _write_temp(directory: Path, name: str, data: bytes, mode: int = 0o666) -> Path:
    """``data`` in a new hidden file beside ``name`` in ``directory``, flushed to disk
    (``mode`` less the umask: by default an ordinary new file)."""
    while True:
        temp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
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


def write_atomically(path: Path, text: str, *, new_mode: int = 0o666) -> Path:
    """Write ``text`` (UTF-8) to ``path`` all or nothing: a temp file in the same directory,
    fsynced, then renamed over ``path`` (a full disk leaves the old file as it was). A
    symlink is followed; an existing file keeps its permissions, a new one gets ``new_mode``
    less the umask. Returns the path written."""
    data = text.encode("utf-8")  # a lone surrogate fails here, before any file is touched
    target = Path(os.path.realpath(path))
    temp = _write_temp(target.parent, target.name, data, new_mode)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, target.stat().st_mode & 0o7777)
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
    temp = _write_temp(directory, stem + suffix, data)
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


def write_streamed_atomically(path: Path, chunks: Iterable[str]) -> Path:
    """Write the text ``chunks`` (UTF-8) to ``path`` as they come, all or nothing: an
    export of a session larger than memory. They go into a new temp file of mode 0600
    beside ``path``, which is fsynced and renamed over ``path`` only once the last chunk
    is written; any failure (a full disk, a chunk that does not encode, an error of the
    reader that makes them) removes it and leaves ``path`` as it was. A symlink at
    ``path`` is replaced, never followed; the file written is 0600 (the user's own).
    Returns the path written."""
    target = Path(path)
    directory = target.parent
    while True:
        temp = directory / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o600)  # whatever the umask
            for chunk in chunks:
                out.write(chunk.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _sync_directory(directory)
    return target

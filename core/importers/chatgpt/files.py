"""The export's bytes: a plain ``conversations.json`` read a chunk at a time, or the
member of that name in a ``.zip`` read in place, the archive checked (directory, declared
size, compression ratio) before anything is decompressed."""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

from core.importers import bounds
from core.importers.foreign import ForeignImportError
from core.importers.source import open_regular_file

MAX_ZIP_MEMBER_BYTES = bounds.MAX_LOG_BYTES
"""The most ``conversations.json`` may decompress to from a ``.zip`` (4 GiB)."""
MAX_ZIP_RATIO = 100
"""The most a ``conversations.json`` over ``_RATIO_FLOOR`` may be compressed (JSON text
deflates 5 to 20 times; a zip bomb a thousand)."""
_RATIO_FLOOR = 16 * 1024**2
_MAX_ZIP_ENTRIES = 1_000_000
_MAX_ZIP_DIRECTORY = 256 * 1024**2
_MEMBER = "conversations.json"
_READ = 1 << 20
_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)


def _file_chunks(file: BinaryIO, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while chunk := file.read(_READ):
        yield chunk


class _ZipGuard:
    """The archive and its member, closed together (with the file, when opened here)."""

    def __init__(
        self, archive: zipfile.ZipFile, member: zipfile.ZipInfo, owned: BinaryIO | None
    ) -> None:
        self.archive, self.member, self.owned = archive, member, owned

    def __enter__(self) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
        return self.archive, self.member

    def __exit__(self, *exc: object) -> None:
        self.archive.close()
        if self.owned is not None:
            self.owned.close()


class RefusedExportError(ForeignImportError):
    """A zip archive holding a ``conversations.json`` that dsh refuses to read (encrypted,
    too large, a zip bomb): an export all the same, so ``sniff`` takes it and the
    import says why, instead of judging the file by another format."""


def _open_zip(source: Path | BinaryIO) -> _ZipGuard:
    """The archive and its ``conversations.json``, checked before anything is
    decompressed: ``ForeignImportError`` for a directory too large, no such member, an
    encrypted one, a declared size or compression ratio out of bounds."""
    owned = open_regular_file(source) if isinstance(source, Path) else None
    file = owned if owned is not None else source
    assert not isinstance(file, Path)
    name = os.fspath(source) if isinstance(source, Path) else ""
    try:
        _check_directory(file, name)
        try:
            archive = zipfile.ZipFile(file)
        except _ZIP_ERRORS as err:
            raise ForeignImportError(
                name, f"not a readable zip archive: {err or type(err).__name__}"
            ) from err
        try:
            member = _member(archive, name)
        except BaseException:
            archive.close()
            raise
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return _ZipGuard(archive, member, owned)


def _check_directory(file: BinaryIO, name: str) -> None:
    """Refuse an archive whose central directory (read whole by ``zipfile``) is huge."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:  # pragma: no cover - every CPython 3.11+ has it
        return
    record = end_record(file)
    if record is None:
        raise ForeignImportError(name, "not a zip archive (no end of central directory)")
    entries = record[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]
    size = record[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    if entries > _MAX_ZIP_ENTRIES or size > _MAX_ZIP_DIRECTORY:
        raise ForeignImportError(
            name,
            f"the zip archive lists {entries:,} entries in {size:,} bytes, more than dsh "
            f"reads ({_MAX_ZIP_ENTRIES:,} entries, {_MAX_ZIP_DIRECTORY:,} bytes)",
        )


def _member(archive: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    candidates = [
        info
        for info in archive.infolist()
        if not info.is_dir() and info.filename.rsplit("/", 1)[-1] == _MEMBER
    ]
    if not candidates:
        raise ForeignImportError(name, f"the zip archive holds no {_MEMBER}")
    member = min(candidates, key=lambda info: (info.filename.count("/"), info.filename))
    if member.flag_bits & 0x1:
        raise RefusedExportError(name, f"{_MEMBER} is encrypted in the zip archive")
    declared, packed = member.file_size, member.compress_size
    if declared > MAX_ZIP_MEMBER_BYTES:
        raise RefusedExportError(
            name,
            f"{_MEMBER} would decompress to {declared:,} bytes, more than the "
            f"{MAX_ZIP_MEMBER_BYTES:,} dsh reads",
        )
    if declared > _RATIO_FLOOR and declared > MAX_ZIP_RATIO * max(packed, 1):
        raise RefusedExportError(
            name,
            f"{_MEMBER} is compressed {declared // max(packed, 1):,} to 1, more than the "
            f"{MAX_ZIP_RATIO} to 1 of any real export: refused as a zip bomb",
        )
    return member


def _zip_chunks(stream: IO[bytes], member: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's bytes, stopped past its declared size (``zipfile`` already stops
    there; this does not rely on it)."""
    total = 0
    while True:
        try:
            chunk = stream.read(_READ)
        except _ZIP_ERRORS as err:
            raise _SourceError(f"the zip archive is damaged: {err or type(err).__name__}") from err
        if not chunk:
            return
        total += len(chunk)
        if total > member.file_size:
            raise _SourceError(
                f"{_MEMBER} decompresses to more than the {member.file_size:,} bytes it "
                "declares: refused as a zip bomb"
            )
        yield chunk


class _SourceError(Exception):
    """The bytes of the export could not be read further (a damaged archive)."""

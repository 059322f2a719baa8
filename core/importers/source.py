"""Reading a session log file as numbered lines, streamed and bounded (issue 31).

Only a regular file is read: the file is opened without blocking and checked on the open
descriptor (a FIFO would block forever, a device such as ``/dev/zero`` never ends, and a
check by name could be raced). A Zstandard log is decompressed frame by frame, fed a few
hundred bytes at a time, so one call can never produce more than a few MiB whatever the
frame claims; every frame's checksum is verified. The decompressed text is cut into
lines as it comes, and a line longer than ``MAX_LOG_LINE_BYTES`` or a log longer than
``MAX_LOG_BYTES`` stops the reading at once with a ``LogTooLargeError``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from core.importers import bounds
from core.logfile import LogImportError

__all__ = [
    "ZSTD_MAGIC",
    "LogLine",
    "LogTooLargeError",
    "NotRegularFileError",
    "decompressed_chunks",
    "log_lines",
    "open_regular_file",
]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_READ = 1 << 20
_FEED = 512  # compressed bytes per decompression call: at most 512/4 blocks of 128 KiB out
_FRAME_HEADER_MAX = 18
_TORN_ADVICE = "resume it once in deepseek-harness (which repairs a torn end) and import again"
_WHITESPACE = b" \t\r\n\x0b\x0c"


class LogTooLargeError(LogImportError):
    """The log goes past one of ``core.importers.bounds``' limits."""


class NotRegularFileError(OSError):
    """The path names no regular file (a FIFO, a device, a socket, a directory)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading when, once open, it is a regular file (a symlink to one
    is followed); else ``NotRegularFileError`` saying what it is. Never blocks on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind(mode)
            what = kind if kind.startswith("not") else f"not a regular file ({kind})"
            raise NotRegularFileError(0, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _read_chunks(file: BinaryIO) -> Iterator[bytes]:
    while chunk := file.read(_READ):
        yield chunk


def decompressed_chunks(file: BinaryIO, start: bytes = b"") -> Iterator[bytes]:
    """The log's bytes (``start``: what was read of it already): as read, or decompressed
    when it starts with a Zstandard frame. Errors name the first log line a bad frame
    holds (``LogImportError``)."""
    first = start + file.read(_READ)
    if not first.startswith(ZSTD_MAGIC):
        if first:
            yield first
            yield from _read_chunks(file)
        return
    yield from _zstd_frames(first, file)


def _zstd_frames(first: bytes, file: BinaryIO) -> Iterator[bytes]:
    import zstandard  # only a compressed log needs it

    buffer = bytearray(first)
    eof = False

    def fill(need: int) -> None:
        nonlocal eof
        while len(buffer) < need and not eof:
            more = file.read(_READ)
            if more:
                buffer.extend(more)
            else:
                eof = True

    offset = 0  # of the frame in the file
    lines_before = 0
    number = 0
    while True:
        fill(_FRAME_HEADER_MAX)
        if not buffer:
            return
        number += 1
        where = f"Zstandard frame {number} at byte {offset}"
        line = lines_before + 1
        if not buffer.startswith(ZSTD_MAGIC):
            raise LogImportError(
                f"{where}: not a Zstandard frame (the file is damaged or is not a session log)",
                line,
            )
        try:
            has_checksum = zstandard.get_frame_parameters(bytes(buffer)).has_checksum
        except zstandard.ZstdError as err:
            raise LogImportError(f"{where}: the file ends inside the frame header", line) from err
        if not has_checksum:
            raise LogImportError(
                f"{where}: the frame has no checksum, so its content cannot be verified", line
            )
        decoder = zstandard.ZstdDecompressor().decompressobj()
        consumed = 0
        while not decoder.eof:
            fill(_FEED)
            if not buffer:
                raise LogImportError(
                    f"{where}: the file ends inside this frame; {_TORN_ADVICE}", line
                )
            piece = bytes(buffer[:_FEED])
            del buffer[:_FEED]
            try:
                out = decoder.decompress(piece)
            except zstandard.ZstdError as err:
                reason = "checksum mismatch" if "checksum" in str(err) else str(err)
                raise LogImportError(
                    f"{where}: {reason}: the file is damaged; nothing was imported", line
                ) from err
            unused = decoder.unused_data if decoder.eof else b""
            consumed += len(piece) - len(unused)
            if unused:
                buffer[:0] = unused
            if out:
                lines_before += out.count(b"\n")
                yield out
        offset += consumed


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a log (``text`` without its line break); ``ended``: a line break
    followed it (the last line of a torn log has none)."""

    number: int
    text: str
    ended: bool


def log_lines(chunks: Iterator[bytes]) -> Iterator[LogLine]:
    """The lines of the decompressed ``chunks``, bounded by ``MAX_LOG_LINE_BYTES`` and
    ``MAX_LOG_BYTES``. A run of blank lines is given as its first line only (whatever
    follows keeps its number): a reader only ever needs to know where one starts, and a
    flood of line breaks is then counted at the speed of ``bytes.count``."""
    max_line, max_log = bounds.MAX_LOG_LINE_BYTES, bounds.MAX_LOG_BYTES
    pending = bytearray()
    number = 0  # of the last line given or skipped
    total = 0
    blank = False  # the last line was blank

    def too_long() -> LogTooLargeError:
        return LogTooLargeError(
            f"a line is longer than {max_line:,} bytes, the most dsh reads", number + 1
        )

    def emit(raw: bytes | bytearray, ended: bool) -> LogLine | None:
        nonlocal blank
        is_blank = not raw.strip(_WHITESPACE)
        if is_blank and blank and ended:
            return None
        blank = is_blank
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as err:
            raise LogImportError("not valid UTF-8", number) from err
        return LogLine(number, text, ended)

    for chunk in chunks:
        total += len(chunk)
        if total > max_log:
            raise LogTooLargeError(
                f"the log is larger than {max_log:,} bytes (decompressed), the most dsh reads"
            )
        start, size = 0, len(chunk)
        checked = False  # whether the rest of this chunk is known not to be all blank
        while start < size:
            if blank and not checked and not pending.strip(_WHITESPACE):
                rest = chunk[start:] if start else chunk
                if not rest.strip(_WHITESPACE):  # more blank lines: counted, not split
                    last = rest.rfind(b"\n")
                    if last >= 0:
                        number += rest.count(b"\n")
                        pending = bytearray()
                    if len(pending) + len(rest) - last - 1 > max_line:
                        raise too_long()
                    pending += rest[last + 1 :]
                    break
                checked = True
            end = chunk.find(b"\n", start)
            stop = size if end < 0 else end
            if len(pending) + stop - start > max_line:
                raise too_long()
            if end < 0:
                pending += chunk[start:]
                break
            number += 1
            if pending:
                pending += chunk[start:end]
                line = emit(pending, True)
                pending = bytearray()
            else:
                line = emit(chunk[start:end], True)
            if line is not None:
                yield line
            start = end + 1
    if pending:
        number += 1
        line = emit(pending, False)
        if line is not None:
            yield line

"""``dsh import FILE|DIR``: bring session logs (dsh exports, deepseek-harness logs) into the
store. A session already there with the same events is skipped; one with the same id and
different events is reported and never overwritten; a bad log is rejected whole, naming its
file and line, and nothing of it is stored. Only regular files are read (a FIFO or a device
is skipped with a note), streamed and within ``core.importers.bounds``."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from core.display import single_line
from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from core.importers.bounds import MAX_LOG_BYTES
from core.importers.detect import (
    LOG_SUFFIXES,
    LogFormat,
    StreamedLog,
    is_log_name,
    open_session_log,
    same_event,
)
from core.importers.source import LogTooLargeError, NotRegularFileError, open_regular_file
from core.log import SessionHeader
from core.logfile import LogImportError
from core.store import SessionStore
from tui.shared.errors import describe_error

__all__ = [
    "ImportOutcome",
    "ImportSummary",
    "find_logs",
    "import_log",
    "import_path",
    "import_tree",
    "spool_stdin",
]

Status = Literal["imported", "present", "conflict", "rejected", "skipped"]


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    status: Status
    session_id: str | None = None
    reason: str = ""  # for a rejected log: "line N: …"; for a skipped file: why
    format: LogFormat | None = None


@dataclass
class ImportSummary:
    outcomes: list[tuple[str, ImportOutcome]] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for _, o in self.outcomes if o.status == status)


def find_logs(root: Path) -> list[Path]:
    """Every session log under ``root`` (symlinked directories are not followed), sorted.
    Names only: what each is (a regular file or not) is checked when it is opened."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        found.extend(Path(folder, name) for name in sorted(files) if is_log_name(name))
    return found


async def import_log(store: SessionStore, source: bytes | BinaryIO) -> ImportOutcome:
    """Import one log (its bytes, or a seekable file read from its start); never
    overwrites a session. The log is read, validated and stored a batch at a time in one
    transaction: memory is bounded by a batch, and a bad line stores nothing."""
    file = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        log = await asyncio.to_thread(_open, file)
        header = log.header
        for _ in range(2):  # a second look when another writer created it meanwhile
            try:
                stored = await store.read_header(header.id)
            except SessionNotFoundError:
                try:
                    await store.import_session(header, log.batches())
                except SessionExistsError:
                    log = await asyncio.to_thread(_open, file)  # read again from the start
                    continue
                return ImportOutcome("imported", header.id, format=log.format)
            log = await asyncio.to_thread(_open, file)
            same = await _same_as_stored(store, stored, log)
            return ImportOutcome("present" if same else "conflict", header.id, format=log.format)
        return ImportOutcome("conflict", header.id, format=log.format)
    except (LogImportError, InvalidEventError) as err:  # the log, or a rule only the store checks
        return ImportOutcome("rejected", reason=describe_error(err))
    except OSError as err:
        return ImportOutcome("rejected", reason=f"cannot read it: {describe_error(err)}")


def _open(file: BinaryIO) -> StreamedLog:
    file.seek(0)
    return open_session_log(file)


async def _same_as_stored(store: SessionStore, stored: SessionHeader, log: StreamedLog) -> bool:
    """Whether the stored session is exactly the log (``same_log``), both read a batch at a
    time. The log is read to its end even when they differ: a bad log is rejected."""
    header = log.header
    same = (stored.created_at, stored.cwd) == (header.created_at, header.cwd)
    batches = log.batches()
    seq = 0
    while (batch := await asyncio.to_thread(batches.next_batch)) is not None:
        if same:
            try:
                olds = await store.read_events_at(header.id, range(seq, seq + len(batch)))
            except InvalidEventError:  # the stored log is shorter
                same = False
            else:
                same = all(same_event(o, n) for o, n in zip(olds, batch, strict=True))
        seq += len(batch)
    if same:
        try:
            await store.read_events_at(header.id, [seq])
        except InvalidEventError:
            return True  # the stored log ends where the file's does
    return False


async def import_path(store: SessionStore, path: str | os.PathLike[str]) -> ImportOutcome:
    """Import the log at ``path``: only a regular file (or a symlink to one) is read; a
    FIFO, a device or a socket is ``skipped``, saying what it is."""
    try:
        file = await asyncio.to_thread(open_regular_file, path)
    except NotRegularFileError as err:
        return ImportOutcome("skipped", reason=str(err.strerror))
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        return ImportOutcome("rejected", reason=f"cannot read it: {describe_error(err)}")
    try:
        return await import_log(store, file)
    finally:
        file.close()


def spool_stdin() -> BinaryIO:
    """Standard input in a temporary file (a log is read twice when it is already
    stored); at most ``MAX_LOG_BYTES``, else ``LogTooLargeError``."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    try:
        total = 0
        while chunk := sys.stdin.buffer.read(1 << 20):
            total += len(chunk)
            if total > MAX_LOG_BYTES:
                raise LogTooLargeError(f"the log is larger than {MAX_LOG_BYTES:,} bytes")
            out.write(chunk)
        out.seek(0)
        return out
    except BaseException:
        out.close()
        raise


def _progress(done: int, total: int, name: str) -> None:
    width = 20
    filled = width * done // total if total else width
    bar = "#" * filled + "." * (width - filled)
    line = f"[{bar}] {done}/{total} {single_line(name, 50)}"
    sys.stderr.write(f"\r\x1b[K{line}")
    sys.stderr.flush()


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


async def import_tree(store: SessionStore, root: Path) -> ImportSummary:
    """Import every log under ``root``, with a progress bar on a terminal."""
    paths = await asyncio.to_thread(find_logs, root)
    summary = ImportSummary()
    show = _on_terminal()
    for number, path in enumerate(paths, start=1):
        name = str(path.relative_to(root))
        if show:
            _progress(number - 1, len(paths), name)
        summary.outcomes.append((name, await import_path(store, path)))
    if show and paths:
        _progress(len(paths), len(paths), "")
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
    return summary


def summary_lines(root: str, summary: ImportSummary) -> list[str]:
    """The report of ``dsh import DIR``, every name escaped for the terminal."""
    total = len(summary.outcomes)
    if not total:
        suffixes = ", ".join(f"*{s}" for s in LOG_SUFFIXES)
        return [f"no session logs ({suffixes}) under {single_line(root)}"]
    lines = []
    for name, outcome in summary.outcomes:
        where = single_line(name)
        sid = single_line(outcome.session_id or "")
        if outcome.status == "imported":
            lines.append(f"imported: {where} → {sid}")
        elif outcome.status == "present":
            lines.append(f"already present (same events, skipped): {where} → {sid}")
        elif outcome.status == "skipped":
            lines.append(f"skipped: {where}: {outcome.reason}")
        elif outcome.status == "conflict":
            lines.append(
                f"conflict: {where}: session {sid} already exists with different events; "
                "not overwritten"
            )
        else:
            lines.append(f"rejected: {where}: {outcome.reason}")
    lines.append(
        f"{summary.count('imported')} imported, {summary.count('present')} already present, "
        f"{summary.count('conflict')} conflicting (not overwritten), "
        f"{summary.count('rejected')} rejected, of {total} logs"
        + (
            f" ({skipped} skipped: not regular files)"
            if (skipped := summary.count("skipped"))
            else ""
        )
    )
    return lines

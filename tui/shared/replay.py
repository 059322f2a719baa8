"""Opening one session log file for replay (``dsh replay FILE``): read-only, no database.

The file may be dsh's own JSONL export or a reference implementation log (raw or Zstandard);
it is validated exactly as ``dsh import`` would, then held in a :class:`stores.replay.ReplayStore`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from core.batches import EventBatches
from core.config import DshConfig
from core.display import single_line
from core.errors import DshError
from core.importers.bounds import MAX_IMPORT_EVENTS, MAX_LOG_BYTES, MAX_LOG_LINE_BYTES
from core.importers.detect import StreamedLog, open_session_log
from core.importers.reference import looks_like_reference
from core.importers.source import ZSTD_MAGIC, open_regular_file
from core.jsoncodec import loads_exact
from core.log import NewEvent, SessionHeader
from core.logfile import LogImportError, parse_jsonl
from core.providers.offline import OfflineProvider
from stores.progress import terminal_progress
from stores.replay import LazyReplayStore, ReplayDatabase, ReplayStore
from stores.sqlite import SqliteSessionStore
from tui.shared.runtime import Runtime, build_runtime

__all__ = [
    "STREAM_ABOVE_BYTES",
    "Replay",
    "ReplayError",
    "open_replay",
    "replay_now",
    "replay_reason",
    "replay_runtime",
]


STREAM_ABOVE_BYTES = 8 * 1024 * 1024
"""A log file larger than this (compressed: an eighth of it) is replayed from a temporary
SQLite database it is streamed into (``ReplayDatabase``: memory bounded by a page, not by
the log); a smaller one is held in memory, which starts faster."""


class ReplayError(DshError):
    """The file cannot be replayed; the message names the file (and the line, when one is
    at fault) in one line."""


def replay_reason(path: str) -> str:
    """The banner the app shows over a replay (why nothing can be written)."""
    return f"Replay of {single_line(path, 120)} (read-only)"


Replay = ReplayStore | ReplayDatabase
"""A replay's store: the log in memory, or (a large one) in a temporary database."""


async def open_replay(path: str, *, at: int | None = None, lazy: bool = False) -> Replay:
    """The log at ``path`` in a read-only store; with ``at``, only its events up to seq
    ``at`` (the session as it was then). Reading happens off the event loop.

    ``lazy`` (the app): a dsh JSONL log is opened from its lines, its newest page first,
    and checked whole in the background (``LazyReplayStore``; a bad line is reported when
    found). Otherwise, and for other formats, the whole file is checked first and a bad
    one is a ``ReplayError`` naming the line.

    A file above ``STREAM_ABOVE_BYTES`` (any mode) is streamed into a ``ReplayDatabase``
    instead; the caller closes the store (which removes the database)."""
    shown = single_line(path, 120)
    try:
        file = await asyncio.to_thread(open_regular_file, path)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        reason = getattr(err, "strerror", None) or str(err)
        raise ReplayError(f"cannot read {shown}: {single_line(reason)}") from err
    with file:
        if await asyncio.to_thread(_is_large, file):
            return await _streamed_store(file, path, at)
        if lazy and at is None:
            store = await asyncio.to_thread(_lazy_store, file, path)
            if store is not None:
                return store
        try:
            header, events, total = await asyncio.to_thread(_read_log, file, at)
        except LogImportError as err:  # its words start with the line at fault
            raise ReplayError(f"{shown}: {single_line(str(err))}") from err
        except OSError as err:
            reason = err.strerror or str(err)
            raise ReplayError(f"cannot read {shown}: {single_line(reason)}") from err
    if at is not None and not 0 <= at < total:
        raise ReplayError(f"{shown}: --at {at} is outside the log (seqs 0–{total - 1})")
    try:
        return await ReplayStore.holding(header, events, replay_reason(path))
    except DshError as err:
        raise ReplayError(f"{shown}: {single_line(str(err))}") from err


def _is_large(file: BinaryIO) -> bool:
    size = os.fstat(file.fileno()).st_size
    file.seek(0)
    compressed = file.read(len(ZSTD_MAGIC)) == ZSTD_MAGIC
    return size > (STREAM_ABOVE_BYTES // 8 if compressed else STREAM_ABOVE_BYTES)


@dataclass
class _Counted:
    """The events up to seq ``at`` (all without it), counting every event read."""

    at: int | None
    total: int = 0

    def events(self, log: StreamedLog) -> Iterator[NewEvent]:
        for event in log.events:
            if self.at is None or self.total <= self.at:
                yield event
            self.total += 1


async def _streamed_store(file: BinaryIO, path: str, at: int | None) -> ReplayDatabase:
    """The log streamed into a SQLite database in a private temporary folder (0700, the
    file 0600), checked as ``dsh import`` checks it, read-only after. The folder goes
    when the store is closed, when this fails, or at the latest when the process exits."""
    shown = single_line(path, 120)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="dsh-replay-"))
    atexit.register(shutil.rmtree, folder, True)
    store: SqliteSessionStore | None = None
    stop = threading.Event()  # set: the import stops at its next batch (Ctrl+C)
    try:
        db = folder / "replay.sqlite3"
        await asyncio.to_thread(_create_private, db)
        store = await ReplayDatabase.open(db, progress=_quiet)
        assert isinstance(store, ReplayDatabase)
        counted = _Counted(at)
        try:
            file.seek(0)
            log = await asyncio.to_thread(open_session_log, file)
            batches = replace(log, events=counted.events(log)).batches()
            await store.import_session(log.header, EventBatches(_reported(batches, file, stop)))
        except LogImportError as err:  # its words start with the line at fault
            raise ReplayError(f"{shown}: {single_line(str(err))}") from err
        except OSError as err:
            reason = err.strerror or str(err)
            raise ReplayError(f"cannot read {shown}: {single_line(reason)}") from err
        except DshError as err:
            raise ReplayError(f"{shown}: {single_line(str(err))}") from err
        total = counted.total
        if at is not None and not 0 <= at < total:
            raise ReplayError(f"{shown}: --at {at} is outside the log (seqs 0–{total - 1})")
        store.seal(replay_reason(path), folder)
        return store
    except BaseException:
        stop.set()
        if store is not None:
            await store.close()
        await asyncio.to_thread(shutil.rmtree, folder, True)
        raise


def _create_private(path: Path) -> None:
    """An empty file only its owner may read (SQLite gives its -wal and -shm the same)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _reading_words(done: int, total: int) -> str:
    return f"reading the log into a temporary database: {done * 100 // max(total, 1)}%"


def _reported(
    batches: EventBatches, file: BinaryIO, stop: threading.Event
) -> Iterator[Sequence[NewEvent]]:
    """The batches, with a progress line on a terminal (the share of the file read); once
    ``stop`` is set, ``ReplayError`` (the import is rolled back at once, not at its end)."""
    report = terminal_progress(_reading_words)
    size = max(os.fstat(file.fileno()).st_size, 1)
    done = False
    try:
        for batch in batches:
            if stop.is_set():
                raise ReplayError("interrupted")
            if report is not None:
                report(min(file.tell(), size - 1), size)
            yield batch
        done = True
    finally:
        if report is not None:
            if done:
                report(size, size)  # (ends the line)
            else:
                sys.stderr.write("\n")  # an error follows on its own line


def _quiet(done: int, total: int) -> None:
    return None


def _read_log(file: BinaryIO, at: int | None) -> tuple[SessionHeader, list[NewEvent], int]:
    """The log's header, its events (up to seq ``at``) and how many it has: all read and
    checked as ``dsh import`` reads them (streamed, within ``core.importers.bounds``)."""
    file.seek(0)
    log = open_session_log(file)
    events: list[NewEvent] = []
    total = 0
    for event in log.events:
        if at is None or total <= at:
            events.append(event)
        total += 1
    return log.header, events, total


def _lazy_store(file: BinaryIO, path: str) -> LazyReplayStore | None:
    """A ``LazyReplayStore`` over a dsh JSONL log, or ``None`` for anything else (read
    whole instead: another format, a header that is not right, or a file past the bounds,
    which the whole read reports)."""
    if os.fstat(file.fileno()).st_size > MAX_LOG_BYTES:
        return None
    file.seek(0)
    raw = file.read()
    if raw.startswith(ZSTD_MAGIC) or raw.count(b"\n") > MAX_IMPORT_EVENTS + 1:
        return None  # (a flood of blank lines: the whole read counts them without a list)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    del raw
    lines = text.split("\n")
    del text
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or max(map(len, lines)) > MAX_LOG_LINE_BYTES // 4:
        return None  # a line that may be too long: the whole read says which
    try:
        head = loads_exact(lines[0].rstrip("\r"), frozen=False)
        if not isinstance(head, dict) or looks_like_reference(head):
            return None
        header = parse_jsonl(lines[:1]).header
    except (ValueError, LogImportError):
        return None
    events = [line.rstrip("\r") for line in lines[1:]]
    return LazyReplayStore(replay_reason(path), single_line(path, 120), header, events)


def replay_runtime(config: DshConfig, store: Replay) -> Runtime:
    """A runtime over the replay store: its query and reference service (so cards, the
    picker and "what the model received" work); the offline model, which nothing asks."""
    return build_runtime(
        config, store, OfflineProvider(config.effective_model), fixed_provider=True
    )


async def replay_now(store: Replay) -> int:
    """The clock of a replay's pictures: its log's last event (0 for an empty log), so ages
    and the picture depend on the file only."""
    return max((await store.read_last_event_times()).values(), default=0)

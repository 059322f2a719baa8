"""Which kind of session log a file holds, read into one shape: dsh's own JSONL export or a
reference log (raw JSONL or Zstandard frames). Streamed (``open_session_log``: a header,
then events as they are read) and bounded by ``core.importers.bounds``."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal

from core.batches import EventBatches
from core.importers import bounds
from core.importers.reference import ReadStats, looks_like_reference, read_reference
from core.importers.source import (
    ZSTD_MAGIC,
    LogLine,
    LogTooLargeError,
    decompressed_chunks,
    log_lines,
)
from core.jsoncodec import loads_exact
from core.log import Event, NewEvent, SessionHeader
from core.logfile import read_jsonl

__all__ = [
    "LOG_SUFFIXES",
    "LoadedLog",
    "StreamedLog",
    "is_log_name",
    "load_session_log",
    "open_session_log",
    "same_event",
    "same_log",
]

LOG_SUFFIXES = (".jsonl", ".jsonl.zstd", ".jsonl.zst")
"""What ``dsh import DIR`` picks up: dsh exports and reference logs (raw or compressed)."""

LogFormat = Literal["dsh", "reference", "reference-zstd"]


@dataclass(frozen=True, slots=True)
class LoadedLog:
    header: SessionHeader
    events: tuple[NewEvent, ...]
    format: LogFormat
    packed_rows: int = 0


def is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES)


def load_session_log(raw: bytes) -> LoadedLog:
    """The whole log, validated; ``LogImportError`` (with its line) for anything else."""
    log = open_session_log(io.BytesIO(raw))
    events = tuple(log.events)
    return LoadedLog(log.header, events, log.format, log.stats.packed_rows)


@dataclass(slots=True)
class StreamedLog:
    """A log being read: its header, and its events as they are read and validated
    (``LogImportError`` naming the line of the first problem, or of the bound passed)."""

    header: SessionHeader
    events: Iterator[NewEvent]
    format: LogFormat
    stats: ReadStats

    def batches(self) -> EventBatches:
        """The events in batches of at most ``BATCH_EVENTS`` events, or of about
        ``BATCH_BYTES`` of log lines (what a store takes at a time)."""
        return EventBatches(_batched(self.events, self.stats))


BATCH_EVENTS = 1000
BATCH_BYTES = 4 * 1024 * 1024


def _batched(events: Iterator[NewEvent], stats: ReadStats) -> Iterator[list[NewEvent]]:
    batch: list[NewEvent] = []
    start = stats.bytes
    for event in events:
        batch.append(event)
        if len(batch) >= BATCH_EVENTS or stats.bytes - start >= BATCH_BYTES:
            yield batch
            batch, start = [], stats.bytes
    if batch:
        yield batch


def open_session_log(file: BinaryIO) -> StreamedLog:
    """Start reading the log in ``file`` (dsh's JSONL export or a reference log, raw or
    Zstandard): its header is read now, its events as they are asked for. Bounded by
    ``core.importers.bounds``: past one, a ``LogTooLargeError``."""
    stats = ReadStats()
    start = file.read(len(ZSTD_MAGIC))
    lines = _counted(log_lines(decompressed_chunks(file, start)), stats)
    first = next(lines, None)
    if start == ZSTD_MAGIC:
        header, events = read_reference(lines, stats, first)
        return StreamedLog(header, _bounded(events, stats), "reference-zstd", stats)
    try:
        head = loads_exact(first.text, frozen=False) if first is not None else None
    except ValueError:
        head = None
    if first is not None and isinstance(head, dict) and looks_like_reference(head):
        header, events = read_reference(lines, stats, first)
        return StreamedLog(header, _bounded(events, stats), "reference", stats)
    # dsh's own export, whose reader names what is wrong with anything else
    numbered = ((line.number, line.text) for line in lines)
    head_lines = () if first is None else ((first.number, first.text),)
    header, events = read_jsonl(itertools.chain(head_lines, numbered))
    return StreamedLog(header, _bounded(events, stats), "dsh", stats)


def _counted(lines: Iterator[LogLine], stats: ReadStats) -> Iterator[LogLine]:
    for line in lines:
        stats.bytes += len(line.text) + 1
        stats.line = line.number
        yield line


def _bounded(events: Iterator[NewEvent], stats: ReadStats) -> Iterator[NewEvent]:
    limit = bounds.MAX_IMPORT_EVENTS
    for count, event in enumerate(events, start=1):
        if count > limit:
            raise LogTooLargeError(
                f"the log holds more than {limit:,} events, the most dsh imports in one session",
                stats.line,
            )
        yield event


def same_log(
    stored: SessionHeader,
    stored_events: Sequence[Event],
    header: SessionHeader,
    events: Sequence[NewEvent],
) -> bool:
    """Whether a stored session is exactly the log about to be imported (then importing it
    again is a no-op rather than a conflict)."""
    if (stored.created_at, stored.cwd) != (header.created_at, header.cwd):
        return False
    if len(stored_events) != len(events):
        return False
    return all(same_event(old, new) for old, new in zip(stored_events, events, strict=True))


def same_event(old: Event, new: NewEvent) -> bool:
    """Whether a stored event is exactly the log's event about to be imported."""
    new_sources = tuple(new.source_event_seqs) if new.source_event_seqs is not None else None
    return (old.type, old.time, old.surface_op, old.source_event_seqs) == (
        new.type,
        new.time,
        new.surface_op,
        new_sources,
    ) and old.data == new.data

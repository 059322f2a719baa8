"""Which kind of session log a file holds, read into one shape: dsh's own JSONL export or a
reference log (raw JSONL or Zstandard frames). Pure: bytes in, header and events out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from core.importers.reference import ZSTD_MAGIC, looks_like_reference, parse_reference
from core.jsoncodec import loads_exact
from core.log import Event, NewEvent, SessionHeader
from core.logfile import LogImportError, parse_jsonl

__all__ = ["LOG_SUFFIXES", "LoadedLog", "is_log_name", "load_session_log", "same_log"]

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
    if raw.startswith(ZSTD_MAGIC):
        ref = parse_reference(raw)
        return LoadedLog(ref.header, ref.events, "reference-zstd", ref.packed_rows)
    first = raw.split(b"\n", 1)[0]
    try:
        head = loads_exact(first.decode("utf-8"), frozen=False)
    except (UnicodeDecodeError, ValueError):
        head = None
    if isinstance(head, dict) and looks_like_reference(head):
        ref = parse_reference(raw)
        return LoadedLog(ref.header, ref.events, "reference", ref.packed_rows)
    try:  # dsh's own export, whose reader names what is wrong with anything else
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LogImportError("not valid UTF-8", raw[: err.start].count(b"\n") + 1) from err
    log = parse_jsonl(text.split("\n"))
    return LoadedLog(log.header, log.events, "dsh")


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
    for old, new in zip(stored_events, events, strict=True):
        new_sources = tuple(new.source_event_seqs) if new.source_event_seqs is not None else None
        if (old.type, old.time, old.surface_op, old.source_event_seqs) != (
            new.type,
            new.time,
            new.surface_op,
            new_sources,
        ) or old.data != new.data:
            return False
    return True

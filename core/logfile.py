"""The JSONL log format used by ``export --format json`` and ``import``.

First line ``{"type":"session","id","created_at","cwd"}``, then one event per line
``{"seq","type","time","data","surface_op","source_event_seqs"}`` (SPEC §2 wire form).
An export imports back unchanged; an invalid file is rejected whole, naming the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import DshError, InvalidEventError
from core.jsoncodec import dumps_js, loads_exact
from core.jsondepth import json_depth
from core.limits import MAX_JSON_DEPTH, check_header_limits
from core.log import (
    Event,
    NewEvent,
    SessionHeader,
    surface_op_from_json,
    surface_op_to_json,
    validate_new_event,
)
from core.surface import SurfaceFolder
from core.timestamps import check_epoch_ms

__all__ = [
    "ImportedLog",
    "LogImportError",
    "check_record_depth",
    "event_to_json",
    "export_jsonl",
    "header_to_json",
    "parse_jsonl",
    "read_jsonl",
]

_EVENT_KEYS = {"seq", "type", "time", "data", "surface_op", "source_event_seqs"}


class LogImportError(DshError, ValueError):
    """The file is not a valid dsh log; ``line`` is 1-based (0 when not about one line)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


def check_record_depth(line: str, number: int) -> None:
    """For a line that did not parse: ``LogImportError`` when it nests deeper than
    ``MAX_JSON_DEPTH`` levels (a parser's recursion gave up on it), so that the user reads
    that rather than a parser's words."""
    if json_depth(line) > MAX_JSON_DEPTH:  # exact on any text, even a torn one
        raise LogImportError(f"the record nests deeper than {MAX_JSON_DEPTH} levels", number)


@dataclass(frozen=True, slots=True)
class ImportedLog:
    header: SessionHeader
    events: tuple[NewEvent, ...]


def header_to_json(header: SessionHeader) -> dict[str, Any]:
    return {"type": "session", "id": header.id, "created_at": header.created_at, "cwd": header.cwd}


def event_to_json(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "type": event.type,
        "time": event.time,
        "data": event.data,
        "surface_op": surface_op_to_json(event.surface_op),
        "source_event_seqs": list(event.source_event_seqs)
        if event.source_event_seqs is not None
        else None,
    }


def export_jsonl(header: SessionHeader, events: Iterable[Event]) -> Iterator[str]:
    """The lines of the export (each without its newline)."""
    yield dumps_js(header_to_json(header))
    for event in events:
        yield dumps_js(event_to_json(event))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_jsonl(lines: Iterable[str]) -> ImportedLog:
    """Validate a whole log: header, contiguous seqs from 0, every event and fold rule."""
    header, events = read_jsonl(enumerate(lines, start=1))
    return ImportedLog(header, tuple(events))


def read_jsonl(
    lines: Iterable[tuple[int, str]],
) -> tuple[SessionHeader, Iterator[NewEvent]]:
    """``parse_jsonl`` streamed: the header (read now) and the events, validated as they
    are asked for (``LogImportError`` naming the line of the first problem). ``lines``
    are ``(number, text)``; a run of blank lines may be given as its first line only."""
    numbered = iter(lines)
    blank_at: int | None = None
    number = 0
    for number, raw in numbered:
        line = raw.rstrip("\r\n")
        if not line.strip():
            blank_at = blank_at or number
            continue
        if blank_at is not None:
            raise LogImportError("blank line inside the log", blank_at)
        return _parse_header(_object(line, number), number), _events(numbered)
    raise LogImportError("the file is empty: expected a session header line", max(number, 1))


def _object(line: str, number: int) -> Mapping[str, Any]:
    try:
        obj = loads_exact(line, frozen=False, unique_keys=True)
    except ValueError as err:
        check_record_depth(line, number)
        raise LogImportError(f"invalid JSON ({err})", number) from err
    if not isinstance(obj, Mapping):
        raise LogImportError("expected a JSON object", number)
    return obj


def _events(lines: Iterator[tuple[int, str]]) -> Iterator[NewEvent]:
    folder: SurfaceFolder[None] = SurfaceFolder()
    blank_at: int | None = None
    seq = 0
    for number, raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip():
            blank_at = blank_at or number
            continue
        if blank_at is not None:
            raise LogImportError("blank line inside the log", blank_at)
        yield _parse_event(_object(line, number), number, seq, folder)
        seq += 1


def _parse_header(obj: Mapping[str, Any], number: int) -> SessionHeader:
    if obj.get("type") != "session":
        raise LogImportError(
            'the first line must be the session header {"type":"session",…}', number
        )
    unknown = set(obj) - {"type", "id", "created_at", "cwd"}
    if unknown:
        raise LogImportError(f"unknown header field {sorted(unknown)[0]!r}", number)
    session_id, created_at, cwd = obj.get("id"), obj.get("created_at"), obj.get("cwd")
    if not isinstance(session_id, str):
        raise LogImportError("the header's id must be a string", number)
    try:
        created_at = check_epoch_ms(created_at, "the header's created_at")
    except InvalidEventError as err:
        raise LogImportError(str(err), number) from err
    if cwd is not None and not isinstance(cwd, str):
        raise LogImportError("the header's cwd must be a string or null", number)
    try:
        check_header_limits(session_id, cwd)
    except InvalidEventError as err:
        raise LogImportError(str(err), number) from err
    return SessionHeader(session_id, created_at, cwd)


def _parse_event(
    obj: Mapping[str, Any], number: int, expected_seq: int, folder: SurfaceFolder[None]
) -> NewEvent:
    missing = _EVENT_KEYS - set(obj)
    if missing:
        raise LogImportError(f"event is missing {sorted(missing)[0]!r}", number)
    unknown = set(obj) - _EVENT_KEYS
    if unknown:
        raise LogImportError(f"unknown event field {sorted(unknown)[0]!r}", number)
    seq = obj["seq"]
    if not _is_int(seq):
        raise LogImportError("seq must be an integer", number)
    if seq != expected_seq:
        raise LogImportError(
            f"expected seq {expected_seq}, found {seq} (seqs have no gaps)", number
        )
    try:
        surface_op = surface_op_from_json(obj["surface_op"])
        sources = obj["source_event_seqs"]
        if sources is not None and not isinstance(sources, list):
            raise InvalidEventError("source_event_seqs must be a list or null")
        time = check_epoch_ms(obj["time"], "time")
        valid = validate_new_event(obj["type"], obj["data"], surface_op, sources, time)
        if valid.surface_op is not None:
            folder.apply(seq, valid.surface_op, valid.source_event_seqs, None)
    except InvalidEventError as err:
        raise LogImportError(str(err), number) from err
    return NewEvent(valid.type, valid.data, valid.surface_op, valid.source_event_seqs, valid.time)

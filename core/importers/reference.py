"""The reference implementation's session log (deepseek-harness), read into dsh and back.

Its log is JSONL: a header line ``{"type":"session","id","createdAt","cwd"?,"version",…}``,
then one storage record per line. A record is an event ``{"type","seq","time","data",
"surfaceOp"?,"sourceEventSeqs"?}`` or a *packed row* (``text-chunks``, ``reasoning-chunks``,
``tool-call-chunks``) standing for a run of ``assistant/chunk`` delta events: ``seq0`` and
``time0`` place the first member, ``dt`` holds the gaps between members' times and
``texts``/``args`` one entry per member. By default the file is a sequence of checksummed
Zstandard frames (one for the header line, one per append batch).

Reading unpacks every row into its exact members, keeps every event type verbatim (dsh only
interprets the ones it knows) and keeps the header fields dsh has no place for in one
trailing log-only ``reference/session`` event, so that writing the session back out
(``reference_lines``) gives the same logical log. The snapshot logs of the reference's own
tests are normalised (no ``seq``/``time``/``seq0``/``time0``): a missing seq is the record's
position and a missing time the previous one (the header's ``createdAt`` at first).
Message events written before the reference gave messages an identity are upgraded as the
reference itself upgrades them when it loads a log (``upgrade_pre_identity_message``).

Every problem is a ``LogImportError`` naming the 1-based line of the (decompressed) log.
"""

from __future__ import annotations

import io
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from core.errors import InvalidEventError
from core.importers.bounds import MAX_PACKED_ROW_MEMBERS
from core.importers.source import ZSTD_MAGIC, LogLine, decompressed_chunks, log_lines
from core.jsoncodec import dumps_js, loads_exact, thaw_json
from core.limits import check_header_limits
from core.log import (
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    surface_op_from_json,
    surface_op_to_json,
    validate_new_event,
)
from core.logfile import LogImportError, check_record_depth
from core.surface import SurfaceFolder
from core.timestamps import check_epoch_ms

__all__ = [
    "PACKED_ROW_TYPES",
    "REFERENCE_HEADER_EVENT",
    "ZSTD_MAGIC",
    "ReadStats",
    "ReferenceLog",
    "decode_zstd_frames",
    "iter_chunk_runs",
    "iter_row",
    "looks_like_reference",
    "pack_chunk_runs",
    "parse_reference",
    "read_reference",
    "reference_lines",
    "streamed_reference_lines",
    "unpack_row",
    "upgrade_pre_identity_message",
]

REFERENCE_HEADER_EVENT = "reference/session"
"""The log-only event that keeps the reference header's fields dsh has no column for."""

SUPPORTED_VERSION = 0
PACKED_ROW_TYPES: Mapping[str, str] = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_ROW_OF_DELTA = {delta: row for row, delta in PACKED_ROW_TYPES.items()}
MIN_RUN = 3  # the reference packs runs of at least three members
_EVENT_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"})
_ROW_KEYS = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_DATA = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_DATA = frozenset({"turn", "step", "index", "dt", "id", "args"})
_TORN_ADVICE = "resume it once in deepseek-harness (which repairs a torn end) and import again"


@dataclass(frozen=True, slots=True)
class ReferenceLog:
    """A reference log read into dsh's terms (``events`` end with the header event)."""

    header: SessionHeader
    events: tuple[NewEvent, ...]
    encoding: Literal["zstd", "jsonl"]
    rows: int  # storage records after the header (packed rows count once)
    packed_rows: int


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- recognition


def looks_like_reference(first_line: Mapping[str, Any]) -> bool:
    """Whether a parsed first line is a reference header rather than dsh's own
    (``createdAt`` against dsh's ``created_at``)."""
    return first_line.get("type") == "session" and "createdAt" in first_line


def decode_zstd_frames(raw: bytes) -> str:
    """The text of a sequence of Zstandard frames, every frame's checksum verified.

    A frame without a checksum, a checksum mismatch, bytes that are no frame and a file that
    ends inside a frame are all errors naming the first log line the bad frame holds.
    Bounded as every log is (``core.importers.bounds``).
    """
    return "".join(
        line.text + ("\n" if line.ended else "")
        for line in log_lines(decompressed_chunks(io.BytesIO(raw)))
    )


# --------------------------------------------------------------------------- packed rows


def unpack_row(row: Mapping[str, Any], *, seq0: int, time0: int) -> list[dict[str, Any]]:
    """The member events of a packed row, as reference event objects.

    ``seq0``/``time0`` are used when the row has none (a normalised snapshot log). A row
    whose shape is not exactly the reference's is an ``InvalidEventError``: guessing would
    drop or invent chunks.
    """
    return list(iter_row(row, seq0=seq0, time0=time0))


def iter_row(row: Mapping[str, Any], *, seq0: int, time0: int) -> Iterator[dict[str, Any]]:
    """``unpack_row``, one member at a time (the row is checked before the first)."""
    tag = row.get("type")
    delta = PACKED_ROW_TYPES.get(tag) if isinstance(tag, str) else None
    if delta is None:
        raise InvalidEventError(f"{tag!r} is not a packed row type")
    extra = set(row) - _ROW_KEYS
    if extra or "data" not in row:
        raise InvalidEventError(
            f"malformed {tag} row: unexpected field {sorted(extra)[0]!r}"
            if extra
            else f"malformed {tag} row: no data"
        )
    seq0 = row.get("seq0", seq0)
    time0 = row.get("time0", time0)
    if not _is_int(seq0) or seq0 < 0:
        raise InvalidEventError(f"malformed {tag} row: seq0 must be a non-negative integer")
    if not _is_int(time0):
        raise InvalidEventError(f"malformed {tag} row: time0 must be an integer")
    data = row["data"]
    if not isinstance(data, Mapping):
        raise InvalidEventError(f"malformed {tag} row: data must be an object")
    keys = set(data)
    if delta == "tool-call-delta":
        if keys not in (_TOOL_ROW_DATA, _TOOL_ROW_DATA | {"name"}):
            raise InvalidEventError(
                f"malformed {tag} row: data must be exactly turn, step, index, dt, id, name?, args"
            )
        if not isinstance(data["id"], str) or (
            "name" in data and not isinstance(data["name"], str)
        ):
            raise InvalidEventError(f"malformed {tag} row: id and name must be strings")
        members = data["args"]
    else:
        if keys != _TEXT_ROW_DATA:
            raise InvalidEventError(
                f"malformed {tag} row: data must be exactly turn, step, index, dt, texts"
            )
        members = data["texts"]
    if not all(
        isinstance(data[k], (int, float)) and not isinstance(data[k], bool)
        for k in ("turn", "step", "index")
    ):
        raise InvalidEventError(f"malformed {tag} row: turn, step and index must be numbers")
    if (
        not isinstance(members, Sequence)
        or isinstance(members, str)
        or not members
        or not all(isinstance(m, str) for m in members)
    ):
        raise InvalidEventError(f"malformed {tag} row: its members must be a non-empty string list")
    if len(members) > MAX_PACKED_ROW_MEMBERS:
        raise InvalidEventError(
            f"the {tag} row has {len(members):,} members; dsh reads at most "
            f"{MAX_PACKED_ROW_MEMBERS:,} in one row"
        )
    gaps = data["dt"]
    if isinstance(gaps, str) or not isinstance(gaps, Sequence) or not all(_is_int(g) for g in gaps):
        raise InvalidEventError(f"malformed {tag} row: dt must be a list of integers")
    if len(gaps) != len(members) - 1:
        raise InvalidEventError(
            f"malformed {tag} row: {len(gaps)} time gaps for {len(members)} members"
        )
    time = time0
    for k, member in enumerate(members):
        if k:
            time += gaps[k - 1]
        chunk: dict[str, Any]
        if delta == "tool-call-delta":
            chunk = {"type": delta, "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": delta, "index": data["index"], "text": member}
        yield {
            "type": "assistant/chunk",
            "seq": seq0 + k,
            "time": time,
            "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
        }


def _delta_kind(event: Mapping[str, Any]) -> str | None:
    """The delta kind of an event the reference would pack (its exact whitelist), else None."""
    if event.get("type") != "assistant/chunk" or set(event) != {"type", "seq", "time", "data"}:
        return None
    if not _is_int(event["seq"]) or event["seq"] < 0 or not _is_int(event["time"]):
        return None
    data = event["data"]
    if not isinstance(data, Mapping) or set(data) != {"turn", "step", "chunk"}:
        return None
    if not all(_is_number(data[k]) for k in ("turn", "step")):
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, Mapping) or not _is_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        ok = set(chunk) == {"type", "index", "text"} and isinstance(chunk["text"], str)
    elif kind == "tool-call-delta":
        keys = set(chunk)
        ok = (
            keys
            in (
                {"type", "index", "id", "argumentsDelta"},
                {"type", "index", "id", "name", "argumentsDelta"},
            )
            and isinstance(chunk["id"], str)
            and isinstance(chunk["argumentsDelta"], str)
            and isinstance(chunk.get("name", ""), str)
        )
    else:
        return None
    return kind if ok else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _continues(prev: Mapping[str, Any], nxt: Mapping[str, Any], kind: str) -> bool:
    if nxt["seq"] != prev["seq"] + 1:
        return False
    a, b = prev["data"], nxt["data"]
    if (
        a["turn"] != b["turn"]
        or a["step"] != b["step"]
        or a["chunk"]["index"] != b["chunk"]["index"]
    ):
        return False
    if kind != "tool-call-delta":
        return True
    ca, cb = a["chunk"], b["chunk"]
    return (
        ca["id"] == cb["id"]
        and ("name" in ca) == ("name" in cb)
        and ca.get("name") == cb.get("name")
    )


def _row(kind: str, run: list[Mapping[str, Any]]) -> dict[str, Any]:
    first = run[0]
    chunk = first["data"]["chunk"]
    data: dict[str, Any] = {
        "turn": first["data"]["turn"],
        "step": first["data"]["step"],
        "index": chunk["index"],
        "dt": [e["time"] - p["time"] for p, e in pairwise(run)],
    }
    if kind == "tool-call-delta":
        data["id"] = chunk["id"]
        if "name" in chunk:
            data["name"] = chunk["name"]
        data["args"] = [e["data"]["chunk"]["argumentsDelta"] for e in run]
    else:
        data["texts"] = [e["data"]["chunk"]["text"] for e in run]
    return {"type": _ROW_OF_DELTA[kind], "seq0": first["seq"], "time0": first["time"], "data": data}


def pack_chunk_runs(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Storage records for reference events: each run of at least three consecutive
    same-block delta chunks becomes one packed row, as the reference writes them; every
    other event passes through unchanged."""
    return list(iter_chunk_runs(events))


def iter_chunk_runs(events: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """``pack_chunk_runs`` as it reads (holding one run of chunks at most)."""
    run: list[Mapping[str, Any]] = []
    kind: str | None = None
    for event in events:
        k = _delta_kind(event)
        if k is not None and k == kind and _continues(run[-1], event, k):
            run.append(event)
            continue
        if kind is not None and len(run) >= MIN_RUN:
            yield _row(kind, run)
        else:
            yield from run
        run, kind = [], None
        if k is None:
            yield event
        else:
            run, kind = [event], k
    if kind is not None and len(run) >= MIN_RUN:
        yield _row(kind, run)
    else:
        yield from run


# --------------------------------------------------------------------------- reading


def parse_reference(raw: bytes) -> ReferenceLog:
    """Read a whole reference log (raw JSONL or Zstandard frames) into dsh's terms.

    All or nothing: the first problem raises ``LogImportError`` with its line.
    """
    encoding: Literal["zstd", "jsonl"] = "zstd" if raw.startswith(ZSTD_MAGIC) else "jsonl"
    lines = log_lines(decompressed_chunks(io.BytesIO(raw)))
    stats = ReadStats()
    header, events = read_reference(lines, stats)
    return ReferenceLog(header, tuple(events), encoding, stats.rows, stats.packed_rows)


@dataclass(slots=True)
class ReadStats:
    """What a streamed read has met so far (complete once its events are all read)."""

    rows: int = 0  # storage records after the header (packed rows count once)
    packed_rows: int = 0
    bytes: int = 0  # of the lines read (decompressed)
    line: int = 0  # the number of the last line read


def read_reference(
    lines: Iterator[LogLine], stats: ReadStats, first: LogLine | None = None
) -> tuple[SessionHeader, Iterator[NewEvent]]:
    """The header of a reference log (read now) and its events (read as they are asked
    for; the last is the header event). ``first``: its first line, when already read."""
    if first is None:
        first = next(lines, None)
    if first is None or not first.text.strip():
        raise LogImportError("the log is empty: expected a session header line", 1)
    header_obj = _load(first.text.removesuffix("\r"), first.number, not first.ended)
    header = _header(header_obj, first.number)
    return header, _reference_events(lines, header_obj, header, stats)


def _reference_events(
    lines: Iterator[LogLine],
    header_obj: Mapping[str, Any],
    header: SessionHeader,
    stats: ReadStats,
) -> Iterator[NewEvent]:
    folder: SurfaceFolder[None] = SurfaceFolder()
    time = header.created_at
    seq = 0
    message_ids: dict[int, str] = {}
    for line in lines:
        number, text = line.number, line.text.removesuffix("\r")
        if not text.strip():
            raise LogImportError("blank line inside the log", number)
        obj = _load(text, number, not line.ended)
        stats.rows += 1
        kind = obj.get("type")
        try:
            members: Iterable[Mapping[str, Any]]
            if isinstance(kind, str) and kind in PACKED_ROW_TYPES:
                stats.packed_rows += 1
                members = iter_row(obj, seq0=seq, time0=time)
            else:
                members = (obj,)
            for member in members:
                upgraded = upgrade_pre_identity_message(member, header.id, seq, message_ids)
                event = _event(upgraded, seq, time, folder)
                _remember_message_id(event, seq, message_ids)
                yield event
                seq += 1
                assert event.time is not None
                time = event.time
        except InvalidEventError as err:
            raise LogImportError(str(err), number) from err
    try:
        kept = validate_new_event(REFERENCE_HEADER_EVENT, {"header": header_obj}, time=time)
    except InvalidEventError as err:
        raise LogImportError(f"the header: {err}", 1) from err
    yield NewEvent(kept.type, kept.data, time=kept.time)


def _load(line: str, number: int, last: bool) -> Mapping[str, Any]:
    try:
        obj = loads_exact(line, frozen=False, unique_keys=True)
    except ValueError as err:
        check_record_depth(line, number)
        if last:
            raise LogImportError(
                f"the log ends in the middle of a record; {_TORN_ADVICE}",
                number,
            ) from err
        raise LogImportError(f"invalid JSON ({err})", number) from err
    if not isinstance(obj, dict):
        raise LogImportError("expected a JSON object", number)
    return obj


def _header(obj: Mapping[str, Any], number: int) -> SessionHeader:
    if obj.get("type") != "session" or "createdAt" not in obj:
        raise LogImportError(
            'the first line is not a reference session header {"type":"session","createdAt",…}',
            number,
        )
    version = obj.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise LogImportError(
            f"session format version {_short(version)} is not supported (dsh reads version "
            f"{SUPPORTED_VERSION}); export it with a matching reference release first",
            number,
        )
    session_id, cwd = obj.get("id"), obj.get("cwd")
    if not isinstance(session_id, str):
        raise LogImportError("the header's id must be a string", number)
    if cwd is not None and not isinstance(cwd, str):
        raise LogImportError("the header's cwd must be a string", number)
    try:
        check_header_limits(session_id, cwd)
        created_at = check_epoch_ms(obj["createdAt"], "the header's createdAt")
    except InvalidEventError as err:
        raise LogImportError(str(err), number) from err
    return SessionHeader(session_id, created_at, cwd)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _legacy_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{seq}"


def upgrade_pre_identity_message(
    record: Mapping[str, Any], session_id: str, seq: int, message_ids: Mapping[int, str]
) -> Mapping[str, Any]:
    """A message event written before the reference gave messages an identity, in today's
    shape, exactly as the reference's own loader upgrades it on read (its note "Load sessions
    persisted before message identity"): ``user/message`` gains ``id`` and ``role``;
    ``assistant/message`` ``content``/``provenance`` and ``tool/result``
    ``callId``/``content``/``isError`` move into a ``message``. The id is
    ``legacy-message:<session id>:<seq>``; a tool result that replaces another takes the
    replaced one's id. Anything else, current or malformed, is returned unchanged."""
    kind, data = record.get("type"), record.get("data")
    if not isinstance(data, Mapping) or "message" in data:
        return record
    new_data: dict[str, Any]
    if kind == "user/message":
        if "id" in data or "role" in data or "content" not in data or "source" not in data:
            return record
        new_data = {**data, "id": _legacy_id(session_id, seq), "role": "user"}
    elif kind == "assistant/message":
        if "content" not in data or "provenance" not in data:
            return record
        rest = {k: v for k, v in data.items() if k not in ("content", "provenance")}
        provenance = data["provenance"] if isinstance(data["provenance"], Mapping) else {}
        message = {
            "id": _legacy_id(session_id, seq),
            "role": "assistant",
            "content": data["content"],
            "source": {**provenance, "kind": "model"},
        }
        new_data = {**rest, "message": message}
    elif kind == "tool/result":
        if not all(k in data for k in ("callId", "content", "isError")):
            return record
        rest = {k: v for k, v in data.items() if k not in ("callId", "content", "isError")}
        op = record.get("surfaceOp")
        start = op.get("start") if isinstance(op, Mapping) and op.get("op") == "replace" else None
        message_id = _legacy_id(session_id, seq)
        if isinstance(start, int) and start in message_ids:
            message_id = message_ids[start]
        block = {
            "type": "tool-result",
            "toolCallId": data["callId"],
            "content": data["content"],
            "isError": data["isError"],
        }
        message = {
            "id": message_id,
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": data["callId"]},
        }
        new_data = {**rest, "message": message}
    else:
        return record
    return {**record, "data": new_data}


def _remember_message_id(event: NewEvent, seq: int, message_ids: dict[int, str]) -> None:
    message = event.data if event.type == "user/message" else event.data.get("message")
    if isinstance(message, Mapping) and isinstance(message.get("id"), str):
        message_ids[seq] = message["id"]


def _event(
    obj: Mapping[str, Any], seq: int, previous_time: int, folder: SurfaceFolder[None]
) -> NewEvent:
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidEventError("a record needs a non-empty string type")
    extra = set(obj) - _EVENT_KEYS
    if extra:
        raise InvalidEventError(f"{kind} record has an unknown field {sorted(extra)[0]!r}")
    if kind == REFERENCE_HEADER_EVENT:
        raise InvalidEventError(f"{kind} is reserved for dsh's own bookkeeping")
    if "data" not in obj:
        raise InvalidEventError(f"{kind} record has no data")
    found = obj.get("seq", seq)
    if not _is_int(found) or found != seq:
        raise InvalidEventError(f"expected seq {seq}, found {_short(found)} (seqs have no gaps)")
    time = check_epoch_ms(obj.get("time", previous_time), f"{kind} time")
    surface_op = surface_op_from_json(obj.get("surfaceOp"))
    sources = obj.get("sourceEventSeqs")
    valid = validate_new_event(kind, obj["data"], surface_op, sources, time)
    if valid.surface_op is not None:
        try:
            folder.apply(seq, valid.surface_op, valid.source_event_seqs, None)
        except InvalidEventError as err:
            raise InvalidEventError(
                f"{kind} at seq {seq}: {err}; the log contradicts itself: fix or remove this record"
            ) from err
    return NewEvent(valid.type, valid.data, valid.surface_op, valid.source_event_seqs, valid.time)


# --------------------------------------------------------------------------- writing


def reference_lines(header: SessionHeader, events: Sequence[Event]) -> Iterator[str]:
    """The session as a raw reference JSONL log (each line without its newline).

    The header line is the kept reference header (dsh's id, createdAt and cwd win) or, for a
    session born in dsh, a version-0 top-level header. ``reference/session`` events are not
    written; the seqs after one close up, and surface ops and sources follow them.
    """
    heads = [event for event in events if event.type == REFERENCE_HEADER_EVENT]
    return streamed_reference_lines(header, heads, events)


def streamed_reference_lines(
    header: SessionHeader, heads: Sequence[Event], events: Iterable[Event]
) -> Iterator[str]:
    """``reference_lines`` reading the log once, as it goes, given its
    ``reference/session`` events (``heads``, in seq order: a few, found beforehand among
    its events of unknown types), so an export of any size holds one record at a time.
    ``events`` is the whole log in seq order (seqs from 0, as a store gives it)."""
    kept: Mapping[str, Any] | None = None
    for head in heads:
        if isinstance(head.data.get("header"), Mapping):
            kept = head.data["header"]
            break
    line: dict[str, Any] = (
        thaw_json(kept)
        if kept is not None
        else {"version": SUPPORTED_VERSION, "delegationDepth": 0}
    )
    line = {"type": "session", **{k: v for k, v in line.items() if k != "type"}}
    line["id"], line["createdAt"] = header.id, header.created_at
    if header.cwd is None:
        line.pop("cwd", None)
    else:
        line["cwd"] = header.cwd
    yield dumps_js(line)
    renumber = _Renumbering([head.seq for head in heads])

    def records() -> Iterator[dict[str, Any]]:
        for event in events:
            if event.type == REFERENCE_HEADER_EVENT:
                continue
            record: dict[str, Any] = {
                "type": event.type,
                "seq": renumber[event.seq],
                "time": event.time,
                "data": thaw_json(event.data),
            }
            # the reference's key order: sources before the surface op
            if event.source_event_seqs is not None:
                record["sourceEventSeqs"] = [_moved(renumber, s) for s in event.source_event_seqs]
            if event.surface_op is not None:
                op = event.surface_op
                if isinstance(op, Replace):
                    op = Replace(_moved(renumber, op.start), _moved(renumber, op.end))
                record["surfaceOp"] = surface_op_to_json(op)
            yield record

    for stored in iter_chunk_runs(records()):
        yield dumps_js(stored)


class _Renumbering:
    """A seq of the log to its seq once the ``reference/session`` events (``dropped``,
    sorted) are left out; those have none (``KeyError``)."""

    def __init__(self, dropped: Sequence[int]) -> None:
        self._dropped = sorted(dropped)

    def __getitem__(self, seq: int) -> int:
        at = bisect_left(self._dropped, seq)
        if at < len(self._dropped) and self._dropped[at] == seq:
            raise KeyError(seq)
        return seq - at


def _moved(renumber: _Renumbering, seq: int) -> int:
    try:
        return renumber[seq]
    except KeyError:
        raise InvalidEventError(
            f"seq {seq} is dsh's own bookkeeping and has no place in a reference log"
        ) from None

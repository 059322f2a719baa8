"""The session log model (SPEC §2): headers, events, surface operations, messages."""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

from core.errors import InvalidEventError
from core.jsoncodec import FrozenDict, _encode_js, _speedups, dumps_js, loads_exact
from core.limits import check_data_depth, check_mark_limits, check_title_limits
from core.surrogates import merge_surrogate_pairs

__all__ = [
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "COMPACT_CHECKPOINT_SOURCE",
    "COMPACT_END",
    "COMPACT_START",
    "COMPACT_SUMMARY",
    "KNOWN_EVENT_TYPES",
    "SESSION_FORK",
    "SESSION_MARK_TYPES",
    "SESSION_PROFILE",
    "SESSION_SOURCE",
    "SESSION_TITLE",
    "STEERING_MESSAGE",
    "SURFACE_EVENT_TYPES",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
    "Event",
    "NewEvent",
    "Replace",
    "SessionHeader",
    "SurfaceOp",
    "SurfaceOutline",
    "SurfaceRow",
    "assistant_message",
    "build_event",
    "build_events",
    "check_new_event",
    "is_compact_checkpoint_source",
    "is_known_event_type",
    "message_text",
    "new_message_id",
    "now_ms",
    "reasoning_block",
    "surface_op_from_json",
    "surface_op_to_json",
    "text_block",
    "tool_call_block",
    "tool_result_block",
    "user_message",
    "validate_new_event",
]

USER_MESSAGE = "user/message"
STEERING_MESSAGE = "steering/message"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_RESULT = "tool/result"
ASSISTANT_CHUNK = "assistant/chunk"
SESSION_TITLE = "session/title"
COMPACT_START = "compact/start"
COMPACT_SUMMARY = "compact/summary"
COMPACT_END = "compact/end"
TURN_START = "turn/start"
TURN_END = "turn/end"
SESSION_PROFILE = "session/profile"
"""Log-only: the session switched to a profile, ``{"profile": name, "provider": str,
"model": str}``. The latest one is the session's profile; none: the configured default."""
SESSION_FORK = "session/fork"
"""Log-only, seq 0 of a fork: ``{"parent": {"id": str, "seq": int}}`` — the session it was
forked from and the seq of the last message taken over."""
SESSION_SOURCE = "session/source"
"""Log-only, seq 0 of an imported foreign session (issue 33): ``{"tool": "claude-code" |
"codex" | "chatgpt", "file": str, "id": str}`` — the tool it came from, the file it was
read from and its id there. Found for many sessions at once as a profile or a fork
origin is (one of ``SESSION_MARK_TYPES``)."""
SESSION_MARK_TYPES: tuple[str, ...] = (SESSION_PROFILE, SESSION_FORK, SESSION_SOURCE)
"""Log-only types whose latest event per session a store reads for many sessions at once
(``SessionStore.read_latest_events``): a session's profile, its fork origin, where an
imported session came from. Each event's data is bounded (``core.limits.
MAX_MARK_EVENT_BYTES``). They are not in ``KNOWN_EVENT_TYPES``: the transcript shows them
among the unknown log-only items it already reads."""

SURFACE_EVENT_TYPES: frozenset[str] = frozenset(
    {USER_MESSAGE, STEERING_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT}
)

KNOWN_EVENT_TYPES: frozenset[str] = SURFACE_EVENT_TYPES | frozenset(
    {
        ASSISTANT_CHUNK,
        SESSION_TITLE,
        COMPACT_START,
        COMPACT_SUMMARY,
        COMPACT_END,
        TURN_START,
        TURN_END,
    }
)
"""Every event type dsh produces or reads. Any other type (a reference implementation's
``step/start``, ``agent/inbox/spliced``…) is kept verbatim as a log-only event and shown
as a generic collapsed item (``SessionStore.read_unknown_events``)."""


def is_known_event_type(type: str) -> bool:
    """True for a type in ``KNOWN_EVENT_TYPES``."""
    return type in KNOWN_EVENT_TYPES


COMPACT_CHECKPOINT_SOURCE: Mapping[str, Any] = FrozenDict({"kind": "plugin", "plugin": "compact"})


def is_compact_checkpoint_source(source: object) -> bool:
    """True for the compact checkpoint marker; only ``kind`` and ``plugin`` are looked at."""
    return (
        isinstance(source, Mapping)
        and source.get("kind") == "plugin"
        and source.get("plugin") == "compact"
    )


def now_ms() -> int:
    return _time.time_ns() // 1_000_000


def new_message_id() -> str:
    import uuid  # (loaded by what writes, not by every reader of the log)

    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The immutable part of a session. ``created_at`` is epoch milliseconds.

    ``owner`` is who owns it (issue 17: the PostgreSQL role that created it, or the OS user
    on SQLite; ``None`` where nobody does, e.g. a log file). It takes no part in equality,
    so headers compare as they did before owners existed."""

    id: str
    created_at: int
    cwd: str | None = None
    owner: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Replace:
    """Replace the inclusive run of surface nodes from seq ``start`` to seq ``end``."""

    start: int
    end: int


SurfaceOp = Literal["append"] | Replace


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a session's append-only log; ``seq`` is its index in that log."""

    seq: int
    type: str
    time: int
    data: Mapping[str, Any]
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None

    @property
    def is_surface(self) -> bool:
        return self.surface_op is not None


_new_object = object.__new__
# The slots' own setters: what the frozen dataclass's ``__init__`` reaches through six
# ``object.__setattr__`` calls by name, at about a third of the cost.
_EVENT_SETTERS = tuple(Event.__dict__[f.name].__set__ for f in fields(Event))
# The C decoder of the SQLite store's packs builds Events itself (as ``build_event`` does).
if _speedups is not None and hasattr(_speedups, "set_event_type"):
    _speedups.set_event_type(Event)
_EVENT_SLOTS = tuple(Event.__dict__[f.name] for f in fields(Event))
_c_build_events: Callable[..., Any] | None = getattr(_speedups, "build_events", None)


def build_event(
    seq: int,
    type: str,
    time: int,
    data: Mapping[str, Any],
    surface_op: SurfaceOp | None = None,
    source_event_seqs: tuple[int, ...] | None = None,
) -> Event:
    """Exactly ``Event(seq, type, time, data, surface_op, source_event_seqs)``, built
    faster: for stores decoding thousands of rows (``Event`` checks nothing either)."""
    event = _new_object(Event)
    set_seq, set_type, set_time, set_data, set_op, set_seqs = _EVENT_SETTERS
    set_seq(event, seq)
    set_type(event, type)
    set_time(event, time)
    set_data(event, data)
    set_op(event, surface_op)
    set_seqs(event, source_event_seqs)
    return event


def _py_build_events(first: int, batch: list[ValidatedEvent]) -> list[Event]:
    build = build_event
    return [
        build(first + i, v.type, v.time, v.data, v.surface_op, v.source_event_seqs)
        for i, v in enumerate(batch)
    ]


def build_events(first: int, batch: list[ValidatedEvent]) -> list[Event]:
    """The events ``batch`` becomes from seq ``first``: ``build_event`` of each, in C
    where the extension is in use (``core._speedups.build_events``, tested against
    ``_py_build_events``)."""
    if _c_build_events is None:
        return _py_build_events(first, batch)
    return _c_build_events(Event, _EVENT_SLOTS, first, batch)  # type: ignore[no-any-return]


class SurfaceRow(NamedTuple):
    """What folding needs of a surface event: no type, time or data (a light read)."""

    seq: int
    surface_op: SurfaceOp
    source_event_seqs: tuple[int, ...] | None = None


class SurfaceOutline(NamedTuple):
    """A ``SurfaceRow`` plus what projecting the event gives (SPEC §4.6), without its data:
    ``projection`` is ``-1`` when the event projects to no message, else
    ``4 * utf8_bytes + 2 * checkpoint + assistant`` (see
    ``core.references.projection.projection_code``)."""

    seq: int
    surface_op: SurfaceOp
    source_event_seqs: tuple[int, ...] | None
    projection: int


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append; the store assigns ``seq`` (and ``time`` when it is ``None``)."""

    type: str
    data: Mapping[str, Any]
    surface_op: SurfaceOp | None = None
    source_event_seqs: Sequence[int] | None = None
    time: int | None = None


# --------------------------------------------------------------------------- wire form


def surface_op_to_json(op: SurfaceOp | None) -> Any:
    """``"append"``, ``{"op":"replace","start":…,"end":…}`` or ``None``."""
    if isinstance(op, Replace):
        return {"op": "replace", "start": op.start, "end": op.end}
    return op


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def surface_op_from_json(value: Any) -> SurfaceOp | None:
    if value is None or value == "append":
        return value  # type: ignore[no-any-return]
    if (
        isinstance(value, Mapping)
        and value.get("op") == "replace"
        and set(value) == {"op", "start", "end"}
        and _is_int(value["start"])
        and _is_int(value["end"])
    ):
        return Replace(value["start"], value["end"])
    raise InvalidEventError(f"invalid surface_op {value!r}")


# --------------------------------------------------------------------------- validation


class ValidatedEvent(NamedTuple):
    """A new event whose shape is valid on its own (log-state rules are checked by folding).

    A tuple: built for every appended event, where a frozen dataclass's ``__init__`` cost
    several times more."""

    type: str
    data: Mapping[str, Any]
    data_json: str
    surface_op: SurfaceOp | None
    source_event_seqs: tuple[int, ...] | None
    time: int


def validate_new_event(
    type: object,
    data: object,
    surface_op: object = None,
    source_event_seqs: object = None,
    time: object = None,
) -> ValidatedEvent:
    """Check everything about a new event that does not depend on the log it joins.

    Returns the event with its data frozen and detached, and the JSON text to store. A
    ``session/title`` event must fit ``core.limits`` (checked on the data as stored).
    """
    type, data_json, surface_op, seqs, time = check_new_event(
        type, data, surface_op, source_event_seqs, time
    )
    frozen = loads_exact(data_json)
    if type == SESSION_TITLE:
        check_title_limits(frozen, data_json)
    elif type in SESSION_MARK_TYPES:
        check_mark_limits(data_json)
    return ValidatedEvent(
        type=type,
        data=frozen,
        data_json=data_json,
        surface_op=surface_op,
        source_event_seqs=seqs,
        time=time,
    )


def check_new_event(
    type: object,
    data: object,
    surface_op: object = None,
    source_event_seqs: object = None,
    time: object = None,
) -> tuple[str, str, SurfaceOp | None, tuple[int, ...] | None, int]:
    """``validate_new_event`` without detaching the data: ``(type, data_json, surface_op,
    source_event_seqs, time)``, for a caller that decodes many data texts at once."""
    if not isinstance(type, str) or not type:
        raise InvalidEventError(f"event type must be a non-empty str, got {type!r}")
    # SPEC §4.1: a surrogate pair is its character (the data's strings are merged by
    # dumps_js below, which writes a pair as the character).
    type = merge_surrogate_pairs(type)
    if not isinstance(data, Mapping):
        raise InvalidEventError(f"event data must be a JSON object, got {data.__class__.__name__}")
    # The C encoder writes only values nested at most _C_SAFE_DEPTH (= MAX_JSON_DEPTH)
    # levels: what it wrote needs no depth scan, the rest is scanned as text.
    data_json = _encode_js(data, False) if _encode_js is not None else None
    if data_json is None:
        try:
            data_json = dumps_js(data)
        except TypeError as err:
            raise InvalidEventError(f"event data is not JSON: {err}") from err
        check_data_depth(data_json)
    if type in SURFACE_EVENT_TYPES:
        if surface_op is None:
            raise InvalidEventError(f"a {type} event must carry a surface_op")
        if surface_op != "append" and not isinstance(surface_op, Replace):
            raise InvalidEventError(f"invalid surface_op {surface_op!r}")
        if isinstance(surface_op, Replace) and not (
            _is_int(surface_op.start) and _is_int(surface_op.end)
        ):
            raise InvalidEventError("Replace start and end must be int seqs")
    else:
        if surface_op is not None:
            raise InvalidEventError(f"a {type} event is log-only and cannot carry a surface_op")
        if source_event_seqs is not None:
            raise InvalidEventError("source_event_seqs is allowed on surface events only")
    seqs: tuple[int, ...] | None = None
    if source_event_seqs is not None:
        if isinstance(source_event_seqs, (str, bytes, Mapping)) or not isinstance(
            source_event_seqs, Iterable
        ):
            raise InvalidEventError("source_event_seqs must be a list of seqs")
        seqs = tuple(source_event_seqs)
        if not all(_is_int(s) and s >= 0 for s in seqs):
            raise InvalidEventError("source_event_seqs must hold non-negative int seqs")
        if len(set(seqs)) != len(seqs):
            raise InvalidEventError("source_event_seqs must be distinct")
    if time is None:
        time = now_ms()
    elif not _is_int(time):
        raise InvalidEventError(f"event time must be int epoch milliseconds, got {time!r}")
    assert isinstance(time, int)
    return type, data_json, surface_op, seqs, time


# --------------------------------------------------------------------------- messages


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def reasoning_block(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text}


def tool_call_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def tool_result_block(
    tool_call_id: str, content: Sequence[Mapping[str, Any]], *, is_error: bool = False
) -> dict[str, Any]:
    return {
        "type": "tool-result",
        "toolCallId": tool_call_id,
        "content": [dict(b) for b in content],
        "isError": is_error,
    }


def _content(content: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_block(content)]
    return [dict(block) for block in content]


def user_message(
    content: str | Sequence[Mapping[str, Any]],
    *,
    source: Mapping[str, Any] | None = None,
    id: str | None = None,
) -> dict[str, Any]:
    """A user message object; ``source`` defaults to a direct human message."""
    return {
        "id": id or new_message_id(),
        "role": "user",
        "content": _content(content),
        "source": dict(source) if source is not None else {"kind": "user"},
    }


def assistant_message(
    content: str | Sequence[Mapping[str, Any]],
    *,
    provider: str,
    model: str,
    id: str | None = None,
    **extra_source: Any,
) -> dict[str, Any]:
    return {
        "id": id or new_message_id(),
        "role": "assistant",
        "content": _content(content),
        "source": {"kind": "model", "provider": provider, "model": model, **extra_source},
    }


def message_text(message: Mapping[str, Any], block_type: str = "text") -> str:
    """The message's ``block_type`` blocks (``text`` by default, or ``reasoning``) joined
    by newlines; other blocks are ignored."""
    content = message.get("content")
    if not isinstance(content, (list, tuple)):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == block_type
        and isinstance(block.get("text"), str)
    )

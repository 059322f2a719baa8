"""Rules every store applies the same way: argument checks, batch validation, titles.

Keeping them in one place is what makes ``MemorySessionStore`` and
``SqliteSessionStore`` behave identically (the differential tests rely on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import core.log as _log
from core.errors import InvalidEventError
from core.jsoncodec import SPEEDUPS, FrozenDict, encode_frozen, loads_exact, utf8_len
from core.jsoncodec import _speedups as _speedups
from core.limits import (
    MAX_MARK_EVENT_BYTES,
    MAX_TITLE_BYTES,
    MAX_TITLE_EVENT_BYTES,
    check_header_limits,
    check_mark_limits,
    check_title_limits,
    title_limit_error,
)
from core.log import (
    SESSION_MARK_TYPES,
    SESSION_TITLE,
    SURFACE_EVENT_TYPES,
    NewEvent,
    Replace,
    SessionHeader,
    SurfaceOp,
    ValidatedEvent,
    check_new_event,
    now_ms,
    validate_new_event,
)
from core.query import SessionTitle
from core.surface import SurfaceFolder
from core.surrogates import has_surrogate_pair, merge_surrogate_pairs
from core.timestamps import MAX_EPOCH_MS, check_epoch_ms

__all__ = [
    "KIND_LOG",
    "KIND_SURFACE",
    "KIND_TITLE",
    "MARK_TYPES",
    "batch_has_replace",
    "check_batch",
    "check_count",
    "check_mark_type",
    "check_seq_range",
    "check_seqs",
    "check_session_id",
    "check_session_ids",
    "check_title_event_size",
    "event_kind",
    "import_header",
    "missing_seq_error",
    "new_header",
    "stored_title",
    "title_of",
    "validate_batch",
    "validate_event",
]

# How an event is indexed: a surface event, a usable title event, or any other log-only event.
KIND_LOG = 0
KIND_SURFACE = 1
KIND_TITLE = 2

MARK_TYPES: frozenset[str] = frozenset(SESSION_MARK_TYPES)
"""The log-only types whose latest event per session a store finds without reading the
session's other events (``SessionStore.read_latest_events``): each such event is stored
alone (SQLite never packs one) and kept in an index of its own (of its type, not of its
``kind``: they are ``KIND_LOG`` events like any other unknown type)."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT_ONLY = {int}


def _is_int64(value: object) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX
    )


def check_session_id(session_id: object) -> str:
    """A session id given to a lookup must be a ``str`` (any ``str``); a surrogate pair in
    it is its character (SPEC §4.1), as in the id stored."""
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be a str, not {type(session_id).__name__}")
    return merge_surrogate_pairs(session_id)


def check_session_ids(session_ids: object) -> list[str]:
    """The distinct ids of a ``read_titles`` list (each must be a ``str``)."""
    if isinstance(session_ids, (str, bytes)) or not isinstance(session_ids, Iterable):
        raise TypeError("session_ids must be a sequence of str ids (or None)")
    return list(dict.fromkeys(check_session_id(sid) for sid in session_ids))


def check_seqs(seqs: object) -> tuple[int, ...]:
    """``seqs`` as a tuple of non-negative ints (``TypeError`` or ``InvalidEventError``)."""
    if isinstance(seqs, (str, bytes)) or not isinstance(seqs, Sequence):
        raise TypeError("seqs must be a sequence of ints")
    out = tuple(seqs)
    # Plain ints in range, checked by C loops (a small read's seqs are its hot path);
    # anything else, or a bad seq, takes the loop below, which names it.
    if not out or (set(map(type, out)) == _INT_ONLY and min(out) >= 0 and max(out) <= _INT64_MAX):
        return out
    for seq in out:
        if not _is_int64(seq) or seq < 0:
            raise InvalidEventError(f"{seq!r} is not an event seq")
    return out


def check_count(count: object) -> int:
    """A count of rows to read: a non-negative int (``ValueError`` otherwise)."""
    if not _is_int64(count) or count < 0:  # type: ignore[operator]
        raise ValueError(f"count must be a non-negative int, not {count!r}")
    assert isinstance(count, int)
    return count


def check_mark_type(type: object) -> str:
    """The type given to ``read_latest_events``: one of ``core.log.SESSION_MARK_TYPES``
    (``ValueError`` otherwise: any other type's latest event would need a read of every
    event)."""
    if not isinstance(type, str) or type not in MARK_TYPES:
        marks = ", ".join(SESSION_MARK_TYPES)
        raise ValueError(f"read_latest_events reads one of {marks}, not {type!r}")
    return str(type)


def check_seq_range(after: object, through: object) -> tuple[int, int | None]:
    """The bounds of a seq range read (``after < seq <= through``): each an int ``>= -1``,
    ``through`` may be ``None`` (no end); ``ValueError`` otherwise."""
    if not _is_int64(after) or after < -1:  # type: ignore[operator]
        raise ValueError(f"after must be an int >= -1, not {after!r}")
    if through is not None and (not _is_int64(through) or through < -1):  # type: ignore[operator]
        raise ValueError(f"through must be an int >= -1 or None, not {through!r}")
    assert isinstance(after, int) and (through is None or isinstance(through, int))
    return after, through


def missing_seq_error(session_id: str, seq: int) -> InvalidEventError:
    return InvalidEventError(f"session {session_id!r} has no event with seq {seq}")


def new_header(session_id: object, cwd: object, created_at: object) -> SessionHeader:
    """Validate ``create_session`` arguments and fill in the defaults (an id or cwd over
    ``core.limits`` is refused, so one member's header costs a listing little)."""
    if session_id is None:
        import uuid  # (loaded by what creates a session, not by every reader)

        session_id = str(uuid.uuid4())
    elif not isinstance(session_id, str):
        raise InvalidEventError(f"session id must be a str, not {type(session_id).__name__}")
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidEventError(f"session cwd must be a str or None, not {type(cwd).__name__}")
    session_id = merge_surrogate_pairs(session_id)  # SPEC §4.1: a pair is its character
    if cwd is not None:
        cwd = merge_surrogate_pairs(cwd)
    check_header_limits(session_id, cwd)
    created_at = now_ms() if created_at is None else check_epoch_ms(created_at, "created_at")
    return SessionHeader(id=session_id, created_at=created_at, cwd=cwd)


def import_header(header: object) -> SessionHeader:
    """Validate a complete header given to ``import_session`` (nothing is defaulted)."""
    if not isinstance(header, SessionHeader):
        raise InvalidEventError(f"expected a SessionHeader, got {type(header).__name__}")
    if header.id is None or header.created_at is None:
        raise InvalidEventError("an imported header needs its id and created_at")
    return new_header(header.id, header.cwd, header.created_at)


def validate_batch(events: Sequence[NewEvent]) -> list[ValidatedEvent]:
    """Shape-check every event of a batch (nothing here depends on the log)."""
    if isinstance(events, (str, bytes, Mapping)) or not isinstance(events, Sequence):
        raise InvalidEventError("append_batch takes a sequence of NewEvent")
    fast = _validate_common(events)
    if fast is not None:
        return fast
    return _validate_plain(events)


def _validate_plain(events: Sequence[NewEvent]) -> list[ValidatedEvent]:
    """``validate_batch`` for every batch (the reference its fast path is tested against)."""
    checked: list[tuple[str, str, SurfaceOp | None, tuple[int, ...] | None, int]] = []
    for index, event in enumerate(events):
        if not isinstance(event, NewEvent):
            raise InvalidEventError(
                f"batch item {index} is a {type(event).__name__}, not a NewEvent"
            )
        item = check_new_event(
            event.type, event.data, event.surface_op, event.source_event_seqs, event.time
        )
        if event.time is not None:  # the store's own clock needs no check
            check_epoch_ms(item[4], "event time")
        checked.append(item)
    if not checked:
        return []
    # The data detached and frozen in one parse of the whole batch (one JSON array):
    # each item is exactly what parsing its own text gives.
    datas = loads_exact("[" + ",".join(item[1] for item in checked) + "]")
    out = [
        ValidatedEvent(
            type=type_, data=data, data_json=text, surface_op=op, source_event_seqs=seqs, time=t
        )
        for (type_, text, op, seqs, t), data in zip(checked, datas, strict=True)
    ]
    for valid in out:
        if valid.type == SESSION_TITLE:
            check_title_limits(valid.data, valid.data_json)
        elif valid.type in SESSION_MARK_TYPES:
            check_mark_limits(valid.data_json)
    return out


_new_tuple = tuple.__new__
_c_validate_common: Callable[..., Any] | None = getattr(_speedups, "validate_common", None)


def _validate_common(events: Sequence[NewEvent]) -> list[ValidatedEvent] | None:
    """``validate_batch``'s result when every event has one of the common shapes (a
    ``NewEvent`` whose data ``encode_frozen`` takes, a log-only event or an appended
    surface one, no source seqs, a time in range or none), else ``None``: then the plain
    path validates the batch and raises its exact errors. Checked against the plain path
    by property tests (tests/stores/test_validation_fast.py)."""
    if not SPEEDUPS:
        return None
    # The latest time accepted (check_epoch_ms); the store's clock for events without a
    # time is core.log.now_ms as check_new_event finds it (tests fix it).
    limit = MAX_EPOCH_MS
    clock = _log.now_ms
    if _c_validate_common is None:
        return _py_validate_common(events, limit, clock)
    out: list[ValidatedEvent] | None = _c_validate_common(
        events, NewEvent, ValidatedEvent, SURFACE_EVENT_TYPES, limit, clock
    )
    if out is not None and not _titles_fit(out):
        return None  # the plain path names what is too long
    if out is not None and any(has_surrogate_pair(event.type) for event in out):
        return None  # the plain path merges the pair (SPEC §4.1)
    return out


def _titles_fit(events: list[ValidatedEvent]) -> bool:
    """Whether every ``session/title`` event of a batch fits ``core.limits``."""
    return all(
        (event.type != SESSION_TITLE or title_limit_error(event.data, event.data_json) is None)
        and (
            event.type not in SESSION_MARK_TYPES
            or utf8_len(event.data_json) <= MAX_MARK_EVENT_BYTES
        )
        for event in events
    )


def _py_validate_common(
    events: Sequence[NewEvent], limit: int, clock: Callable[[], int]
) -> list[ValidatedEvent] | None:
    """``_validate_common``'s loop (``core._speedups.validate_common`` in C) with ``limit``
    the latest event time accepted and ``clock`` the store's clock."""
    if type(events) is not list and type(events) is not tuple:
        return None
    out: list[ValidatedEvent] = []
    append = out.append
    surface_types = SURFACE_EVENT_TYPES
    for event in events:
        if event.__class__ is not NewEvent or event.source_event_seqs is not None:
            return None
        type_: object = event.type
        op: object = event.surface_op
        time: object = event.time
        if type_.__class__ is not str or not type_ or has_surrogate_pair(type_):
            return None
        if type_ in surface_types:
            if op.__class__ is not str or op != "append":
                return None
        elif op is not None:
            return None
        if time is None:
            time = clock()
        elif time.__class__ is not int or not 0 <= time <= limit:
            return None
        data = event.data
        if data.__class__ is not dict and data.__class__ is not FrozenDict:
            return None
        pair = encode_frozen(data)
        if pair is None:
            return None
        text, frozen = pair
        if type_ == SESSION_TITLE and title_limit_error(frozen, text) is not None:
            return None  # the plain path names what is too long
        if type_ in SESSION_MARK_TYPES and utf8_len(text) > MAX_MARK_EVENT_BYTES:
            return None
        append(_new_tuple(ValidatedEvent, (type_, frozen, text, op, None, time)))
    return out


def validate_event(
    type: object, data: object, surface_op: object, source_event_seqs: object, time: object
) -> ValidatedEvent:
    validated = validate_new_event(type, data, surface_op, source_event_seqs, time)
    if time is not None:  # the store's own clock needs no check
        check_epoch_ms(validated.time, "event time")
    return validated


def batch_has_replace(events: Sequence[ValidatedEvent]) -> bool:
    return any(isinstance(e.surface_op, Replace) for e in events)


def check_batch(
    folder: SurfaceFolder[None], first_seq: int, events: Sequence[ValidatedEvent]
) -> None:
    """Apply the batch's surface operations to ``folder`` (seqs from ``first_seq``).

    ``folder`` must hold the session's current surface when the batch has a replace; for
    a batch of plain appends an empty folder is enough (only the provenance seqs are
    checked). Raises ``InvalidEventError`` on the first broken rule; the folder is then
    in an unspecified state.
    """
    for offset, event in enumerate(events):
        if event.surface_op is not None:
            folder.apply(first_seq + offset, event.surface_op, event.source_event_seqs, None)


def event_kind(type: str, data: Mapping[str, Any], surface: bool) -> int:
    if surface:
        return KIND_SURFACE
    if type == SESSION_TITLE and isinstance(data.get("title"), str):
        return KIND_TITLE
    return KIND_LOG


_NO_SOURCE: Mapping[str, Any] = FrozenDict()


def title_of(seq: int, time: int, data: Mapping[str, Any]) -> SessionTitle:
    """The ``SessionTitle`` of a title event; ``ValueError`` when its title is not a str
    (a row written by hand: a listing skips it, never crashes)."""
    title = data.get("title")
    if not isinstance(title, str):
        raise ValueError("its title is not text")
    source = data.get("source")
    return SessionTitle(
        title=title,
        event_seq=seq,
        updated_at=time,
        source=source if isinstance(source, Mapping) else _NO_SOURCE,
    )


def check_title_event_size(size: int) -> None:
    """``ValueError`` when a stored title event of ``size`` bytes is over the limit (a
    store that reads rows within their limits knows the size without the text)."""
    if size > MAX_TITLE_EVENT_BYTES:
        raise ValueError(
            f"it holds {size:,} bytes, over the {MAX_TITLE_EVENT_BYTES:,} a title event may hold"
        )


def stored_title(seq: int, time: int, text: str) -> SessionTitle:
    """The ``SessionTitle`` of a stored title row whose data is the JSON ``text``.

    ``ValueError`` saying why in plain words when the row cannot be a title (over
    ``core.limits``, not JSON, not an object, a title that is not text): rows written
    before the limits or by hand are reported as damaged (``core.damage``), never trusted;
    a text over the limit is not even parsed."""
    check_title_event_size(utf8_len(text))
    try:
        data = loads_exact(text)
    except ValueError:
        raise ValueError("it is not JSON") from None
    if not isinstance(data, Mapping):
        raise ValueError("it is not a JSON object")
    found = title_of(seq, time, data)
    size = utf8_len(found.title)
    if size > MAX_TITLE_BYTES:
        raise ValueError(f"its title holds {size:,} bytes, over the {MAX_TITLE_BYTES:,} allowed")
    return found

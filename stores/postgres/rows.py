"""Reading a team store's listing rows as untrusted input (issue 30).

Another member may have written any row of their own sessions by hand and shared them:
ids and cwds that are not UTF-8, titles that are not text or not JSON, sizes far beyond
``core.limits`` (rows written before those limits, or by hand). The queries here read at
most the limit of each field (the server cuts the rest off), and each row is decoded on
its own: a row that cannot be read is skipped and described (``core.damage``), and the
rest of the listing is as it would be without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.damage import DamagedRow
from core.jsoncodec import loads_exact
from core.limits import MAX_CWD_BYTES, MAX_SESSION_ID_BYTES, MAX_TITLE_EVENT_BYTES
from core.log import Event, SessionHeader, build_event
from core.query import SessionTitle
from stores.columns import decode_op, decode_seqs, decode_text, encode_text
from stores.validation import KIND_TITLE, check_title_event_size, stored_title

__all__ = [
    "HEADERS_SQL",
    "IDS_OF_KEYS_SQL",
    "LAST_EVENT_TIMES_SQL",
    "TITLES_SQL",
    "WANTED_SESSIONS",
    "build_headers",
    "build_latest_events",
    "build_titles",
    "bytea",
    "latest_events_sql",
    "read_id",
    "read_text",
    "within",
]


def within(column: str, limit: int) -> str:
    """``column`` when it holds at most ``limit`` bytes (else NULL), and its size:
    ``octet_length`` reads a stored value's size without reading the value."""
    return f"CASE WHEN octet_length({column}) <= {limit} THEN {column} END, octet_length({column})"


HEADERS_SQL = (
    f"SELECT {within('id', MAX_SESSION_ID_BYTES)}, created_at, "
    f"{within('cwd', MAX_CWD_BYTES)}, owner FROM dsh_sessions ORDER BY created_at DESC, id"
)

# The latest title event of each session: one descending seek in ``dsh_events_title`` each.
TITLES_SQL = (
    f"SELECT {within('s.id', MAX_SESSION_ID_BYTES)}, s.owner, t.seq, t.time, "
    f"{within('t.data', MAX_TITLE_EVENT_BYTES)} FROM {{sessions}} AS s "
    "CROSS JOIN LATERAL (SELECT e.seq, e.time, e.data FROM dsh_events AS e "
    f"WHERE e.session_key = s.key AND e.kind = {KIND_TITLE} ORDER BY e.seq DESC LIMIT 1) AS t"
)


def bytea(text: str) -> str:
    """SQL: the ``bytea`` literal of ``text`` as a type is stored (``encode_text``)."""
    return f"'\\x{encode_text(text).hex()}'::bytea"


def latest_events_sql(type_: str, sessions: str) -> str:
    """The latest event of type ``type_`` (one of ``stores.validation.MARK_TYPES``) of
    each session of ``sessions`` (``dsh_sessions``, or ``WANTED_SESSIONS``), as the
    session's id (``within`` its limit) and the event's columns: one descending seek in
    ``dsh_events_marks`` each (the type is written into the statement, so the planner
    proves it is one of the index's even in a generic plan)."""
    return (
        f"SELECT {within('s.id', MAX_SESSION_ID_BYTES)}, e.seq, e.type, e.time, e.data, "
        f"e.surface_op, e.source_event_seqs FROM {sessions} AS s "
        "CROSS JOIN LATERAL (SELECT e.seq, e.type, e.time, e.data, e.surface_op, "
        "e.source_event_seqs FROM dsh_events AS e "
        f"WHERE e.session_key = s.key AND e.type = {bytea(type_)} "
        "ORDER BY e.seq DESC LIMIT 1) AS e"
    )


WANTED_SESSIONS = (
    "(SELECT DISTINCT s.* FROM unnest($1::bytea[]) AS w (id) "
    "JOIN dsh_sessions AS s ON sha256(s.id) = sha256(w.id) AND s.id = w.id)"
)

LAST_EVENT_TIMES_SQL = (
    f"SELECT {within('s.id', MAX_SESSION_ID_BYTES)}, (SELECT e.time FROM dsh_events AS e "
    "WHERE e.session_key = s.key ORDER BY e.seq DESC LIMIT 1) FROM dsh_sessions AS s"
)

IDS_OF_KEYS_SQL = (
    f"SELECT key, {within('id', MAX_SESSION_ID_BYTES)} FROM dsh_sessions "
    "WHERE key = ANY ($1::bigint[])"
)


def read_text(raw: bytes | None, size: int | None, limit: int, what: str) -> str:
    """A text column read within ``limit`` bytes (``ValueError`` naming ``what``)."""
    if raw is None:
        raise ValueError(f"its {what} has {size:,} bytes, over the {limit:,} allowed")
    try:
        return decode_text(raw)
    except UnicodeDecodeError:
        raise ValueError(f"its {what} is not valid UTF-8") from None


def read_id(raw: bytes | None, size: int | None) -> str | None:
    """An id read within its limit (``within``'s two columns), ``None`` when it cannot be
    read: a listing leaves such a session out."""
    try:
        return read_text(raw, size, MAX_SESSION_ID_BYTES, "id")
    except ValueError:
        return None


def build_headers(rows: Iterable[Any]) -> tuple[tuple[SessionHeader, ...], tuple[DamagedRow, ...]]:
    """``HEADERS_SQL``'s rows as headers, and the rows that could not be read."""
    headers: list[SessionHeader] = []
    damaged: list[DamagedRow] = []
    for raw_id, id_size, created_at, raw_cwd, cwd_size, owner in rows:
        sid: str | None = None
        try:
            sid = read_text(raw_id, id_size, MAX_SESSION_ID_BYTES, "id")
            cwd = None if cwd_size is None else read_text(raw_cwd, cwd_size, MAX_CWD_BYTES, "cwd")
        except ValueError as err:
            damaged.append(DamagedRow("session", str(err), owner, sid))
            continue
        headers.append(SessionHeader(id=sid, created_at=created_at, cwd=cwd, owner=owner))
    return tuple(headers), tuple(damaged)


def _title(seq: int, time: int, raw: str | None, size: int) -> SessionTitle:
    """One title row (``ValueError`` saying why it cannot be read), by the rule of every
    store (``stored_title``); a row over the limit was not even read (``raw`` is None)."""
    check_title_event_size(size)  # the row's size, read without the row
    assert raw is not None  # ``within`` reads every row within the limit
    return stored_title(seq, time, raw)


def build_latest_events(rows: Iterable[Any]) -> dict[str, Event]:
    """``latest_events_sql``'s rows as events by session id. A row that cannot be read
    (another member's, written by hand: data that is not JSON, a surface op that is not
    one) leaves its session out, as does an id that cannot be read (``build_headers``
    says why); the rest of the listing is as it would be without it."""
    out: dict[str, Event] = {}
    for raw_id, id_size, seq, raw_type, time, data, op, seqs in rows:
        sid = read_id(raw_id, id_size)
        if sid is None:
            continue
        try:
            out[sid] = build_event(
                seq,
                decode_text(raw_type),
                time,
                loads_exact(data),
                None if op is None else decode_op(op),
                None if seqs is None else decode_seqs(seqs),
            )
        except (ValueError, TypeError):
            continue
    return out


def build_titles(rows: Iterable[Any]) -> tuple[dict[str, SessionTitle], tuple[DamagedRow, ...]]:
    """``TITLES_SQL``'s rows as titles by session id, and the title rows that could not be
    read (their sessions are listed without a title). A session whose id cannot be read
    is left out: its header says why (``build_headers``)."""
    titles: dict[str, SessionTitle] = {}
    damaged: list[DamagedRow] = []
    for raw_id, id_size, owner, seq, time, raw, size in rows:
        sid = read_id(raw_id, id_size)
        if sid is None:
            continue
        try:
            titles[sid] = _title(seq, time, raw, size)
        except ValueError as err:
            damaged.append(DamagedRow("title", str(err), owner, sid))
    return titles, tuple(damaged)

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
from core.limits import MAX_CWD_BYTES, MAX_SESSION_ID_BYTES, MAX_TITLE_EVENT_BYTES
from core.log import SessionHeader
from core.query import SessionTitle
from stores.columns import decode_text
from stores.validation import KIND_TITLE, check_title_event_size, stored_title

__all__ = [
    "HEADERS_SQL",
    "IDS_OF_KEYS_SQL",
    "LAST_EVENT_TIMES_SQL",
    "TITLES_SQL",
    "WANTED_SESSIONS",
    "build_headers",
    "build_titles",
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

"""The PostgreSQL schema step of SPEC §4.1 (issue 31): a surrogate pair is its astral
character, however written.

``dsh_json`` (what the server reads a stored event's JSON with, for the search index and
the checks) replaced every surrogate escape by U+FFFD, since PostgreSQL refuses a lone
one; it now replaces only the unpaired ones (an escaped high surrogate not followed by an
escaped low one, a low one not preceded by a high one), as ``core.search.indexed_text``
does, and lets PostgreSQL read a pair as its character. The rows an older dsh wrote with
a pair apart (escaped apart in JSON, ``surrogatepass`` bytes in ids, cwds and types) are
written anew as today's dsh writes them, and their sessions' projections, surface nodes
and sums and search rows are made again (``merge_stored_pairs``, run as Python).
"""

from __future__ import annotations

import asyncpg

from core.jsoncodec import loads_exact
from core.log import build_event
from core.references.projection import projection_code
from core.surrogates import merge_escaped_pairs, merge_surrogate_pairs
from stores.columns import decode_op, decode_seqs, decode_text, encode_text
from stores.postgres.surfaces import _backfill_surfaces
from stores.postgres.team import REINDEX_SQL
from stores.validation import KIND_SURFACE

__all__ = ["MERGE_PAIRS", "pairs_step"]

MERGE_PAIRS = "SELECT 'dsh: write each stored surrogate pair as its character'"
"""A statement of the step run as Python (``merge_stored_pairs``), a no-op as SQL."""

_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"

# As before (escaped backslashes set aside first as chr(1), so that every backslash left
# starts an escape; NUL escapes and surrogate escapes become U+FFFD), except that each
# escaped pair is set aside first too (its backslashes as chr(2): neither control
# character can be in JSON text, which escapes them), and so read as its character.
# (Three plain passes: one pattern with lookaround took minutes on a megabyte of lone
# surrogates.)
_JSON = r"""
CREATE OR REPLACE FUNCTION dsh_json(data text) RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT replace(replace(regexp_replace(
               regexp_replace(replace(data, '\\', chr(1)),
                              '\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})',
                              chr(2) || 'u\1' || chr(2) || 'u\2', 'g'),
               '\\u(0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})', '\\ufffd', 'g'),
           chr(2), '\'), chr(1), '\\')::json
$$
"""

# The tables the step rewrites, read and written whole by the owner for this step only.
_REWRITES = ("dsh_sessions", "dsh_events", "dsh_surface_nodes", "dsh_surface_sums")


def pairs_step() -> tuple[str, ...]:
    """The schema step (run by the tables' owner, in one transaction)."""
    return (
        _JSON,
        *(f"ALTER TABLE {t} NO FORCE ROW LEVEL SECURITY" for t in _REWRITES),
        MERGE_PAIRS,
        *(f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY" for t in _REWRITES),
    )


async def _free_id(conn: asyncpg.Connection, merged: str) -> bytes:
    """``merged`` as stored, or when a session has it already (the same id, spelt apart
    and whole), ``merged (n)`` for the lowest ``n >= 2`` free: neither is lost."""
    candidate, n = merged, 1
    while await conn.fetchval("SELECT 1 FROM dsh_sessions WHERE id = $1", encode_text(candidate)):
        n += 1
        candidate = f"{merged} ({n})"
    return encode_text(candidate)


def _merged_bytes(raw: bytes) -> bytes:
    return raw if b"\xed" not in raw else encode_text(merge_surrogate_pairs(decode_text(raw)))


async def merge_stored_pairs(conn: asyncpg.Connection) -> None:
    """Write every stored pair as its character (see the module doc)."""
    for key, id_, cwd in await conn.fetch(
        "SELECT key, id, cwd FROM dsh_sessions WHERE position('\\xed'::bytea IN id) > 0 "
        "OR position('\\xed'::bytea IN cwd) > 0"
    ):
        new_id = _merged_bytes(id_)
        if new_id != id_:
            new_id = await _free_id(conn, decode_text(new_id))
        new_cwd = None if cwd is None else _merged_bytes(cwd)
        if (new_id, new_cwd) != (id_, cwd):
            await conn.execute(
                "UPDATE dsh_sessions SET id = $1, cwd = $2 WHERE key = $3", new_id, new_cwd, key
            )
    affected: set[int] = set()
    rows = await conn.fetch(
        "SELECT session_key, seq, kind, type, time, data, surface_op, source_event_seqs "
        "FROM dsh_events WHERE position('\\xed'::bytea IN type) > 0 "
        f"OR data ~ '{_HIGH}{_LOW}'"
    )
    for key, seq, kind, type_, time, data, op, seqs in rows:
        new_type, new_data = _merged_bytes(type_), merge_escaped_pairs(data)
        if (new_type, new_data) == (type_, data):
            continue  # (an escaped backslash before "u")
        code = None
        if kind == KIND_SURFACE:
            event = build_event(
                seq,
                decode_text(new_type),
                time,
                loads_exact(new_data),
                decode_op(op),
                None if seqs is None else decode_seqs(seqs),
            )
            code = projection_code(event)
        await conn.execute(
            "UPDATE dsh_events SET type = $1, data = $2, "
            "projection = CASE WHEN kind = 1 THEN $3::bigint ELSE projection END "
            "WHERE session_key = $4 AND seq = $5",
            new_type,
            new_data,
            code,
            key,
            seq,
        )
        affected.add(key)
    keys = sorted(affected)
    if not keys:
        return
    await conn.execute("DELETE FROM dsh_surface_nodes WHERE session_key = ANY ($1::bigint[])", keys)
    await conn.execute("DELETE FROM dsh_surface_sums WHERE session_key = ANY ($1::bigint[])", keys)
    await _backfill_surfaces(conn, None, keys)
    await conn.execute("DELETE FROM dsh_search WHERE session_key = ANY ($1::bigint[])", keys)
    await conn.execute(REINDEX_SQL, keys)

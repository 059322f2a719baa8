"""The SQLite upgrade to schema v10 (SPEC §4.1, issue 31): stored surrogate pairs become
their astral characters.

Before it, dsh kept a high surrogate followed by a low one apart: a JSON text escaped the
halves apart (``\\ud83d\\ude80``), ids, cwds and types held the halves' ``surrogatepass``
bytes. Reads now merge an escaped pair (``loads_exact``), so a row is read right even
unrewritten, but what was counted over the halves is not: the lengths of a linked chunk
run (code points of its reply's text), the projection codes and surface sums (UTF-8
bytes), the search rows (each half a U+FFFD), the ids (two spellings of one session).
So every such row is written anew, as this dsh writes it, and its session's derived
rows are made again. An older dsh that still has the file open could write more such
rows; its reads refuse the upgraded file only when it opens it again, so a run of both at
once is not supported across this upgrade (as for every schema step): the single rows and
the chunk lines it would write are still read right (their JSON is merged when parsed).
"""

from __future__ import annotations

import re
import sqlite3
import zlib
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

from core.jsoncodec import _escaped_pair, loads_exact, loads_unmerged
from core.log import build_event
from core.references.projection import projection_code
from core.surrogates import merge_escaped_pairs, merge_surrogate_pairs
from stores.columns import decode_op, decode_seqs, decode_text, encode_text
from stores.sqlite.encoding import _ZLIB_LEVEL, _stored_data, _text
from stores.sqlite.packs import _ReplyTexts, _unlink_runs
from stores.sqlite.search import _reindex_session
from stores.sqlite.sql import _DATA, KIND_PACK
from stores.sqlite.surfaces import _backfill_surfaces
from stores.validation import KIND_SURFACE

if TYPE_CHECKING:
    from stores.sqlite.reads import _Decoding

_SURROGATE = re.compile("[\ud800-\udfff]")


def _old_escape(text: str) -> str:
    """A text as dsh escaped it before schema v10 (each surrogate alone), no quotes."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", encode_basestring(text))[1:-1]


def _old_pieces(pieces: list[str]) -> list[str]:
    return [_old_escape(piece) for piece in pieces]


def _merged_bytes(raw: bytes) -> bytes:
    """``surrogatepass`` UTF-8 of a text with its pairs merged (``raw`` when none)."""
    if b"\xed" not in raw:
        return raw
    return encode_text(merge_surrogate_pairs(decode_text(raw)))


def merge_stored_pairs(raw: sqlite3.Connection, store: _Decoding) -> None:
    """Write every stored surrogate pair as its character (see the module doc), in the
    migration's transaction. A session whose merged id another session already has (the
    same id, spelt apart and whole) gets that id followed by `` (2)`` (or the first
    number free): both stay reachable, neither is lost."""
    affected: set[int] = set()
    # Ids and cwds.
    for key, id_, cwd in raw.execute(
        "SELECT key, id, cwd FROM sessions WHERE instr(id, x'ed') OR instr(cwd, x'ed')"
    ).fetchall():
        new_id, new_cwd = _merged_bytes(id_), None if cwd is None else _merged_bytes(cwd)
        if new_id != id_:
            new_id = _free_id(raw, decode_text(new_id))
        if (new_id, new_cwd) != (id_, cwd):
            raw.execute("UPDATE sessions SET id = ?, cwd = ? WHERE key = ?", (new_id, new_cwd, key))
    # Types (a pack's column is its first event's; its header is text, below).
    for key, seq, type_ in raw.execute(
        "SELECT session, seq, type FROM events WHERE instr(type, x'ed')"
    ).fetchall():
        new = _merged_bytes(type_)
        if new != type_:
            raw.execute("UPDATE events SET type = ? WHERE session = ? AND seq = ?", (new, key, seq))
            affected.add(key)
    # Single rows holding an escaped pair (read whole: linked and compressed ones too).
    singles: list[tuple[int, int, str]] = []
    for key, seq, data in raw.execute(
        f"SELECT session, seq, {_DATA} FROM events WHERE kind <> {KIND_PACK}"
    ):
        text = _text(data)
        if _escaped_pair(text):
            singles.append((key, seq, text))
            affected.add(key)
    # Packs: their text lines merged; their runs linked to a reply that changes (or any
    # run of a pack that changes) unlinked first, with the texts as they were appended.
    old_replies: dict[int, Any] = {}
    packs: list[tuple[bytes, int, int]] = []
    for key, seq, blob in raw.execute(
        f"SELECT session, seq, data FROM events WHERE kind = {KIND_PACK}"
    ).fetchall():
        body = zlib.decompress(blob).decode("utf-8")
        if not _escaped_pair(body) and not (key in affected and _has_runs(body)):
            continue
        replies = old_replies.get(key)
        if replies is None:
            replies = old_replies[key] = _OldReplyTexts.of(raw, key)
        unlinked = _unlink_runs(body.encode("utf-8"), seq, None, replies, _old_pieces)
        merged = merge_escaped_pairs(unlinked.decode("utf-8"))
        packs.append((zlib.compress(merged.encode("utf-8"), _ZLIB_LEVEL), key, seq))
        affected.add(key)
    raw.executemany("UPDATE events SET data = ? WHERE session = ? AND seq = ?", packs)
    # Single rows last (the packs above read the replies as they were): written plain or
    # compressed (no longer linked: the search rows are made again), projection anew.
    raw.executemany(
        "UPDATE events SET data = ? WHERE session = ? AND seq = ?",
        [(_stored_data(merge_escaped_pairs(text)), key, seq) for key, seq, text in singles],
    )
    # Their projections (surface rows: the UTF-8 bytes of the text changed).
    projections = []
    for key, seq, _text_json in singles:
        row = raw.execute(
            "SELECT type, time, data, surface_op, source_event_seqs FROM events "
            f"WHERE session = ? AND seq = ? AND kind = {KIND_SURFACE}",
            (key, seq),
        ).fetchone()
        if row is not None:
            type_, time, data, op, seqs = row
            event = build_event(
                seq,
                decode_text(type_),
                time,
                loads_exact(_text(data)),
                decode_op(op),
                None if seqs is None else decode_seqs(seqs),
            )
            projections.append((projection_code(event), key, seq))
    raw.executemany("UPDATE events SET projection = ? WHERE session = ? AND seq = ?", projections)
    keys = sorted(affected)
    for key in keys:  # (the projections of the rows written anew are computed again)
        raw.execute("DELETE FROM surface_nodes WHERE session = ?", (key,))
        raw.execute("DELETE FROM surface_sums WHERE session = ?", (key,))
    _backfill_surfaces(raw, None, keys)
    for key in keys:
        _reindex_session(raw, store, key)


def _free_id(raw: sqlite3.Connection, merged: str) -> bytes:
    """``merged`` as stored, or when a session has it already, ``merged (n)`` for the
    lowest ``n >= 2`` free."""
    candidate, n = merged, 1
    while raw.execute("SELECT 1 FROM sessions WHERE id = ?", (encode_text(candidate),)).fetchone():
        n += 1
        candidate = f"{merged} ({n})"
    return encode_text(candidate)


def _has_runs(body: str) -> bool:
    newline = body.find("\n")
    return newline >= 3 and body[newline - 3 : newline] == "]]]"


class _OldReplyTexts:
    """``stores.sqlite.packs._ReplyTexts`` reading replies as dsh read them before schema v10."""

    @classmethod
    def of(cls, raw: sqlite3.Connection, key: int) -> Any:
        class Old(_ReplyTexts):
            __slots__ = ()
            _loads = staticmethod(loads_unmerged)

        return Old.of(raw, key)

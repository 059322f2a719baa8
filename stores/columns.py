"""How the durable stores (SQLite, PostgreSQL) write an event's columns and read them back:
ids and types as surrogate-preserving UTF-8 bytes, the surface op and the source seqs as
compact JSON text. One codec, so both stores keep exactly the same stored forms."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.errors import InvalidEventError, StoreError
from core.log import SurfaceOp, SurfaceRow, surface_op_from_json, surface_op_to_json

__all__ = [
    "APPEND_JSON",
    "decode_op",
    "decode_seqs",
    "decode_surface_rows",
    "decode_text",
    "encode_op",
    "encode_seqs",
    "encode_text",
]

APPEND_JSON = '"append"'
"""The stored form of the ``"append"`` surface op (most surface events)."""


def encode_text(text: str) -> bytes:
    """Ids, cwds and types as bytes: lone surrogates round-trip."""
    return text.encode("utf-8", "surrogatepass")


def decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def encode_op(op: SurfaceOp) -> str:
    return json.dumps(surface_op_to_json(op), separators=(",", ":"))


def decode_op(text: str) -> SurfaceOp:
    if text == APPEND_JSON:
        return "append"
    op = surface_op_from_json(json.loads(text))
    if op is None:
        raise InvalidEventError("a stored surface event has no surface_op")
    return op


def encode_seqs(seqs: Sequence[int]) -> str:
    return json.dumps(list(seqs), separators=(",", ":"))


def decode_seqs(text: str) -> tuple[int, ...]:
    seqs = json.loads(text)
    if not isinstance(seqs, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in seqs
    ):
        raise InvalidEventError(f"stored source_event_seqs {text!r} are not a list of seqs")
    return tuple(seqs)


def decode_surface_rows(rows: Sequence[Any], where: object) -> list[SurfaceRow]:
    """``(seq, surface_op, source_event_seqs)`` rows as ``SurfaceRow``s; a row that does not
    decode is a ``StoreError`` naming ``where`` (the database)."""
    try:
        return [
            SurfaceRow(
                seq,
                decode_op(surface_op),
                None if source_seqs is None else decode_seqs(source_seqs),
            )
            for seq, surface_op, source_seqs in rows
        ]
    except (ValueError, TypeError) as err:
        raise StoreError(f"{where}: a stored event is corrupt ({err})") from err

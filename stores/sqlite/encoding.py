"""How a single event's JSON is stored: compressed against the preset dictionary
(``_DICTIONARY``), or, for a message on a surface, linked to the text its search row
holds (``_stored_message``), and read back (``_text``).
"""

from __future__ import annotations

import zlib

from core.jsoncodec import dumps_js
from core.limits import MAX_TITLE_EVENT_BYTES
from stores.sqlite.sql import _LINKED

_COMPRESS_MIN = 128
"""A single event's JSON of at least this many characters is stored zlib-compressed
(when that is smaller)."""
_ZLIB_LEVEL = 6
_DICTIONARY = (
    # What the messages dsh writes have in common (core.log, core.engine), the most
    # frequent last (deflate reaches back least far for those): a preset dictionary lets
    # even a short message's skeleton compress, 15 % off the message rows of the storage
    # benchmark (schema v8). Never change it: a row names it by its Adler-32 (zlib's
    # FDICT header), and a new one needs a new name beside it.
    b'{"type":"tool-call","id":"call_","name":"","arguments":"{\\"'
    b'{"type":"tool-result","toolCallId":"call_","content":[{"type":"text","text":"'
    b'"}],"isError":false}'
    b'"source":{"kind":"session-reference","version":1,"references":[{"sessionId":"'
    b'"label":"","capturedThroughSeq":,"compacted":false,"originalMessages":'
    b',"retainedMessages":,"omittedMessages":0,"omittedBytes":0,"truncated":false,'
    b'"inputIndex":0}]}'
    b'"interrupted":true,"error":{"kind":"","message":"'
    b'"source":{"kind":"plugin","plugin":"compact"}'
    b'"usage":{"prompt_tokens":,"completion_tokens":,"total_tokens":}'
    b'"source":{"kind":"model","provider":"openai","model":"deepseek-chat"}'
    b'"provider":"offline","model":"offline"}},"finish":"completed"'
    b'{"turn":1,"step":0,"message":{"id":"","role":"assistant","content":'
    b'[{"type":"reasoning","text":"'
    b'{"id":"","role":"user","content":[{"type":"text","text":"'
    b'"}],"source":{"kind":"user"}}'
)
_DICTIONARY_ID = zlib.adler32(_DICTIONARY).to_bytes(4, "big")


def _text(data: str | bytes | None) -> str:
    """A stored single event's JSON text, from its ``data`` as ``_data_sql`` selects it
    (a BLOB is its zlib-compressed UTF-8, or a message linked to its search row)."""
    if data.__class__ is str:
        return data
    if data is None:
        raise ValueError("a message's text is missing (its row in search_messages is gone)")
    if data[:1] == _LINKED:
        return _linked_text(data)  # type: ignore[arg-type]
    return _inflate(data)  # type: ignore[arg-type]


_LINK_MIN = 32
"""Texts shorter than this are stored in the row as before (a link costs 13 bytes)."""


def _stored_message(text_json: str, indexed: str | None) -> str | bytes:
    """What a single event's JSON (``text_json``) is stored as when ``indexed``, the text
    its search row holds, is written in the same transaction: when that text, escaped as
    ``dumps_js`` escapes it, is a part of the JSON, the row keeps the JSON without it and
    where it was (a message's text is then stored once, issue 15). Layout: ``_LINKED``,
    the offset (code points into the JSON), the size of the rest and the UTF-8 size of
    the text (4 bytes each, big endian: a reader that did not append the text, or a
    search row that changed, is damage, not an empty text), then the rest as
    ``_stored_data`` stores it (compressed, or its UTF-8). Readers get the search row's
    text appended (``_data_sql``) and put it back at the offset: the very JSON that was
    appended, whichever occurrence was taken out."""
    if indexed is None or len(indexed) < _LINK_MIN:
        return _stored_data(text_json)
    escaped = dumps_js(indexed)[1:-1]
    at = text_json.rfind(escaped)
    if at < 0:
        return _stored_data(text_json)  # e.g. several text blocks, or a NUL replaced
    rest = _stored_data(text_json[:at] + text_json[at + len(escaped) :])
    body = rest if rest.__class__ is bytes else rest.encode("utf-8")  # type: ignore[union-attr]
    sizes = (at, len(body), len(indexed.encode("utf-8")))
    return _LINKED + b"".join(n.to_bytes(4, "big") for n in sizes) + body


def _linked_text(data: bytes) -> str:
    """The JSON of a linked message row (see ``_stored_message``), its search row's text
    appended to it. Damage raises ``ValueError`` (or ``zlib.error``)."""
    if len(data) < 13:
        raise ValueError("a linked message row is too short")
    at = int.from_bytes(data[1:5], "big")
    size = int.from_bytes(data[5:9], "big")
    text_size = int.from_bytes(data[9:13], "big")
    if 13 + size + text_size != len(data):
        raise ValueError(
            f"a linked message row is not the {size} bytes it says and a text of "
            f"{text_size} (its search row's text is missing or not its own)"
        )
    body = data[13 : 13 + size]
    rest = _inflate(body) if body[:1] == b"x" else body.decode("utf-8")
    if at > len(rest):
        raise ValueError(f"a linked message row puts its text at {at}, past its end")
    text = data[13 + size :].decode("utf-8")
    return rest[:at] + dumps_js(text)[1:-1] + rest[at:]


def _title_text(data: str | bytes | None) -> str:
    """A title row's JSON text (``_text``), inflated no further than a title event may
    hold: a row written by hand cannot make a listing decompress a bomb."""
    if not isinstance(data, bytes) or data[:1] == _LINKED:
        return _text(data)  # (a value of another type is a TypeError there)
    bound = MAX_TITLE_EVENT_BYTES + 1
    if len(data) >= 6 and data[1] & 0x20:
        if data[2:6] != _DICTIONARY_ID:
            raise ValueError(f"compressed with an unknown dictionary (id {data[2:6].hex()})")
        inflater = zlib.decompressobj(zdict=_DICTIONARY)
    else:
        inflater = zlib.decompressobj()
    raw = inflater.decompress(data, bound)
    if len(raw) >= bound:
        raise ValueError(
            f"it holds more than the {MAX_TITLE_EVENT_BYTES:,} bytes a title event may hold"
        )
    if not inflater.eof or inflater.unused_data:
        raise ValueError("its compressed data is corrupt")
    return raw.decode("utf-8")


def _inflate(data: bytes) -> str:
    """A compressed single event's JSON text: a zlib stream, with the preset dictionary
    ``_DICTIONARY`` when its header says so (FDICT and that dictionary's id)."""
    if len(data) < 6 or not data[1] & 0x20:
        return zlib.decompress(data).decode("utf-8")
    if data[2:6] != _DICTIONARY_ID:
        raise ValueError(f"compressed with an unknown dictionary (id {data[2:6].hex()})")
    inflater = zlib.decompressobj(zdict=_DICTIONARY)
    raw = inflater.decompress(data)
    if not inflater.eof or inflater.unused_data:
        raise ValueError("a compressed event is truncated or has bytes after its end")
    return raw.decode("utf-8")


def _stored_data(text: str) -> str | bytes:
    """What a single event's JSON is stored as: itself, or compressed (against the
    preset dictionary ``_DICTIONARY``) when that saves a tenth of it."""
    if len(text) < _COMPRESS_MIN:
        return text
    raw = text.encode("utf-8")
    deflater = zlib.compressobj(_ZLIB_LEVEL, zdict=_DICTIONARY)
    packed = deflater.compress(raw) + deflater.flush()
    return packed if len(packed) < len(raw) * 0.9 else text

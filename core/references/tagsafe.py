"""Tag-safe JSON (SPEC §4.8): JavaScript-identical JSON that cannot close an XML-ish tag."""

from __future__ import annotations

import re
from json.encoder import encode_basestring
from typing import Any, Final

from core.jsoncodec import dumps_js, utf8_len

__all__ = [
    "stringify_tag_safe_json",
    "tag_safe_json_size",
    "tag_safe_utf8_parts",
    "tag_safe_utf8_size",
]


def stringify_tag_safe_json(value: Any) -> str:
    """``JSON.stringify(value)`` with every ``<`` written as ``\\u003c``.

    A ``<`` can only occur inside a JSON string, where ``\\u003c`` is an equivalent escape,
    so the text parses back to the same value. Non-JSON values raise ``TypeError``.
    """
    return dumps_js(value).replace("<", "\\u003c")


def tag_safe_json_size(value: Any) -> int:
    """UTF-8 byte length of ``stringify_tag_safe_json(value)`` (the text is surrogate-free)."""
    if type(value) is str:
        # Hot path for retention: the stock encoder escapes exactly what JSON.stringify
        # does except surrogates, which it leaves raw (and then UTF-8 encoding fails).
        quoted = encode_basestring(value)
        extra = 5 * value.count("<")
        if quoted.isascii():
            return len(quoted) + extra
        try:
            return len(quoted.encode("utf-8")) + extra
        except UnicodeEncodeError:
            pass
    text = dumps_js(value)
    return utf8_len(text) + 5 * text.count("<")


# A byte that may make the JSON of a text more than the text in quotes: a quote, a
# backslash, a control character, "<", or 0xED (the lead byte of a surrogate, and of
# U+D000-U+D7FF, which only costs the slow path).
_NOT_PLAIN: Final = re.compile(rb'["\\<\x00-\x1f\xed]')


def tag_safe_utf8_parts(data: bytes) -> tuple[bytes, ...]:
    """``stringify_tag_safe_json(text)`` in UTF-8, for the text whose UTF-8
    (``surrogatepass``) is ``data``, as parts to join: ``data`` itself between quotes when
    nothing in it is escaped (no copy of it)."""
    if _NOT_PLAIN.search(data) is None:
        return b'"', data, b'"'
    return (stringify_tag_safe_json(data.decode("utf-8", "surrogatepass")).encode("utf-8"),)


def tag_safe_utf8_size(data: bytes) -> int:
    """``tag_safe_json_size(text)`` for the text whose UTF-8 (``surrogatepass``) is ``data``."""
    if _NOT_PLAIN.search(data) is None:
        return len(data) + 2
    return tag_safe_json_size(data.decode("utf-8", "surrogatepass"))

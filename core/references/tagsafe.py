"""Tag-safe JSON (SPEC §4.8): JavaScript-identical JSON that cannot close an XML-ish tag."""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from core.jsoncodec import dumps_js, utf8_len

__all__ = ["stringify_tag_safe_json", "tag_safe_json_size"]


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

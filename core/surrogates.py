"""Strings as JavaScript sees them (SPEC §4.1): a high surrogate directly followed by a
low surrogate *is* the astral character, however it was written (raw in a Python
``str``, escaped in JSON, or made by joining two strings). Every entrance of text merges
such pairs with ``merge_surrogate_pairs``; only unpaired surrogates remain.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "has_surrogate",
    "has_surrogate_pair",
    "merge_escaped_pairs",
    "merge_json_pairs",
    "merge_surrogate_pairs",
]

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _py_has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (the reference of the C version)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _load_has_surrogate() -> Callable[[str], bool]:
    # core._speedups' scan (30x the regex on a large non-ASCII text), unless it is not
    # built or DSH_PURE_PYTHON asks for the pure-Python versions (as core.jsoncodec).
    if os.environ.get("DSH_PURE_PYTHON", "") not in ("", "0"):
        return _py_has_surrogate
    try:
        speedups = importlib.import_module("core._speedups")
    except ImportError:  # only where no C compiler was available
        return _py_has_surrogate
    found: Callable[[str], bool] | None = getattr(speedups, "has_surrogate", None)
    return found or _py_has_surrogate


has_surrogate: Callable[[str], bool] = _load_has_surrogate()
"""Whether a str holds a surrogate code point (paired or not)."""


def _merged(match: re.Match[str]) -> str:
    pair = match.group()
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def merge_surrogate_pairs(text: str) -> str:
    """``text`` with each high surrogate that is directly followed by a low one replaced by
    the character they encode (the same object when there is none: the common case costs
    one ``isascii`` or one scan)."""
    if text.isascii() or not has_surrogate(text):
        return text
    return _PAIR.sub(_merged, text)


def has_surrogate_pair(text: str) -> bool:
    """Whether ``merge_surrogate_pairs`` would change ``text``."""
    return not text.isascii() and has_surrogate(text) and _PAIR.search(text) is not None


def merge_json_pairs(value: Any) -> Any:
    """A JSON value (dicts, lists, tuples, str, …) with every str in it, keys included,
    merged; ``value`` itself when nothing changes."""
    if isinstance(value, str):
        return merge_surrogate_pairs(value)
    if isinstance(value, Mapping):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = merge_surrogate_pairs(key) if isinstance(key, str) else key
            new_item = merge_json_pairs(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [merge_json_pairs(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


# An escaped high surrogate then an escaped low one, after an even run of backslashes
# (so the first backslash starts an escape).
_ESCAPED_PAIR = re.compile(
    r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def _unescaped(match: re.Match[str]) -> str:
    high, low = int(match.group(2), 16), int(match.group(3), 16)
    return match.group(1) + chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def merge_escaped_pairs(json_text: str) -> str:
    """JSON text (or the inside of a JSON string) with each escaped surrogate pair written
    as its character, as ``dumps_js`` writes it now: for upgrading text an older dsh
    stored, which escaped the halves apart. Nothing else changes (the same object when
    there is no pair)."""
    if "\\u" not in json_text:
        return json_text
    return _ESCAPED_PAIR.sub(_unescaped, json_text)

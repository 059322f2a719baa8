"""How deeply JSON nests, found without recursion (issue 31).

Python's parsers and encoders recurse once per level, so a value nested a few hundred levels
deep ends every reader with a ``RecursionError``. Writers refuse such data
(``core.limits.MAX_JSON_DEPTH``, checked on the JSON text by :func:`nests_deeper`);
readers of what a store already holds walk it with :func:`elide_deep`, which copies a
value iteratively and shows what lies deeper than a limit as ``…``, and write it whole with
:func:`dumps_deep` (an export stays exact).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["ELIDED", "dumps_deep", "elide_deep", "json_depth", "nests_deeper"]

_ATOMS = frozenset({str, int, float, bool, type(None)})

ELIDED = "…"
"""What a reader shows in place of a value nested deeper than it walks."""

# A whole string (escapes included, the unrolled form: no backtracking) or one bracket;
# only brackets outside strings are captured, so ``findall`` returns "" for each string.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([\[\]{}])', re.DOTALL)
_BTOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|([\[\]{}])', re.DOTALL)
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"[\[{][\]}]")


def json_depth(text: str | bytes) -> int:
    """The most containers open at once in the JSON ``text`` (``{}`` is 1, a scalar 0).

    One regex pass and a loop over the brackets outside strings: no recursion, whatever
    the text. On text that is not JSON the count is only an estimate (its parser then
    names the error)."""
    if isinstance(text, bytes):
        brackets = [b.decode("ascii") for b in _BTOKENS.findall(text)]
    else:
        brackets = _TOKENS.findall(text)
    depth = deepest = 0
    for bracket in brackets:
        if bracket == "{" or bracket == "[":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif bracket:
            depth -= 1
    return deepest


def nests_deeper(text: str | bytes, limit: int) -> bool:
    """Whether the JSON ``text`` opens more than ``limit`` containers at once (on text
    that is not JSON, an estimate: :func:`json_depth` is exact on any text).

    Cheap for the shallow data nearly every event holds: when the text has at most
    ``limit`` opening brackets in all, it cannot nest deeper. Otherwise its strings are
    cut out, then each pass removes every innermost pair of brackets (one level), all in
    the regex engine: at most ``limit`` passes over the brackets alone."""
    if isinstance(text, bytes):
        if text.count(b"{") + text.count(b"[") <= limit:
            return False
        return nests_deeper(text.decode("utf-8", "surrogateescape"), limit)
    if text.count("{") + text.count("[") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    for _ in range(limit):
        if not brackets:
            return False
        brackets = _INNERMOST.sub("", brackets)
    return bool(brackets)  # what is left is deeper


def elide_deep(value: Any, limit: int | None) -> Any:
    """A plain, mutable copy of the JSON ``value`` (objects as dicts, arrays as lists) in
    which every container nested deeper than ``limit`` levels (the value itself is level
    1) is replaced by ``ELIDED``; with ``None`` an exact copy (``thaw_json``).

    Iterative: it walks a value of any depth (a row stored before the depth limit, or by
    hand) without recursion."""
    if not isinstance(value, (Mapping, list, tuple)):
        return value
    if limit is None:
        limit = 0  # no limit
    elif limit < 1:
        return ELIDED
    root: Any = {} if isinstance(value, Mapping) else []
    # Each entry: a source container, its (still empty) copy and its level.
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    while stack:
        source, copy, level = stack.pop()
        deeper = level + 1
        if isinstance(copy, dict):
            for key, item in source.items():
                copy[key] = item if item.__class__ in _ATOMS else _child(item, deeper, limit, stack)
        else:
            append = copy.append
            for item in source:
                append(item if item.__class__ in _ATOMS else _child(item, deeper, limit, stack))
    return root


def _child(item: Any, level: int, limit: int, stack: list[tuple[Any, Any, int]]) -> Any:
    """The copy of ``item`` found at ``level``: an empty container queued on ``stack`` to
    be filled, ``ELIDED`` past ``limit``, or ``item`` itself when it is not a container."""
    if isinstance(item, Mapping):
        child: Any = {}
    elif isinstance(item, (list, tuple)):
        child = []
    else:
        return item
    if level > limit > 0:
        return ELIDED
    stack.append((item, child, level))
    return child


_END: Any = object()


def dumps_deep(value: Any, scalar: Callable[[Any], str], key: Callable[[Any], str]) -> str:
    """Compact JSON of ``value`` at any depth, without recursion: ``scalar`` writes every
    value that is not a mapping, list or tuple, ``key`` every object key (each raises
    ``TypeError`` for what is not JSON); a cycle is a ``TypeError`` too."""
    parts: list[str] = []
    append = parts.append
    active: set[int] = set()
    # The open containers: their items, closing bracket, id and whether they are objects.
    stack: list[tuple[Iterator[Any], str, int, bool]] = []
    item = value
    while True:
        if item.__class__ in _ATOMS:
            append(scalar(item))
        elif isinstance(item, (dict, list, tuple, Mapping)):
            marker = id(item)
            if marker in active:
                raise TypeError("circular reference in JSON value")
            active.add(marker)
            if isinstance(item, (list, tuple)):
                append("[")
                stack.append((iter(item), "]", marker, False))
            else:
                append("{")
                stack.append((iter(item.items()), "}", marker, True))
        else:
            append(scalar(item))
        while stack:  # the next item to write, closing the containers it leaves
            items, closer, marker, is_object = stack[-1]
            following = next(items, _END)
            if following is _END:
                append(closer)
                active.discard(marker)
                stack.pop()
                continue
            if parts[-1] != ("{" if is_object else "["):  # only an opening is a bare bracket
                append(",")
            if is_object:
                name, item = following
                append(key(name))
                append(":")
            else:
                item = following
            break
        else:
            return "".join(parts)

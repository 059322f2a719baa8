"""How ``re.IGNORECASE`` (``core.search.matches``: what a search term matches) folds
characters, for the indexes that must find every text a term matches: ``fold`` (one
character for one: the characters it matches with each other fold alike) and
``same_letters`` (the characters it matches a character with). Tests check both against
``re`` over every code point."""

from __future__ import annotations

import functools
import re

__all__ = ["fold", "same_letters"]

_EXTRA_CASES = (
    "i\u0131",
    "s\u017f",
    "\u00b5\u03bc",
    "\u0345\u03b9\u1fbe",
    "\u0390\u1fd3",
    "\u03b0\u1fe3",
    "\u03b2\u03d0",
    "\u03b5\u03f5",
    "\u03b8\u03d1",
    "\u03ba\u03f0",
    "\u03c0\u03d6",
    "\u03c1\u03f1",
    "\u03c2\u03c3",
    "\u03c6\u03d5",
    "\u0432\u1c80",
    "\u0434\u1c81",
    "\u043e\u1c82",
    "\u0441\u1c83",
    "\u0442\u1c84\u1c85",
    "\u044a\u1c86",
    "\u0463\u1c87",
    "\u1c88\ua64b",
    "\u1e61\u1e9b",
    "\ufb05\ufb06",
)
"""The sets of lowercase characters that ``re.IGNORECASE`` matches with each other (those
of ``re._casefix``: they share an uppercase)."""

_SAME_CASE = {c: group[0] for group in _EXTRA_CASES for c in group[1:]}
_OTHER_CASES = re.compile("[" + "".join(_SAME_CASE) + "]")


def fold(text: str) -> str:
    """``text`` with each character folded (one for one): characters that
    ``re.IGNORECASE`` matches with each other fold to the same one. (``str.lower`` is
    the simple lowercase mapping ``re`` uses, but for capital I with a dot above, which it
    lowers to two characters, and capital sigma, which it lowers to final sigma at a
    word's end: both fold as ``re`` matches them.)"""
    lowered = text.replace("\u0130", "i").lower()
    if _OTHER_CASES.search(lowered) is None:  # (most texts: no translation to pay for)
        return lowered
    return _OTHER_CASES.sub(lambda m: _SAME_CASE[m.group()], lowered)


_ASCII_WIDE = {"i": "iI\u0130\u0131", "k": "kK\u212a", "s": "sS\u017f"}
"""The ASCII letters ``re.IGNORECASE`` matches with non-ASCII characters too: i with
dotted capital I and dotless i, k with the Kelvin sign, s with long s."""


@functools.lru_cache(maxsize=4096)
def same_letters(ch: str) -> str:
    """``ch`` first, then every other character ``re.IGNORECASE`` matches it with (for
    an ASCII character, at once; the first non-ASCII letter asked for builds a table of
    every code point, a few tenths of a second, once)."""
    if ch.isascii():
        wide = _ASCII_WIDE.get(ch.lower())
        if wide is not None:
            return ch + wide.replace(ch, "")
        return "".join(dict.fromkeys((ch, ch.lower(), ch.upper())))
    key = fold(ch)
    if key.isascii():  # (İ, ı, the Kelvin sign, long s)
        return ch + same_letters(key).replace(ch, "")
    return ch + "".join(c for c in _cased_by_fold().get(key, ()) if c != ch)


@functools.cache
def _cased_by_fold() -> dict[str, tuple[str, ...]]:
    """Every non-ASCII character that has another case, by its ``fold``."""
    found: dict[str, list[str]] = {}
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if ch.lower() != ch or ch.upper() != ch:
            found.setdefault(fold(ch), []).append(ch)
    return {key: tuple(chars) for key, chars in found.items()}

"""Making untrusted text safe to show: no control or invisible character ever reaches a terminal.

Titles, ids, cwds and message bodies may hold anything. This module holds THE rule for
what may be shown raw, and every presentation of it (escape, mask, remove, JSON):

* always unsafe: every character of Unicode category Cc (C0, DEL, C1), Cf (bidi
  embeddings/overrides/isolates and marks, zero-width characters, word joiner, BOM, soft
  hyphen, tag characters U+E0001/U+E0020–U+E007F, …), Cs (lone surrogates), Zl and Zp
  (line and paragraph separators); the whole tag block U+E0000–U+E007F; the invisible
  selectors and fillers that can carry hidden data or hide text (variation selectors
  VS1–VS14 U+FE00–U+FE0D and VS17–VS256 U+E0100–U+E01EF, Mongolian free variation
  selectors, the combining grapheme joiner U+034F, Hangul fillers U+115F/U+1160/U+3164/
  U+FFA0, Khmer inherent vowels U+17B4/U+17B5); U+2065 (reserved in the bidi block);
  the noncharacters U+FFFE and U+FFFF (a byte-order mark read backwards; XML forbids them,
  so an SVG of the screen could not hold them: with the C0 controls and lone surrogates
  above, every character XML 1.0 forbids is escaped);
* allowed only where emoji need them: VS15/VS16 (U+FE0E/U+FE0F) right after a visible
  character (one selector, never a run: a run could encode hidden bytes), and the zero
  width joiner U+200D only between two emoji (family, rainbow flag, skin-tone sequences).

So ordinary text, CJK and common emoji are shown unchanged, while nothing can hide or
reorder text. The cost: an emoji tag sequence (the Scotland flag) shows its tags escaped,
and rare scripts' format characters (Arabic number signs, Egyptian format controls) are
escaped too. Rendering must still go through ``rich.text.Text`` (never markup).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.jsoncodec import dumps_js
from core.surrogates import merge_surrogate_pairs

__all__ = [
    "escape_control",
    "escape_json_text",
    "mask_control",
    "relative_age",
    "remove_control",
    "single_line",
    "terminal_json",
]

# Every character of categories Cc, Cf, Cs, Zl, Zp (Unicode 16), and the other invisible
# characters listed above, except TAB, LF (kept in multi-line text), ZWJ, VS15 and VS16
# (contextual). tests/core/test_display.py checks this table against ``unicodedata``.
_ALWAYS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200c\u200e\u200f\u2028-\u202e"
    "\u2060-\u206f\u3164\ud800-\udfff\ufe00-\ufe0d\ufeff\uffa0\ufff9-\ufffb\ufffe\uffff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
# Characters an emoji ZWJ sequence is made of (pictographs, modifiers, VS16 before a ZWJ).
_EMOJI = (
    "\xa9\xae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf"
    "\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_SELECTORS = "\ufe0e\ufe0f"


_ALWAYS_CHAR = re.compile(f"[{_ALWAYS}]")
_EMOJI_CHAR = re.compile(f"[{_EMOJI}]")


def _kept(text: str, at: int) -> bool:
    """Whether the ZWJ or selector at ``text[at]`` is where emoji need it (then it stays)."""
    before = text[at - 1] if at else ""
    if text[at] == "\u200d":
        if before == "\ufe0f" and at > 1:
            before = text[at - 2]
        after = text[at + 1 : at + 2]
        return bool(before and after and _EMOJI_CHAR.match(before) and _EMOJI_CHAR.match(after))
    return not (
        not before
        or before.isspace()
        or before in _SELECTORS
        or before == "\u200d"
        or _ALWAYS_CHAR.match(before)
    )


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class _Candidates:
    """One character class (fast to scan); the few contextual ones are decided by ``_kept``.

    Text without characters beyond the BMP (nearly all) is scanned with the BMP part of the
    class alone: the astral ranges make every character's test several times slower.
    """

    def __init__(self, always: str) -> None:
        self.full = re.compile(f"[{always}\u200d{_SELECTORS}]")
        bmp = always.split("\U000110bd", 1)[0]  # the astral ranges come last in _ALWAYS
        self.bmp = re.compile(f"[{bmp}\u200d{_SELECTORS}]")

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        pattern = self.full if _ASTRAL.search(text) else self.bmp
        return pattern.sub(repl, text)


_UNSAFE = _Candidates(_ALWAYS)  # multi-line text: TAB and LF are kept
_UNSAFE_WITH_NEWLINES = _Candidates("\t\n" + _ALWAYS)  # one line: TAB and LF escaped
_UNSAFE_KEEP_TAB = _Candidates("\n" + _ALWAYS)  # an editor line: TAB kept
# For JSON: every character that may be unsafe somewhere, without context (JSON is for
# machines; escaping a harmless ZWJ or VS16 there costs nothing and loses nothing).
_JSON_UNSAFE = re.compile(f"[\x00-\x1f\u200d{_SELECTORS}{_ALWAYS}]")
_JSON_UNSAFE_BMP = re.compile(f"(?![\U00010000-\U0010ffff])[\x00-\x1f\u200d{_SELECTORS}{_ALWAYS}]")
_CONTEXTUAL = frozenset("\u200d" + _SELECTORS)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _CONTEXTUAL and _kept(match.string, match.start()):
        return char
    code = ord(char)
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_control(text: str, *, multiline: bool = True) -> str:
    """Replace every unsafe character by a visible escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``).

    With ``multiline`` newlines and tabs are kept (message bodies); without it they are
    escaped too (labels, titles, ids, cwds: always one line). A surrogate pair is shown as
    its character (SPEC §4.1; a reply streamed in halves before it is stored), a lone one
    escaped. The result holds no unsafe character, and escaping it again changes nothing.
    """
    if text.isascii() and text.isprintable():
        return text
    pattern = _UNSAFE if multiline else _UNSAFE_WITH_NEWLINES
    return pattern.sub(_escape, merge_surrogate_pairs(text))


def single_line(text: str, limit: int | None = None) -> str:
    """A safe one-line form of an untrusted label, optionally cut with an ellipsis."""
    out = escape_control(text, multiline=False)
    if limit is not None and len(out) > limit:
        # The cut can leave a ZWJ or selector without its partner: check the cut again.
        out = escape_control(out[: max(0, limit - 1)], multiline=False) + "…"
    return out


def _mask(match: re.Match[str]) -> str:
    char = match.group()
    if char in _CONTEXTUAL and _kept(match.string, match.start()):
        return char
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛, ␇, ␊, …
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def mask_control(line: str) -> str:
    """``line`` with each unsafe character replaced by ONE visible character (``␛``, ``�``).

    For editors, where a character's index must not move (the composer's ``TextArea``):
    the same rule as :func:`escape_control`, a tab kept, a newline masked.
    """
    if line.isascii() and line.isprintable():
        return line
    return _UNSAFE_KEEP_TAB.sub(_mask, line)


def _drop(match: re.Match[str]) -> str:
    char = match.group()
    return char if char in _CONTEXTUAL and _kept(match.string, match.start()) else ""


def remove_control(text: str) -> str:
    """``text`` without its unsafe characters (newlines and tabs removed too).

    For labels, where an escape would be noise. Removing can bring a ZWJ or a selector
    next to a new neighbour, so it repeats until nothing unsafe is left.
    """
    while True:
        out = _UNSAFE_WITH_NEWLINES.sub(_drop, text)
        if out == text:
            return out
        text = out


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_json_text(json_text: str, *, keep_astral: bool = False) -> str:
    """JSON text (compact, as ``dumps_js`` writes it) with every control, bidi and format
    character written as a ``\\uXXXX`` escape: still valid JSON, parsing to the same value.

    Outside strings compact JSON holds only ASCII punctuation, so every such character sits
    inside a string, where an escape means exactly that character. A character beyond the
    BMP (a tag character) can only be escaped as a surrogate pair, which every parser,
    ``loads_exact`` included (SPEC §4.1), reads back as the character; ``keep_astral``
    leaves those raw all the same, for a log that stays byte for byte what it was.
    """
    if json_text.isascii() and json_text.isprintable():
        return json_text
    return (_JSON_UNSAFE_BMP if keep_astral else _JSON_UNSAFE).sub(_json_escape, json_text)


def terminal_json(value: Any) -> str:
    """``dumps_js(value)`` safe to print on a terminal (every ``--json`` printer uses it)."""
    return escape_json_text(dumps_js(value))


def relative_age(created_at_ms: int, now_ms: int | None = None) -> str:
    """``just now``, ``5m ago``, ``3h ago``, ``2d ago``, ``4w ago``, ``1y ago``; a time
    more than a minute ahead of the clock (a log from a machine whose clock ran ahead) as
    its date, ``2031-05-04``."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if created_at_ms - now > 60_000:
        return _date(created_at_ms)
    seconds = max(0, (now - created_at_ms) // 1000)
    if seconds < 60:
        return "just now"
    for size, unit in ((31_536_000, "y"), (604_800, "w"), (86_400, "d"), (3_600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"  # pragma: no cover - unreachable


def _date(epoch_ms: int) -> str:
    """The local date of ``epoch_ms`` (UTC's when the local one is past year 9999)."""
    for zone in (None, UTC):
        try:
            return datetime.fromtimestamp(epoch_ms / 1000, zone).strftime("%Y-%m-%d")
        except (OverflowError, OSError, ValueError):
            continue
    return "?"

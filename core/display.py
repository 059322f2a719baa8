"""Making untrusted text safe to show: no control characters ever reach a terminal.

Titles, ids, cwds and message bodies may hold anything. Before display, every control
character, bidi override and lone surrogate is replaced by a visible escape (``\\x1b``,
``\\u202e``, ``\\ud800``). Rendering must still go through ``rich.text.Text`` (never markup).
"""

from __future__ import annotations

import re
import time

__all__ = ["escape_control", "relative_age", "single_line"]

# C0 and C1 controls, DEL, bidi embeddings/overrides/isolates, line/paragraph separators,
# zero-width and other format characters that can reorder or hide text, lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
    "\ufff9-\ufffb\ud800-\udfff]"
)
_UNSAFE_WITH_NEWLINES = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
    "\ufff9-\ufffb\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control(text: str, *, multiline: bool = True) -> str:
    """Replace every unsafe character by a visible escape.

    With ``multiline`` newlines and tabs are kept (message bodies); without it they are
    escaped too (labels, titles, ids, cwds: always one line).
    """
    pattern = _UNSAFE if multiline else _UNSAFE_WITH_NEWLINES
    if text.isascii() and text.isprintable():
        return text
    out = pattern.sub(_escape, text)
    return out


def single_line(text: str, limit: int | None = None) -> str:
    """A safe one-line form of an untrusted label, optionally cut with an ellipsis."""
    out = escape_control(text, multiline=False)
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "…"
    return out


def relative_age(created_at_ms: int, now_ms: int | None = None) -> str:
    """``just now``, ``5m ago``, ``3h ago``, ``2d ago``, ``4w ago``, ``1y ago``."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    seconds = max(0, (now - created_at_ms) // 1000)
    if seconds < 60:
        return "just now"
    for size, unit in ((31_536_000, "y"), (604_800, "w"), (86_400, "d"), (3_600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"  # pragma: no cover - unreachable

"""The test oracle for terminal safety (issue 12 §3), independent of ``core.display``'s table:
which characters may never reach a terminal raw, and hostile strings to try."""

from __future__ import annotations

import unicodedata

__all__ = [
    "ALWAYS_CATEGORIES",
    "EXTRA_INVISIBLE",
    "HOSTILE",
    "VS15",
    "VS16",
    "ZWJ",
    "assert_terminal_safe",
    "offending",
]

# An oracle independent of the module's table: what may never be shown raw.

ALWAYS_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
EXTRA_INVISIBLE = (
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0}
    | set(range(0xFE00, 0xFE0E))
    | set(range(0xE0000, 0xE0080))
    | set(range(0xE0100, 0xE01F0))
)
ZWJ, VS15, VS16 = "\u200d", "\ufe0e", "\ufe0f"


def _emoji(char: str) -> bool:
    return 0x1F000 <= ord(char) <= 0x1FAFF or 0x2600 <= ord(char) <= 0x27BF


def offending(text: str, keep: str = "") -> list[tuple[int, str]]:
    """Every character of ``text`` that hides or reorders text, with its index."""
    bad = []
    for i, char in enumerate(text):
        if char in keep:
            continue
        if char == ZWJ:
            before = text[i - 1] if i else ""
            if before == VS16 and i > 1:
                before = text[i - 2]
            after = text[i + 1] if i + 1 < len(text) else ""
            if not (before and after and _emoji(before) and _emoji(after)):
                bad.append((i, char))
        elif char in (VS15, VS16):
            before = text[i - 1] if i else ""
            if not before or before.isspace() or offending(before) or before in (VS15, VS16):
                bad.append((i, char))
        elif unicodedata.category(char) in ALWAYS_CATEGORIES or ord(char) in EXTRA_INVISIBLE:
            bad.append((i, char))
    return bad


# Every kind of hostile text at once: CSI (clear screen), OSC 0 (window title), OSC 52 (write
# the clipboard), BEL, a C1 CSI, bidi override and isolate, tag characters spelling a hidden
# instruction, a zero-width space, a lone surrogate, NUL, a line separator.
HOSTILE = (
    "\x1b[2J\x1b]0;pwned\x07\x1b]52;c;aGkK\x07\x9b31m\u202eevil\u2066"
    + "".join(chr(0xE0000 + ord(c)) for c in "IGNORE")
    + "\u200b\ud800\x00\u2028end"
)


def assert_terminal_safe(text: str, where: str = "", keep: str = "\n\t") -> None:
    bad = offending(text, keep=keep)
    assert bad == [], (where, [(i, hex(ord(c))) for i, c in bad[:10]], text[:300])

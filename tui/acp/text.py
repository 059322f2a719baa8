"""Stored text on its way to an ACP client.

Python ``str`` may hold lone surrogates (ids, titles and bodies are arbitrary), but a client
parses our JSON with a strict UTF-8 decoder (Zed's serde_json rejects ``\\ud800`` alone), so
every surrogate in display text becomes U+FFFD. Clients draw the text in a terminal or an
editor, so control characters are escaped too (``core.display.escape_control``, the one
escaping function; newlines and tabs kept). Session ids are never altered.
"""

from __future__ import annotations

import re

from core.display import escape_control, single_line
from tui.shared.fences import code_span

__all__ = ["client_label", "client_text", "code_span"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def client_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD and control characters
    escaped (``\\x1b``); newlines and tabs are kept."""
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    return escape_control(text)


def client_label(text: str, limit: int | None = None) -> str:
    """An untrusted label or title on one line: controls and newlines made visible."""
    return single_line(client_text(text), limit)

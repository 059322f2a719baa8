"""Mentions in composer text (SPEC §4.2): ``@[label](dsh-session:…)`` and bare URI tokens.

One left-to-right scanner serves both the strict parser (which raises on a malformed
reference) and the span finder the composer uses for styling (which never raises).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from core.references.config import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError
from core.references.uri import (
    SESSION_REFERENCE_SCHEME,
    decode_session_reference_uri,
    encode_session_reference_uri,
)
from core.surrogates import merge_surrogate_pairs

__all__ = [
    "ParsedSessionReferenceText",
    "SessionReferenceInput",
    "SessionReferenceSpan",
    "escape_mention_label",
    "find_session_reference_spans",
    "format_session_reference_mention",
    "parse_session_reference_text",
]


@dataclass(frozen=True, slots=True)
class SessionReferenceInput:
    """A session the user referenced; ``label`` ``None`` means "show the id"."""

    session_id: str
    label: str | None = None


@dataclass(frozen=True, slots=True)
class ParsedSessionReferenceText:
    """Composer text with each mention replaced by ``@label``, and the references in order."""

    text: str
    references: tuple[SessionReferenceInput, ...]


@dataclass(frozen=True, slots=True)
class SessionReferenceSpan:
    """Where one mention or bare token sits in the raw text: ``text[start:end]``.

    ``kind`` is ``"mention"`` or ``"bare"``; ``label`` is the unescaped mention label (for a
    bare token, the id, or ``None`` when invalid); ``session_id`` is ``None`` when the URI
    is not a valid reference (the strict parser would raise on it).
    """

    start: int
    end: int
    kind: Literal["mention", "bare"]
    label: str | None
    uri: str
    session_id: str | None

    @property
    def valid(self) -> bool:
        return self.session_id is not None


def escape_mention_label(label: str) -> str:
    """Backslash-escape ``\\`` and ``]`` so the label cannot end the mention early."""
    return label.replace("\\", "\\\\").replace("]", "\\]")


def format_session_reference_mention(ref: SessionReferenceInput) -> str:
    """``@[label](uri)``; the label defaults to the session id."""
    label = ref.session_id if ref.label is None else ref.label
    return f"@[{escape_mention_label(label)}]({encode_session_reference_uri(ref.session_id)})"


# --------------------------------------------------------------------------- scanning

_START = re.compile(r"@\[|" + re.escape(SESSION_REFERENCE_SCHEME))
# JavaScript's ``\s`` exactly (SPEC §4.2): Python's ``\s`` also matches U+001C-U+001F and
# U+0085 but not U+FEFF, so the set is spelled out rather than borrowed.
_JS_WHITESPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# What a backslash cannot escape in a label: JavaScript's line terminators (its "." with
# the "u" flag matches everything else, lone surrogates included).
_LINE_BREAKS: Final = "\n\r\u2028\u2029"
_LABEL_PART = re.compile(rf"[^\\\]]*(?:\\[^{_LINE_BREAKS}][^\\\]]*)*")
_LABEL_UNESCAPE = re.compile(rf"\\([^{_LINE_BREAKS}])")
_URI_RUN = re.compile(rf"[^{_JS_WHITESPACE})]*")
_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")
_LINK_OPEN = "](" + SESSION_REFERENCE_SCHEME


@dataclass(frozen=True, slots=True)
class _Raw:
    start: int
    end: int
    kind: Literal["mention", "bare"]
    label: str | None  # unescaped; None for bare tokens
    uri: str


def _scan(text: str) -> Iterator[_Raw]:
    """Yield every mention and bare token, left to right, without validating URIs.

    Linear in ``len(text)``: where a label scan stops depends only on the backslash parity
    seen from any ``@[`` before it (a ``[`` always ends an escape pair), so one label scan
    answers every ``@[`` whose label starts inside it, and its URI run is looked at once.
    The scan stops at the first unescaped ``]`` or where no label can go on: a backslash
    before a line break, or a final lone backslash.
    """
    pos = 0
    n = len(text)
    # (first label char, where the scan stopped, index of the closing "]" or -1,
    #  URI end or -2 unknown / -1 none)
    cache: tuple[int, int, int, int] | None = None
    while pos < n:
        m = _START.search(text, pos)
        if m is None:
            return
        at = m.start()
        if m.group() != "@[":
            pm = _PAYLOAD.match(text, m.end())
            if pm is None:
                pos = m.end()  # "dsh-session:" + nothing/punctuation is ordinary text
                continue
            yield _Raw(at, pm.end(), "bare", None, text[at : pm.end()])
            pos = pm.end()
            continue
        label_start = at + 2
        if cache is not None and cache[0] <= label_start <= cache[1]:
            _, _, close, uri_end = cache
        else:
            lm = _LABEL_PART.match(text, label_start)
            assert lm is not None
            stop = lm.end()
            close = stop if stop < n and text[stop] == "]" else -1
            uri_end = -2
            cache = (label_start, stop, close, uri_end)
        if close < 0 or not text.startswith(_LINK_OPEN, close):
            pos = at + 1  # its parts are ordinary text (and may hold a bare token)
            continue
        if uri_end == -2:
            um = _URI_RUN.match(text, close + 2)
            assert um is not None
            uri_end = um.end() if um.end() < n and text[um.end()] == ")" else -1
            cache = (cache[0], cache[1], close, uri_end)
        if uri_end < 0:
            pos = at + 1
            continue
        label = _LABEL_UNESCAPE.sub(r"\1", text[label_start:close])
        yield _Raw(at, uri_end + 1, "mention", label, text[close + 2 : uri_end])
        pos = uri_end + 1
        cache = None


def find_session_reference_spans(text: str) -> list[SessionReferenceSpan]:
    """Every mention and bare token in ``text`` with its character span; never raises."""
    spans: list[SessionReferenceSpan] = []
    for raw in _scan(text):
        try:
            session_id: str | None = decode_session_reference_uri(raw.uri)
        except SessionReferenceError:
            session_id = None
        label = raw.label if raw.kind == "mention" else session_id
        spans.append(SessionReferenceSpan(raw.start, raw.end, raw.kind, label, raw.uri, session_id))
    return spans


def parse_session_reference_text(text: str) -> ParsedSessionReferenceText:
    """Replace each mention by ``@label`` and each bare token by ``@id``; collect references.

    A mention with a malformed URI, or a bare token with a non-canonical payload, raises
    ``SessionReferenceError`` (``INVALID_REFERENCE``).
    """
    if not isinstance(text, str):
        raise SessionReferenceError(
            f"text must be a str, got {type(text).__name__}", SESSION_REFERENCE_INVALID_REFERENCE
        )
    text = merge_surrogate_pairs(text)  # user input: a pair is its character (SPEC §4.1)
    parts: list[str] = []
    refs: list[SessionReferenceInput] = []
    pos = 0
    for raw in _scan(text):
        session_id = decode_session_reference_uri(raw.uri)
        label = session_id if raw.label is None else raw.label
        parts.append(text[pos : raw.start])
        parts.append("@" + label)
        refs.append(SessionReferenceInput(session_id, label))
        pos = raw.end
    parts.append(text[pos:])
    return ParsedSessionReferenceText("".join(parts), tuple(refs))

"""Discovery: ``session/list`` pages and the ``/sessions`` command's answer.

``session/list`` orders sessions by their last activity (``updatedAt``: the time of their
last event, or their creation when they have none), newest first, and pages with a keyset
cursor — the (activity time, id) of the last session shown — so sessions created between
two requests neither repeat nor shift a page (one that becomes active moves to the top).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acp.schema import SessionInfo

from core.jsoncodec import dumps_js
from core.log import SessionHeader
from core.query import SessionTitle
from core.references import SessionDiscovery, SessionReferenceCandidate
from core.references.labels import mention_label, safe_mention
from tui.acp.text import client_label, client_text, code_span
from tui.shared.filtering import same_dir
from tui.shared.times import iso_time

__all__ = [
    "NO_CWD",
    "PAGE_SIZE",
    "InvalidCursorError",
    "SessionPage",
    "candidates_markdown",
    "decode_cursor",
    "encode_cursor",
    "iso_time",
    "list_page",
    "snippet_markdown",
]

PAGE_SIZE = 50
NO_CWD = "/"  # ACP requires an absolute cwd; a session created without one reports the root


class InvalidCursorError(ValueError):
    """The cursor was not one this agent handed out."""


@dataclass(frozen=True, slots=True)
class SessionPage:
    sessions: list[SessionInfo]
    next_cursor: str | None


def encode_cursor(activity: int, session_id: str) -> str:
    payload = dumps_js([activity, session_id]).encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (binascii.Error, ValueError) as err:
        raise InvalidCursorError(f"invalid cursor {cursor!r}") from err
    if (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], int)
        and not isinstance(value[0], bool)
        and isinstance(value[1], str)
    ):
        return value[0], value[1]
    raise InvalidCursorError(f"invalid cursor {cursor!r}")


def _after(activity: int, session_id: str, key: tuple[int, str]) -> bool:
    """Whether a session comes after ``key`` in list order (most recent first, then id)."""
    key_activity, key_id = key
    return activity < key_activity or (activity == key_activity and session_id > key_id)


def list_page(
    headers: Sequence[SessionHeader],
    titles: Mapping[str, SessionTitle],
    last_event_times: Mapping[str, int],
    *,
    cwd: str | None,
    cursor: str | None,
    page_size: int = PAGE_SIZE,
) -> SessionPage:
    """One page of ``headers`` ordered by last activity (newest first, ties by id),
    filtered by ``cwd`` when given."""
    key = decode_cursor(cursor) if cursor else None

    def activity(header: SessionHeader) -> int:
        return last_event_times.get(header.id, header.created_at)

    ordered = sorted(headers, key=lambda h: h.id)
    ordered.sort(key=activity, reverse=True)
    page: list[SessionHeader] = []
    more = False
    for header in ordered:
        if cwd is not None and (header.cwd is None or not same_dir(header.cwd, cwd)):
            continue
        if key is not None and not _after(activity(header), header.id, key):
            continue
        if len(page) == page_size:
            more = True
            break
        page.append(header)
    infos = []
    for header in page:
        title = titles.get(header.id)
        infos.append(
            SessionInfo(
                session_id=header.id,
                cwd=client_text(header.cwd) if header.cwd is not None else NO_CWD,
                title=client_label(title.title) if title is not None else None,
                updated_at=iso_time(activity(header)),
                field_meta={
                    "dsh": {"createdAt": header.created_at, "hasCwd": header.cwd is not None}
                },
            )
        )
    last = page[-1] if more and page else None
    return SessionPage(infos, encode_cursor(activity(last), last.id) if last else None)


def candidates_markdown(
    rows: Sequence[SessionReferenceCandidate | SessionDiscovery], query: str
) -> str:
    """The ``/sessions`` answer: the candidates in ranking order, each with its mention; a
    session found by what was said in it (after the others) quotes its matching message
    in one line, the matched words in bold."""
    if not rows:
        if query:
            return f"No other session matches {code_span(client_label(query))}."
        return "There are no other sessions to reference yet."
    head = "Sessions you can reference" + (
        f" matching {code_span(client_label(query))}" if query else ""
    )
    lines = [head + " (paste a mention into your message):", ""]
    for number, row in enumerate(rows, 1):
        candidate = row.candidate if isinstance(row, SessionDiscovery) else row
        hit = row.hit if isinstance(row, SessionDiscovery) else None
        where = client_label(candidate.cwd) if candidate.cwd is not None else "no cwd"
        # The label the user pastes into their own message: one line, bounded, nothing
        # hidden, no tag-breaking "<" or ">" (core.references.labels, the one label builder).
        label = mention_label(candidate.label, candidate.session_id)
        mention = safe_mention(candidate.session_id, candidate.label)
        lines.append(f"{number}. {label} — {where}")
        lines.append(f"   {code_span(mention)}")
        if hit is not None:
            lines.append(f"   > #{hit.seq}: {snippet_markdown(hit.snippet, hit.spans)}")
    return "\n".join(lines)


_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~&")


def _markdown_escaped(text: str) -> str:
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)


def snippet_markdown(snippet: str, spans: Sequence[tuple[int, int]]) -> str:
    """A hit's snippet (already one safe line) as Markdown text: every character that
    Markdown could read as syntax escaped, the matched spans in bold."""
    out: list[str] = []
    at = 0
    for a, b in spans:
        out.append(_markdown_escaped(snippet[at:a]))
        out.append("**" + _markdown_escaped(snippet[a:b]) + "**")
        at = b
    out.append(_markdown_escaped(snippet[at:]))
    return client_label("".join(out))

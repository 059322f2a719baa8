"""What the fuzz tests of ``core`` share (``test_fuzz_core``, ``test_fuzz_prepare``): the
example budget, hostile text, session ids, and source sessions written as hostile logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from core import (
    COMPACT_CHECKPOINT_SOURCE,
    SESSION_REFERENCE_SCHEME,
    NewEvent,
    Replace,
    assistant_message,
    reasoning_block,
    text_block,
    user_message,
)
from core.jsoncodec import utf8_len
from core.limits import MAX_TITLE_BYTES
from core.surrogates import merge_surrogate_pairs
from tests.reliability.conftest import FUZZ_EXAMPLES

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text that tries hard to break things: markup, tags, control/bidi characters, surrogates,
# JSON and SQL syntax, mention syntax, and arbitrary code points.
HOSTILE_FRAGMENTS = [
    "<",
    "</referenced-sessions>",
    "<referenced-sessions>",
    "<script>",
    "[bold]",
    "[/]",
    "[link=https://x.invalid]",
    "\x1b[31m",
    "\x00",
    "\x07",
    "\r\n",
    "\u202e",
    "\u2066",
    "\ud800",
    "\udfff",
    "\ud83d\ude00",
    "😀",
    "é",
    '"',
    "\\",
    "\\u003c",
    "'; DROP TABLE events; --",
    "@[",
    "](",
    SESSION_REFERENCE_SCHEME,
    "\u2028",
    "\ufeff",
    "…",
]
any_char = st.characters(codec=None, exclude_categories=())
# Lone surrogates stay; a pair made by the joins is its character, as every entrance makes
# it (SPEC 4.1: the merging itself is tested where it is done).
hostile_text = (
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_FRAGMENTS), st.text(any_char, max_size=8)),
        max_size=10,
    )
    .map("".join)
    .map(merge_surrogate_pairs)
)
long_hostile_text = st.one_of(
    hostile_text,
    st.tuples(hostile_text, st.integers(50, 3000), hostile_text).map(
        lambda t: t[0] + "x<é" * t[1] + t[2]
    ),
)
session_ids = st.one_of(hostile_text, st.sampled_from(["a", "b", "\ud800", "😀", "", "[b]"]))


@dataclass
class Source:
    """A generated source session and what its snapshot may and may not show."""

    session_id: str
    cwd: str | None
    events: list[NewEvent] = field(default_factory=list)
    # marker -> text of messages that may appear (if still on the surface at the end)
    markers: dict[int, str] = field(default_factory=dict)
    excluded: set[int] = field(default_factory=set)


def _marker(n: int) -> str:
    return f"⟦M{n}⟧"


def _within(text: str, limit: int) -> str:
    """The longest head of ``text`` within ``limit`` UTF-8 bytes (a title's limit, issue 30:
    stores refuse a longer one)."""
    while utf8_len(text) > limit:
        text = text[: len(text) - max(1, (utf8_len(text) - limit) // 4)]
    return text


@st.composite
def source_logs(draw: st.DrawFn, session_id: str) -> Source:
    """A random log: every message kind, log-only events, replaces and checkpoints.

    Each message text starts with a unique marker; excluded kinds (tools, plugins, earlier
    snapshots, reasoning, chunks, titles, shadowed messages) are tracked to assert absence.
    """
    src = Source(session_id, draw(st.one_of(st.none(), hostile_text)))
    surface: list[tuple[int, int | None]] = []  # (seq, marker) in node order
    counter = draw(st.integers(0, 10**6)) * 1000

    def text_for(excluded: bool) -> tuple[int, str]:
        nonlocal counter
        counter += 1
        body = _marker(counter) + draw(long_hostile_text)
        if excluded:
            src.excluded.add(counter)
        else:
            src.markers[counter] = body
        return counter, body

    for _ in range(draw(st.integers(0, 14))):
        seq = len(src.events)
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "steering",
                    "steering-plugin",
                    "tool",
                    "plugin",
                    "snapshot",
                    "checkpoint",
                    "chunk",
                    "title",
                    "other",
                    "replace",
                    "empty",
                ]
            )
        )
        if kind in ("user", "checkpoint", "plugin", "snapshot", "empty"):
            excluded = kind in ("plugin", "snapshot")
            m, body = text_for(excluded)
            source: Mapping[str, Any] = {
                "user": {"kind": "user"},
                "checkpoint": COMPACT_CHECKPOINT_SOURCE,
                "plugin": {"kind": "plugin", "plugin": "files"},
                "snapshot": {"kind": "session-reference", "version": 1, "references": []},
                "empty": {"kind": "user"},
            }[kind]
            content = [text_block("")] if kind == "empty" else [text_block(body)]
            if kind == "empty":
                src.markers.pop(m, None)
                src.excluded.add(m)
            src.events.append(
                NewEvent("user/message", user_message(content, source=source), "append")
            )
            surface.append((seq, m))
        elif kind == "assistant":
            m, body = text_for(False)
            r, reasoning = text_for(True)
            content = [
                reasoning_block(reasoning),
                {"type": "future-block", "text": _marker(r)},
                text_block(body),
            ]
            message = assistant_message(content, provider="p", model="m")
            src.events.append(
                NewEvent("assistant/message", {"turn": 1, "step": 0, "message": message}, "append")
            )
            surface.append((seq, m))
        elif kind in ("steering", "steering-plugin"):
            m, body = text_for(kind == "steering-plugin")
            source = {"kind": "user"} if kind == "steering" else {"kind": "plugin", "plugin": "x"}
            data = {"turn": 1, "message": user_message(body, source=source)}
            src.events.append(NewEvent("steering/message", data, "append"))
            surface.append((seq, m))
        elif kind == "tool":
            m, body = text_for(True)
            tool_message: dict[str, Any] = {
                "id": "t",
                "role": "user",
                "content": [text_block(body)],
                "source": {"kind": "tool", "callId": "c"},
            }
            result = {"turn": 1, "step": 0, "message": tool_message}
            src.events.append(NewEvent("tool/result", result, "append"))
            surface.append((seq, m))
        elif kind in ("chunk", "title", "other"):
            m, body = text_for(True)
            log_only: dict[str, dict[str, Any]] = {
                "chunk": {
                    "turn": 1,
                    "step": 0,
                    "chunk": {"type": "text-delta", "index": 0, "text": body},
                },
                "title": {"title": _within(body, MAX_TITLE_BYTES), "source": {"kind": "user"}},
                "other": {"message": user_message(body)},
            }
            type_ = {"chunk": "assistant/chunk", "title": "session/title", "other": "vendor/x"}[
                kind
            ]
            src.events.append(NewEvent(type_, log_only[kind]))
        elif kind == "replace" and surface:
            i = draw(st.integers(0, len(surface) - 1))
            j = draw(st.integers(i, len(surface) - 1))
            shadowed = surface[i : j + 1]
            for _, old in shadowed:
                if old is not None:
                    src.markers.pop(old, None)
                    src.excluded.add(old)
            m, body = text_for(False)
            role = draw(st.sampled_from(["user", "assistant"]))
            if role == "user":
                new = NewEvent(
                    "user/message",
                    user_message(body),
                    Replace(shadowed[0][0], shadowed[-1][0]),
                    [s for s, _ in shadowed],
                )
            else:
                new = NewEvent(
                    "assistant/message",
                    {
                        "turn": 2,
                        "step": 0,
                        "message": assistant_message(body, provider="p", model="m"),
                    },
                    Replace(shadowed[0][0], shadowed[-1][0]),
                    [s for s, _ in shadowed],
                )
            src.events.append(new)
            surface[i : j + 1] = [(seq, m)]
    return src

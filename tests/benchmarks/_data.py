"""Deterministic synthetic sessions: mixed sizes, non-ASCII, a few huge messages."""

from __future__ import annotations

import random
from typing import Any

from core.log import (
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    SESSION_TITLE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    NewEvent,
    assistant_message,
    reasoning_block,
    text_block,
    user_message,
)

_LATIN = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dogs",
    "while",
    "Zoë",
    "naïvely",
    "orders",
    "café",
    "au",
    "lait",
    "<tag>",
    "a<b",
    "&&",
    '"quoted"',
    "back\\slash",
    "tab\tnew\nline",
    "deploy",
    "kubernetes",
    "release",
    "checkout",
    "billing",
    "search",
    "relevance",
    "latency",
    "budget",
    "résumé",
    "façade",
]
_CJK = [*_LATIN[:20], "中文", "测试", "日本語", "テキスト", "한국어", "检索"]
_EMOJI = [*_LATIN[:20], "😀", "🚀", "中文", "✓"]
_PARAGRAPH = " ".join(_LATIN + _CJK[20:] + _EMOJI[20:]) + "\n"


def _text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of words: mostly Latin-1, some CJK, a few emoji."""
    if size > 50_000:
        return (_PARAGRAPH * (size // len(_PARAGRAPH) + 1))[:size]
    roll = rng.random()
    words = _LATIN if roll < 0.8 else _CJK if roll < 0.95 else _EMOJI
    picked: list[str] = []
    length = 0
    while length < size:
        word = words[rng.randrange(len(words))]
        picked.append(word)
        length += len(word) + 1
    return " ".join(picked)


def _size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.75:
        return rng.randrange(20, 300)
    if roll < 0.98:
        return rng.randrange(300, 2_000)
    return rng.randrange(2_000, 20_000)


def conversation(
    count: int, *, seed: int = 1, big_every: int = 25_000, big_size: int = 2_500_000
) -> list[NewEvent]:
    """``count`` surface events (user/assistant turns plus some noise projection drops).

    Every ``big_every``-th message (offset half a period) is ``big_size`` characters, a
    compaction checkpoint sits at a tenth of the way, a few steering messages, tool
    results and reasoning blocks are sprinkled in.
    """
    rng = random.Random(seed)
    out: list[NewEvent] = []
    turn = 0
    for i in range(count):
        size = big_size if i % big_every == big_every // 2 else _size(rng)
        text = _text(rng, size)
        if i == count // 10 and count >= 10:
            data: dict[str, Any] = user_message(
                f"<compacted-summary>\n{text}\n</compacted-summary>",
                source=COMPACT_CHECKPOINT_SOURCE,
                id=f"c{i}",
            )
            out.append(NewEvent(USER_MESSAGE, data, "append"))
        elif i % 2 == 0:
            turn += 1
            if i % 97 == 0:
                out.append(
                    NewEvent(
                        STEERING_MESSAGE,
                        {"turn": turn, "message": user_message(text, id=f"s{i}")},
                        "append",
                    )
                )
            else:
                out.append(NewEvent(USER_MESSAGE, user_message(text, id=f"u{i}"), "append"))
        elif i % 31 == 1:
            result = user_message(text, source={"kind": "tool", "callId": f"call{i}"}, id=f"t{i}")
            data = {"turn": turn, "step": 1, "message": result}
            out.append(NewEvent(TOOL_RESULT, data, "append"))
        else:
            content = [text_block(text)]
            if i % 10 == 3:
                content.insert(0, reasoning_block(_text(rng, 200)))
            message = assistant_message(content, provider="bench", model="m1", id=f"a{i}")
            data = {"turn": turn, "step": 0, "message": message, "finish": "completed"}
            out.append(NewEvent(ASSISTANT_MESSAGE, data, "append"))
    return out


def as_events(batch: list[NewEvent]) -> list[Event]:
    """The events a fresh log of ``batch`` would hold (the surface of an append-only log)."""
    return [
        Event(seq, e.type, 1_700_000_000_000 + seq, e.data, e.surface_op, None)
        for seq, e in enumerate(batch)
    ]


def title_event(text: str) -> NewEvent:
    return NewEvent(SESSION_TITLE, {"title": text, "source": {"kind": "user"}})

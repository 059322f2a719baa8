"""``dsh show`` of huge texts: linear work, nothing lost (issue 12 §7).

Rich renders a ``Text`` as one segment holding all its wrapped lines; ``Padding`` and
``Console.print`` then cut such a segment with repeated ``str.partition`` (each call copies
the rest), so a 4 MB line took half a minute and 50 MB never ended. These tests count that
copying instead of timing it: it must stay proportional to the text.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.segment import Segment

from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    user_message,
)
from stores import SqliteSessionStore
from tests.cli.conftest import Run
from tui.shared.render import MARKDOWN_MAX_CHARS, render_transcript

AT = 1_700_000_000_000
SIZE = 400_000  # enough for the old code's copying to be ~1000x the text


def huge_texts() -> dict[str, str]:
    return {
        "one line": "H" * SIZE,
        "words": ("word " * (SIZE // 5))[:SIZE],
        "short lines": ("line of text\n" * (SIZE // 13))[:SIZE],
        "wide chars": "漢" * (SIZE // 2),
    }


def events_holding(text: str) -> list[NewEvent]:
    """A user message, a reply, a steering message and a compaction checkpoint of ``text``."""
    reply = assistant_message(text, provider="offline", model="echo-1", id="a")
    checkpoint = user_message(text, source={"kind": "plugin", "plugin": "compact"}, id="c")
    return [
        NewEvent(USER_MESSAGE, user_message(text, id="u"), "append", time=AT),
        NewEvent(
            ASSISTANT_MESSAGE, {"turn": 1, "step": 0, "message": reply}, "append", time=AT + 1
        ),
        NewEvent(
            STEERING_MESSAGE, {"turn": 1, "message": user_message(text)}, "append", time=AT + 2
        ),
        NewEvent(USER_MESSAGE, checkpoint, "append", time=AT + 3),
    ]


@pytest.fixture
def partition_work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Characters Rich's line splitters would copy (``len`` × newlines per segment)."""
    work = [0]

    def counted(segments: Iterable[Segment]) -> Iterator[Segment]:
        for segment in segments:
            if not segment.control:
                work[0] += len(segment.text) * segment.text.count("\n")
            yield segment

    for name in ("split_and_crop_lines", "split_lines", "split_lines_terminator"):
        original = getattr(Segment, name)

        def patched(
            cls: type, segments: Iterable[Segment], *args: Any, _o: Any = original, **kwargs: Any
        ) -> Any:
            return _o(counted(segments), *args, **kwargs)

        monkeypatch.setattr(Segment, name, classmethod(patched))
    return work


@pytest.mark.parametrize("kind", list(huge_texts()))
async def test_rendering_a_huge_text_does_linear_work(
    tmp_path: Path, partition_work: list[int], kind: str
) -> None:
    text = huge_texts()[kind]
    assert len(text) > MARKDOWN_MAX_CHARS
    store = await SqliteSessionStore.open(tmp_path / "h.sqlite3")
    try:
        await store.create_session("s", created_at=AT)
        await store.append_batch("s", events_holding(text))
        events = await store.read_events("s")
    finally:
        await store.close()
    out = io.StringIO()
    console = Console(file=out, width=80, highlight=False, markup=False, soft_wrap=False)
    for renderable in render_transcript(events):
        console.print(renderable)
    shown = out.getvalue()
    first = text[0]
    assert shown.count(first) == 4 * text.count(first), "each of the 4 copies shown whole"
    # The old code copied ~len(text)²/(2·80) characters here (1000x the text); a line at a
    # time, each segment holds at most one newline.
    assert partition_work[0] <= 10 * len(text), partition_work[0]


def test_dsh_show_prints_a_huge_line_whole(dsh: Run, dsh_env: Path) -> None:
    text = "H" * 1_000_000 + "END"

    async def seed() -> None:
        store = await SqliteSessionStore.open(dsh_env)
        try:
            await store.create_session("huge", created_at=AT)
            await store.append_batch("huge", events_holding(text)[:1])
        finally:
            await store.close()

    asyncio.run(seed())
    result = dsh("show", "huge")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    body = "".join(line.strip() for line in lines if line.startswith("  H"))
    assert body == text
    assert sum(line.count("H") for line in lines) == 1_000_000
    assert f"  {text}" in lines  # a pipe: one whole line, never wrapped (issue 13)

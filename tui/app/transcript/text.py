"""What the transcript shows of a stored message's text: the text pulled out of a message
(reasoning, tool results, checkpoint summaries), cut for display past ``MAX_SHOWN_CHARS``,
the header and status lines of a message, and a reply's body (``reply_body``), the same
live and after a reload. Every piece of stored text is untrusted: it is escaped with
``escape_control`` and shown as ``rich.text.Text`` (or parsed as Markdown without HTML).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text

from core.display import escape_control, single_line
from core.log import ASSISTANT_MESSAGE, Event, message_text
from tui.shared.render import LiteralMarkdown
from tui.shared.times import local_minute

__all__ = [
    "MAX_SHOWN_CHARS",
    "NO_TEXT",
    "TimeFormat",
    "as_mapping",
    "checkpoint_text",
    "cut_for_display",
    "first_line",
    "format_time",
    "header_text",
    "last_assistant_text",
    "reasoning_text",
    "reply_body",
    "status_marker",
    "tool_result_text",
]

TimeFormat = Callable[[int], str]
format_time: TimeFormat = local_minute
"""Epoch milliseconds as local ``YYYY-MM-DD HH:MM`` (``tui.shared.times``, the one place)."""


def reasoning_text(message: Mapping[str, Any]) -> str:
    """The message's ``reasoning`` blocks joined by newlines."""
    return message_text(message, "reasoning")


def tool_result_text(message: Mapping[str, Any]) -> tuple[str, bool]:
    """The text of a tool-result message (top-level and nested text blocks) and its error flag."""
    content = message.get("content")
    parts: list[str] = []
    is_error = False
    for block in content if isinstance(content, (list, tuple)) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool-result":
            is_error = is_error or block.get("isError") is True
            inner = block.get("content")
            for sub in inner if isinstance(inner, (list, tuple)) else ():
                if (
                    isinstance(sub, Mapping)
                    and sub.get("type") == "text"
                    and isinstance(sub.get("text"), str)
                ):
                    parts.append(sub["text"])
    return "\n".join(parts), is_error


def checkpoint_text(stored: str) -> str:
    """The summary a compaction checkpoint holds, without its ``<compacted-summary>`` tags."""
    text = stored.strip()
    text = text.removeprefix("<compacted-summary>").removesuffix("</compacted-summary>")
    return text.strip()


def last_assistant_text(events: Sequence[Event]) -> str | None:
    """The text of the newest assistant message with text among ``events`` (or ``None``)."""
    for event in reversed(events):
        if event.type == ASSISTANT_MESSAGE:
            text = message_text(as_mapping(event.data.get("message")))
            if text:
                return text
    return None


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (stored data may be anything)."""
    return value if isinstance(value, Mapping) else {}


def first_line(text: str, limit: int = 80) -> str:
    """The first non-blank line of ``text``, on one line and at most ``limit`` long."""
    for line in text.splitlines():
        if line.strip():
            return single_line(line.strip(), limit)
    return ""


MAX_SHOWN_CHARS = 20_000
"""A stored message (or reasoning, summary, tool result, event body) longer than this is
shown cut, with a note; the log keeps it whole."""


def cut_for_display(text: str) -> str:
    """``text`` cut for display: wrapping megabytes on every layout would freeze the UI."""
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return text[:MAX_SHOWN_CHARS] + _cut_note(len(text) - MAX_SHOWN_CHARS)


def _cut_note(hidden: int) -> str:
    return f"\n\n[… {hidden:,} more characters not shown here; export the session to read it all]"


NO_TEXT = Text("(no text)", style="dim italic")
"""What a reply without text shows in place of its body."""


def reply_body(text: str) -> LiteralMarkdown | Text:
    """The body of an assistant reply, live or replayed: ``text`` cut for display
    (``cut_for_display``), escaped and laid out as literal Markdown (raw HTML stays text,
    links are never hyperlinks). Both views use it, so a reply looks the same after a reload."""
    if not text:
        return NO_TEXT
    return LiteralMarkdown(escape_control(cut_for_display(text)))


def header_text(label: str, detail: Iterable[str]) -> Text:
    """A message's header: ``label`` in bold, then the non-empty ``detail`` parts dimmed."""
    text = Text(label, style="bold")
    for part in detail:
        if part:
            text.append(" · " + part, style="dim")
    return text


def status_marker(status: str | None, error: str | None) -> Text | None:
    """The line under a reply that failed or was stopped (``None``: it completed)."""
    if error is not None or status == "error":
        text = Text("✖ Error", style="bold")
        if error:
            text.append(": " + escape_control(error))
        return text
    if status == "interrupted":
        return Text("⏸ Interrupted: the reply was stopped", style="bold")
    return None

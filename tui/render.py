"""A session's transcript as Rich renderables (used by ``dsh show``).

Every piece of untrusted text goes through ``escape_control`` and ``rich.text.Text``;
nothing stored is ever parsed as markup.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markdown_it import MarkdownIt
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.padding import Padding
from rich.segment import Segment
from rich.text import Text

from core.cards import ReferenceCard, card_summary, card_title, parse_reference_card
from core.display import escape_control, single_line
from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
    message_text,
)

__all__ = [
    "MARKDOWN_MAX_CHARS",
    "LiteralMarkdown",
    "TranscriptItem",
    "WrappedText",
    "classify_surface",
    "highlight_mentions",
    "render_card",
    "render_transcript",
]


class LiteralMarkdown(Markdown):
    """Markdown in which raw HTML (``</referenced-sessions>``, ``<script>``) stays visible text.

    Rich's parser enables HTML and then drops those tokens, which would hide hostile
    content; links are printed as text, never as terminal hyperlinks. One parser serves
    every instance (building a MarkdownIt costs ~5 ms, more than rendering a message), so
    the attributes Rich's ``__init__`` sets are set here directly (rich is pinned).
    """

    _parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")

    def __init__(self, markup: str) -> None:  # no super().__init__: it would build a parser
        self.markup = markup
        self.parsed = self._parser.parse(markup)
        self.code_theme = "monokai"
        self.justify = None
        self.style = "none"
        self.hyperlinks = False
        self.inline_code_lexer = None
        self.inline_code_theme = "monokai"


MARKDOWN_MAX_CHARS = 100_000
"""A reply longer than this is shown as plain text: Rich's Markdown costs grow faster than
the text (nested blocks, code highlighting), and no model writes Markdown this long."""


class WrappedText:
    """``text`` word-wrapped and indented, rendered one line per segment: linear in its size.

    Rich renders a ``Text`` as one segment holding every wrapped line, which ``Padding`` and
    ``Console.print`` then cut with repeated ``str.partition``: quadratic (a 4 MB line took
    half a minute, 50 MB never ended). Here each line is wrapped and rendered on its own.
    """

    __slots__ = ("indent", "text")

    def __init__(self, text: Text, indent: int = 0) -> None:
        self.text = text
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width - self.indent)
        pad = Segment(" " * self.indent) if self.indent else None
        newline = Segment.line()
        text = self.text
        style = console.get_style(text.style) if text.style else None
        for line in _wrap_lines(text, console, width):
            if pad is not None:
                yield pad
            if isinstance(line, str):
                yield Segment(line, style)
            elif style is None:
                yield from line.render(console)
            else:  # a Text without spans renders without its own style
                yield from Segment.apply_style(line.render(console), style)
            yield newline


def _wrap_lines(text: Text, console: Console, width: int) -> Iterator[Text | str]:
    """The wrapped lines of ``text`` (as ``Text.wrap`` makes them), a source line at a time:
    a line that fits is yielded as a plain ``str``, skipping Rich's wrapping machinery
    (tens of µs a line)."""
    plain = text.plain
    if text.spans or "\t" in plain:
        yield from text.wrap(console, width)
        return
    for source in plain.split("\n"):
        if (source.isascii() and len(source) <= width) or cell_len(source) <= width:
            yield source
        else:
            yield from Text(source).wrap(console, width)


@dataclass(frozen=True, slots=True)
class TranscriptItem:
    """One surface event, classified for display."""

    kind: str  # user, assistant, card, checkpoint, steering, tool, context, unknown
    event: Event
    card: ReferenceCard | None = None
    labels: tuple[str, ...] = ()  # mention labels to highlight in a user message


def classify_surface(events: Sequence[Event]) -> list[TranscriptItem]:
    items: list[TranscriptItem] = []
    labels: tuple[str, ...] = ()
    for event in events:
        data = event.data
        if event.type == USER_MESSAGE:
            source = data.get("source")
            kind = source.get("kind") if isinstance(source, Mapping) else None
            card = parse_reference_card(data)
            if card is not None:
                items.append(TranscriptItem("card", event, card))
                labels = tuple(s.label for s in card.sources)
                continue
            if is_compact_checkpoint_source(source):
                items.append(TranscriptItem("checkpoint", event))
            elif kind == "user":
                items.append(TranscriptItem("user", event, labels=labels))
            else:
                items.append(TranscriptItem("context", event))
        elif event.type == ASSISTANT_MESSAGE:
            items.append(TranscriptItem("assistant", event))
        elif event.type == STEERING_MESSAGE:
            items.append(TranscriptItem("steering", event))
        elif event.type == TOOL_RESULT:
            items.append(TranscriptItem("tool", event))
        else:
            items.append(TranscriptItem("unknown", event))
        labels = ()
    return items


def highlight_mentions(text: str, labels: Sequence[str], style: str = "bold cyan") -> Text:
    """``text`` (escaped) with each ``@label`` of ``labels`` styled."""
    safe = escape_control(text)
    result = Text(safe)
    for label in sorted(set(labels), key=len, reverse=True):
        needle = "@" + escape_control(label)
        if needle == "@":
            continue
        start = safe.find(needle)
        while start != -1:
            result.stylize(style, start, start + len(needle))
            start = safe.find(needle, start + len(needle))
    return result


def _time(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"


def render_card(
    card: ReferenceCard, *, expand: bool = False, conversation: bool = False
) -> RenderableType:
    head = Text("▸ " if not expand else "▾ ", style="bold magenta")
    head.append(single_line(card_title(card)), style="bold magenta")
    parts: list[RenderableType] = [head, Text("  " + card_summary(card), style="dim")]
    if expand:
        for source in card.sources:
            line = Text("  • ")
            line.append(single_line(source.label), style="bold")
            line.append(f"  id {single_line(source.session_id)}", style="dim")
            parts.append(line)
            details = [
                f"cwd {single_line(source.cwd) if source.cwd is not None else '(none)'}",
                f"captured through seq {source.captured_through_seq}",
                f"kept {source.retained_messages}/{source.original_messages}",
                f"omitted {source.omitted_messages} messages, {source.omitted_bytes} bytes",
                f"compacted {'yes' if source.compacted else 'no'}",
                f"truncated {'yes' if source.truncated else 'no'}",
            ]
            parts.append(Text("    " + " · ".join(details), style="dim"))
            if conversation:
                for role, text in source.conversation:
                    body = Text(f"    {role}: ", style="italic")
                    body.append(escape_control(text))
                    parts.append(WrappedText(body))
    return Group(*parts)


def _header(label: str, event: Event, style: str, extra: str = "") -> Text:
    text = Text(label, style=style)
    text.append(f" · {_time(event.time)} · #{event.seq}{extra}", style="dim")
    return text


def _assistant(event: Event) -> RenderableType:
    data: Mapping[str, Any] = event.data
    message = data.get("message")
    message = message if isinstance(message, Mapping) else {}
    source = message.get("source")
    model = source.get("model") if isinstance(source, Mapping) else None
    extra = f" · {single_line(str(model))}" if model else ""
    parts: list[RenderableType] = [_header("Assistant", event, "bold green", extra)]
    body = message_text(message)
    if len(body) > MARKDOWN_MAX_CHARS:
        parts.append(WrappedText(Text(escape_control(body)), 2))
    elif body:
        parts.append(Padding(LiteralMarkdown(escape_control(body)), (0, 0, 0, 2)))
    finish = data.get("finish")
    if finish == "interrupted" or data.get("interrupted") is True:
        parts.append(Text("  [interrupted: the reply was stopped]", style="yellow"))
    error = data.get("error")
    if isinstance(error, Mapping):
        parts.append(
            Text("  [error: " + single_line(str(error.get("message", ""))) + "]", style="red")
        )
    return Group(*parts)


def render_item(item: TranscriptItem, *, expand_cards: bool = False) -> RenderableType:
    event = item.event
    data = event.data
    if item.kind == "card":
        assert item.card is not None
        return render_card(item.card, expand=expand_cards, conversation=expand_cards)
    if item.kind == "user":
        body = highlight_mentions(message_text(data), item.labels)
        return Group(_header("You", event, "bold blue"), WrappedText(body, 2))
    if item.kind == "assistant":
        return _assistant(event)
    if item.kind == "checkpoint":
        return Group(
            _header("▸ Compacted summary", event, "bold yellow"),
            WrappedText(Text(escape_control(message_text(data)), style="dim"), 2),
        )
    if item.kind == "steering":
        message = data.get("message")
        text = message_text(message) if isinstance(message, Mapping) else ""
        return Group(
            _header("You (steering)", event, "bold blue"),
            WrappedText(Text(escape_control(text)), 2),
        )
    if item.kind == "tool":
        message = data.get("message")
        source = message.get("source") if isinstance(message, Mapping) else None
        call = source.get("callId") if isinstance(source, Mapping) else None
        return _header(
            f"▸ Tool result {single_line(str(call)) if call else ''}".rstrip(), event, "bold"
        )
    if item.kind == "context":
        source = data.get("source")
        who = "?"
        if isinstance(source, Mapping):
            who = str(source.get("plugin") or source.get("kind") or "?")
        return _header(f"▸ Context from {single_line(who)}", event, "bold")
    return _header(f"▸ {single_line(event.type)} event", event, "bold")


def render_transcript(
    events: Sequence[Event], *, expand_cards: bool = False
) -> list[RenderableType]:
    out: list[RenderableType] = []
    for item in classify_surface(events):
        out.append(render_item(item, expand_cards=expand_cards))
        out.append(Text(""))
    return out

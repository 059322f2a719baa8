"""A session's transcript as Rich renderables (used by ``dsh show``).

Every piece of untrusted text goes through ``escape_control`` and ``rich.text.Text``;
nothing stored is ever parsed as markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from markdown_it import MarkdownIt
from rich.cells import cell_len
from rich.console import (
    Console,
    ConsoleOptions,
    Group,
    JustifyMethod,
    RenderableType,
    RenderResult,
)
from rich.markdown import Heading, Markdown, MarkdownElement, UnknownElement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from core.cards import ReferenceCard, card_summary, card_title
from core.display import escape_control, single_line
from core.log import (
    Event,
    message_text,
)
from tui.shared.items import TranscriptItem, event_preview, iter_classified
from tui.shared.logevents import log_event_line
from tui.shared.theme import THEME
from tui.shared.times import local_minute

__all__ = [
    "MARKDOWN_MAX_CHARS",
    "THEME",
    "UNWRAPPED_WIDTH",
    "GrowingMarkdown",
    "Indented",
    "LiteralMarkdown",
    "WrappedText",
    "highlight_mentions",
    "iter_render_transcript",
    "plain_lines",
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


_NOT_ELEMENTS = frozenset(("text", "hardbreak", "softbreak", "link_open", "link_close"))


def _new_line_flags(markdown: LiteralMarkdown) -> tuple[bool | None, bool]:
    """How Rich's ``Markdown.__rich_console__`` (rich is pinned) separates ``markdown``'s
    blocks from what precedes them: it writes a blank line before a top-level element when
    the element closed last asked for one (``MarkdownElement.new_line``; a rule does not).

    Returns the flag in force when the first top-level element is drawn (``None``: the one
    the text before left, its first element closes nothing nested) and the flag it leaves.
    """
    first: bool | None = None
    decided = closed = False
    flag = False
    for token in markdown._flatten_tokens(markdown.parsed):
        kind = token.type
        if kind in _NOT_ELEMENTS or kind == "html_inline" or token.nesting == 1:
            continue
        if token.tag in markdown.inlines and kind not in ("fence", "code_block"):
            continue
        if not decided and token.level == 0:
            first = flag if closed else None
            decided = True
        opening = kind.removesuffix("_close") + "_open" if token.nesting == -1 else kind
        flag = markdown.elements.get(opening, UnknownElement).new_line
        closed = True
    return first, flag


class _Block:
    """Finished top-level blocks of a ``GrowingMarkdown``, rendered once per width."""

    __slots__ = ("first", "lines", "markdown", "new_line", "width")

    def __init__(self, source: str) -> None:
        self.markdown = LiteralMarkdown(source)
        self.first, self.new_line = _new_line_flags(self.markdown)
        self.width = -1
        self.lines: list[list[Segment]] = []

    def render(self, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        if options.max_width != self.width:
            self.lines = list(Segment.split_lines(console.render(self.markdown, options)))
            self.width = options.max_width
        return self.lines


_NOT_A_NEW_BLOCK = frozenset(" \t-+*>[0123456789")
"""First characters of a line after a blank line that may still belong to the block before
it (list items, quotes, indented continuations) or change it (reference definitions)."""


def _block_starts(source: str, start: int) -> Iterator[int]:
    """Offsets in ``source`` from ``start`` (a block boundary) where a new top-level block
    starts that nothing after it can join to the blocks before it: a line after a blank
    line, outside a code fence, whose first character cannot continue a list or a quote."""
    fence = ""
    blank = False
    pos = start
    end = len(source)
    while pos < end:
        nl = source.find("\n", pos)
        line_end = end if nl == -1 else nl
        line = source[pos:line_end]
        if not fence and blank and line and line[0] not in _NOT_A_NEW_BLOCK:
            yield pos
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if fence:
            if indent < 4 and stripped.startswith(fence) and not stripped.strip(fence[0]).strip():
                fence = ""
        elif indent < 4 and stripped[:3] in ("```", "~~~"):
            run = len(stripped) - len(stripped.lstrip(stripped[0]))
            if stripped[0] != "`" or "`" not in stripped[run:]:
                fence = stripped[0] * run
        blank = not line.strip()
        if nl == -1:
            break
        pos = nl + 1


_REFERENCE_DEFINITION = re.compile(r"^[ \t>*+\-0-9.)]*\[[^\]\n]*\]:", re.MULTILINE)
"""What may be a link reference definition (``[name]: url``), in a container or not: it
changes links anywhere in the text, before it too."""


class GrowingMarkdown:
    """``LiteralMarkdown`` of a text that only grows (a streaming reply), laid out line for
    line as ``LiteralMarkdown`` of the whole text, at the cost of its newest blocks only.

    Parsing and laying out a reply of 20,000 characters takes ~200 ms: doing it on every
    flush of a stream froze the UI. Finished top-level blocks are parsed once and their
    lines kept per width; only the text after the last safe boundary (``_block_starts``)
    is parsed and laid out again. Rich renders top-level blocks independently (apart from
    the blank lines ``_new_line_flags`` accounts for), so the joined lines are those of
    the whole. A text that may define link references is parsed whole every time.
    """

    __slots__ = ("_blocks", "_source", "_stable", "_tail", "_tail_first", "_whole")

    def __init__(self, source: str = "") -> None:
        self._blocks: list[_Block] = []
        self._stable = 0  # characters of the source held by self._blocks
        self._source = ""
        self._tail: LiteralMarkdown | None = None
        self._tail_first: bool | None = None
        self._whole = False  # parse the whole text every time (link references)
        self.update(source)

    @property
    def source(self) -> str:
        return self._source

    @property
    def settled_chars(self) -> int:
        """Characters of the source in finished blocks (parsed and laid out once)."""
        return self._stable

    def update(self, source: str) -> None:
        """Show ``source``, which starts with the previous source (a stream only grows)."""
        if not source.startswith(self._source):
            self._blocks.clear()
            self._stable = 0
            self._whole = False
        self._source = source
        if not self._whole and _REFERENCE_DEFINITION.search(source, self._stable):
            self._whole = True
            self._blocks.clear()
            self._stable = 0
        cut = self._stable
        if not self._whole:
            cut = max(_block_starts(source, self._stable), default=self._stable)
        if cut > self._stable:
            self._blocks.append(_Block(source[self._stable : cut]))
            self._stable = cut
        tail = source[self._stable :]
        self._tail = LiteralMarkdown(tail) if tail.strip() else None
        if self._tail is not None:
            self._tail_first = _new_line_flags(self._tail)[0]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        newline = Segment.line()
        options = options.update(height=None)
        new_line = False  # Rich's flag between blocks (see _new_line_flags)
        for block in self._blocks:
            if new_line and block.first is None:
                yield newline
            for line in block.render(console, options):
                yield from line
                yield newline
            new_line = block.new_line
        if self._tail is not None:
            if new_line and self._tail_first is None:
                yield newline
            yield from console.render(self._tail, options)


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
            line = line.rstrip() if isinstance(line, str) else _rstripped(line)
            if isinstance(line, str):
                yield Segment(line, style)
            elif style is None:
                yield from line.render(console)
            else:  # a Text without spans renders without its own style
                yield from Segment.apply_style(line.render(console), style)
            yield newline


def _rstripped(line: Text) -> Text:
    """The wrapped line without the spaces ``Text.wrap`` leaves at its end."""
    line.rstrip()
    return line


class Indented:
    """``renderable`` drawn ``indent`` cells right, every line (continuations included);
    unlike ``Padding`` it neither pads lines to the width nor cuts longer ones."""

    __slots__ = ("indent", "renderable")

    def __init__(self, renderable: RenderableType, indent: int) -> None:
        self.renderable = renderable
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = options.update_width(max(1, options.max_width - self.indent))
        pad = Segment(" " * self.indent)
        newline = Segment.line()
        for line in Segment.split_lines(console.render(self.renderable, inner)):
            yield pad
            yield from line
            yield newline


class _LeftHeading(Heading):
    """A heading at the left margin: centred at an unwrapped layout's width it would land
    far to the right."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(Heading.LEVEL_ALIGN, "left")


class _UnwrappedMarkdown(LiteralMarkdown):
    """``LiteralMarkdown`` for a pipe: every heading at the left margin."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **LiteralMarkdown.elements,
        "heading_open": _LeftHeading,
    }


class _AtWidth:
    """``renderable`` laid out at ``width`` cells whatever the room (an unwrapped transcript
    gives each Markdown reply just the width its longest paragraph needs)."""

    __slots__ = ("renderable", "width")

    def __init__(self, renderable: RenderableType, width: int) -> None:
        self.renderable = renderable
        self.width = width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from console.render(self.renderable, options.update_width(self.width))


UNWRAPPED_WIDTH = 1 << 30
"""The width an unwrapped transcript (``dsh show`` into a pipe) is laid out at: no line is
ever wrapped. Only plain text is laid out at it; Markdown gets its own width (below)."""

_UNWRAPPED_MARKDOWN_MAX = 4000
"""Rich pads Markdown lines (list items, code) to the layout width: an unwrapped reply
whose longest paragraph needs more than this is shown as plain text instead."""


def plain_lines(console: Console, renderable: RenderableType, width: int) -> Iterator[str]:
    """``renderable`` laid out at ``width`` as plain lines without trailing spaces (for a
    pipe or a file: no styles, no padding)."""
    options = console.options.update_width(width)
    for line in Segment.split_lines(console.render(renderable, options)):
        yield "".join(segment.text for segment in line if not segment.control).rstrip()


def _markdown_width(text: str) -> int:
    """Cells that lay out every paragraph of ``text`` on one line (Markdown joins a
    paragraph's lines), with room for list and quote indents."""
    longest = max((cell_len(block) for block in text.split("\n\n")), default=0)
    return max(80, longest + 40)


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


def highlight_mentions(
    text: str, labels: Sequence[str], style: str | Style = "dsh.mention"
) -> Text:
    """``text`` (escaped) with each ``@label`` of ``labels`` styled (by default with the
    theme's ``dsh.mention``: ``THEME`` for ``dsh show``; the app passes its own)."""
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


def render_card(
    card: ReferenceCard, *, expand: bool = False, conversation: bool = False
) -> RenderableType:
    head = Text("▸ " if not expand else "▾ ", style="dsh.card")
    head.append(single_line(card_title(card)), style="dsh.card")
    parts: list[RenderableType] = [head, WrappedText(Text(card_summary(card), style="dim"), 2)]
    if expand:
        for source in card.sources:
            line = Text("• ")
            line.append(single_line(source.label), style="bold")
            line.append(f"  id {single_line(source.session_id)}", style="dim")
            parts.append(WrappedText(line, 2))
            details = [
                f"cwd {single_line(source.cwd) if source.cwd is not None else '(none)'}",
                f"captured through seq {source.captured_through_seq}",
                f"kept {source.retained_messages}/{source.original_messages}",
                f"omitted {source.omitted_messages} messages, {source.omitted_bytes} bytes",
                f"compacted {'yes' if source.compacted else 'no'}",
                f"truncated {'yes' if source.truncated else 'no'}",
            ]
            parts.append(WrappedText(Text(" · ".join(details), style="dim"), 4))
            if conversation:
                for role, text in source.conversation:
                    body = Text(f"{role}: ", style="italic")
                    body.append(escape_control(text))
                    parts.append(WrappedText(body, 4))
    return Group(*parts)


def _header(label: str, event: Event, style: str, extra: str = "") -> Text:
    text = Text(label, style=style)
    text.append(f" · {local_minute(event.time)} · #{event.seq}{extra}", style="dim")
    return text


def _assistant(event: Event, *, wrap: bool = True) -> RenderableType:
    data: Mapping[str, Any] = event.data
    message = data.get("message")
    message = message if isinstance(message, Mapping) else {}
    source = message.get("source")
    model = source.get("model") if isinstance(source, Mapping) else None
    extra = f" · {single_line(str(model))}" if model else ""
    parts: list[RenderableType] = [_header("Assistant", event, "dsh.assistant", extra)]
    body = message_text(message)
    width = 0 if wrap else _markdown_width(body)
    if len(body) > MARKDOWN_MAX_CHARS or width > _UNWRAPPED_MARKDOWN_MAX:
        parts.append(WrappedText(Text(escape_control(body)), 2))
    elif body:
        markdown = (LiteralMarkdown if wrap else _UnwrappedMarkdown)(escape_control(body))
        parts.append(Indented(markdown if wrap else _AtWidth(markdown, width), 2))
    finish = data.get("finish")
    if finish == "interrupted" or data.get("interrupted") is True:
        parts.append(Text("  [interrupted: the reply was stopped]", style="dsh.interrupted"))
    error = data.get("error")
    if isinstance(error, Mapping):
        parts.append(
            Text("  [error: " + single_line(str(error.get("message", ""))) + "]", style="dsh.error")
        )
    return Group(*parts)


def render_item(
    item: TranscriptItem, *, expand_cards: bool = False, wrap: bool = True
) -> RenderableType:
    event = item.event
    data = event.data
    if item.kind == "card":
        assert item.card is not None
        return render_card(item.card, expand=expand_cards, conversation=expand_cards)
    if item.kind == "user":
        body = highlight_mentions(message_text(data), item.labels)
        return Group(_header("You", event, "dsh.user"), WrappedText(body, 2))
    if item.kind == "assistant":
        return _assistant(event, wrap=wrap)
    if item.kind == "checkpoint":
        return Group(
            _header("▸ Compacted summary", event, "dsh.checkpoint"),
            WrappedText(Text(escape_control(message_text(data)), style="dim"), 2),
        )
    if item.kind == "steering":
        message = data.get("message")
        text = message_text(message) if isinstance(message, Mapping) else ""
        return Group(
            _header("You (steering)", event, "dsh.user"),
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
    line = log_event_line(event)
    if line is not None:  # a profile switch, a fork's origin: one line says it
        return _header(f"▸ {line}", event, "dim")
    # An event of a type dsh does not know: its type and a one-line JSON preview.
    return Group(
        _header(f"▸ {single_line(event.type, 80)} event", event, "bold"),
        WrappedText(Text(event_preview(event), style="dim"), 2),
    )


def render_transcript(
    events: Sequence[Event], *, expand_cards: bool = False, wrap: bool = True
) -> list[RenderableType]:
    """The transcript's renderables; ``wrap=False`` for a layout at ``UNWRAPPED_WIDTH``
    with ``plain_lines`` (a pipe: no line is wrapped)."""
    return list(iter_render_transcript(events, expand_cards=expand_cards, wrap=wrap))


def iter_render_transcript(
    events: Iterable[Event], *, expand_cards: bool = False, wrap: bool = True
) -> Iterator[RenderableType]:
    """``render_transcript`` one item at a time (``dsh show`` prints as it reads)."""
    for item in iter_classified(events):
        yield render_item(item, expand_cards=expand_cards, wrap=wrap)
        yield Text("")

"""Collapsible transcript items: reference cards, compaction checkpoints and generic folds.

Every card is built only from what is stored in the target session's log (the snapshot
message, the checkpoint text); nothing here ever reads another session. All untrusted
text (labels, ids, cwds, message bodies) is escaped with ``escape_control`` and shown as
``rich.text.Text``; it is never parsed as markup. Bodies are mounted on first expand only.
A reference card only *asks* to open a source (``ReferenceCard.OpenRequested``): the app
checks that the session is still there and readable, and switches to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Button, Static

from core.cards import CardSource, card_summary, card_title, openable_sources
from core.cards import ReferenceCard as CardData
from core.display import escape_control, single_line

__all__ = [
    "CheckpointCard",
    "CollapsedItem",
    "Foldable",
    "ReferenceCard",
    "conversation_text",
    "source_details",
    "source_name",
]

LIMIT = 300
"""Labels, ids and cwds longer than this are cut with an ellipsis (a multi-megabyte
title would otherwise be wrapped on every layout)."""

COLLAPSED_ICON = "▸ "
EXPANDED_ICON = "▾ "
SHOW_CONVERSATION = "Show what the model received"
HIDE_CONVERSATION = "Hide what the model received"
OPEN_SESSION = "Open session"
"""The label of each source's button, and of the card's ``o`` key in the footer."""


def _plain(text: Text | str) -> Text:
    return text if isinstance(text, Text) else Text(text)


class Foldable(Widget, can_focus=True):
    """A focusable item: a header line (and an optional summary line) over a hidden body.

    Enter/space or a click on the header toggles it. The body is built by ``build_body``
    the first time the item is expanded, so collapsed items cost two small widgets. Other
    printable keys are not the card's: it posts ``TypedAhead`` so they reach the composer.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_fold", "Expand/collapse"),
        Binding("space", "toggle_fold", "Expand/collapse", show=False),
    ]

    expanded: reactive[bool] = reactive(False, init=False)

    class Toggled(Message):
        """The item was expanded or collapsed (by the user or by code)."""

        def __init__(self, item: Foldable, expanded: bool) -> None:
            super().__init__()
            self.item = item
            self.expanded = expanded

        @property
        def control(self) -> Foldable:
            return self.item

    class TypedAhead(Message):
        """A printable key the item has no use for: it belongs to the composer."""

        def __init__(self, item: Foldable, key: str, character: str) -> None:
            super().__init__()
            self.item = item
            self.key = key
            self.character = character

        @property
        def control(self) -> Foldable:
            return self.item

    def __init__(
        self,
        *,
        expanded: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._header = Static(classes="fold-header", markup=False)
        summary = self.summary_text()
        self._summary = (
            None if summary is None else Static(summary, classes="fold-summary", markup=False)
        )
        self._body: Vertical | None = None
        self._refresh_header()
        if expanded:
            self.set_reactive(Foldable.expanded, True)

    # -- what subclasses provide -------------------------------------------------------

    def title_text(self) -> Text:
        """The header line (already safe), without the expand icon."""
        return Text("Details")

    def summary_text(self) -> Text | None:
        """An optional second line shown while collapsed and expanded."""
        return None

    def build_body(self) -> Iterable[Widget]:
        """The widgets of the body; called once, on first expand."""
        return ()

    # -- behaviour ---------------------------------------------------------------------

    @property
    def body(self) -> Vertical | None:
        """The body container, or ``None`` until the item was first expanded."""
        return self._body

    def compose(self) -> ComposeResult:
        yield self._header
        if self._summary is not None:
            yield self._summary
        if self.expanded:
            self._body = Vertical(*self.build_body(), classes="fold-body")
            yield self._body

    def _refresh_header(self) -> None:
        icon = EXPANDED_ICON if self.expanded else COLLAPSED_ICON
        header = Text(icon, style="bold")
        header.append_text(self.title_text())
        self._header.update(header)

    def action_toggle_fold(self) -> None:
        self.expanded = not self.expanded

    def watch_expanded(self, expanded: bool) -> None:
        if expanded and self._body is None:
            self._body = Vertical(*self.build_body(), classes="fold-body")
            self.mount(self._body)
        elif self._body is not None:
            self._body.display = expanded
        self.set_class(expanded, "-expanded")
        self._refresh_header()
        self.post_message(self.Toggled(self, expanded))

    def on_key(self, event: events.Key) -> None:
        if (
            event.is_printable
            and event.character
            and event.key not in self._bindings.key_to_bindings
        ):
            event.stop()
            event.prevent_default()
            self.post_message(self.TypedAhead(self, event.key, event.character))

    def on_click(self, event: events.Click) -> None:
        if event.widget in (self, self._header, self._summary):
            event.stop()
            self.focus()
            self.action_toggle_fold()


class CollapsedItem(Foldable):
    """A generic one-line item (tool result, context message, unknown event) that expands
    to its text."""

    def __init__(
        self,
        title: str,
        body: str,
        *,
        summary: str | None = None,
        expanded: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        self._title = single_line(title, LIMIT)
        self._summary_line = None if summary is None else single_line(summary, LIMIT)
        self._body_text = body
        self._body_static: Static | None = None
        super().__init__(expanded=expanded, id=id, classes=classes)

    def title_text(self) -> Text:
        return Text(self._title)

    def summary_text(self) -> Text | None:
        return None if self._summary_line is None else Text(self._summary_line)

    @property
    def body_text(self) -> str:
        return self._body_text

    def build_body(self) -> Iterable[Widget]:
        self._body_static = Static(self._safe_body(), classes="fold-text", markup=False)
        yield self._body_static

    def _safe_body(self) -> Text:
        return Text(escape_control(self._body_text) if self._body_text else "(empty)")

    def set_title(self, title: str) -> None:
        self._title = single_line(title, LIMIT)
        self._refresh_header()

    def set_body(self, body: str) -> None:
        """Replace the body text (used for live reasoning while a reply streams)."""
        self._body_text = body
        if self._body_static is not None:
            self._body_static.update(self._safe_body())


class CheckpointCard(CollapsedItem):
    """A compaction checkpoint: "Compacted summary", expanding to the summary text.

    Collapsed, the summary's first line shows under the header; expanded, the whole text
    shows instead (that line is hidden by the stylesheet, so it is not read twice).
    """

    def __init__(
        self,
        summary: str,
        *,
        detail: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__("Compacted summary", summary, summary=detail, id=id, classes=classes)


def source_details(source: CardSource) -> Text:
    """Every stored statistic of one referenced session, as safe text."""
    out = Text()
    out.append("• ", style="bold")
    out.append(single_line(source.label, LIMIT) or "(no label)", style="bold")
    rows = [
        ("id", single_line(source.session_id, LIMIT)),
        ("cwd", single_line(source.cwd, LIMIT) if source.cwd is not None else "no cwd"),
        (
            "captured through",
            f"seq {source.captured_through_seq}"
            if source.captured_through_seq is not None
            else "an empty log",
        ),
        (
            "messages",
            f"{source.retained_messages} kept of {source.original_messages}"
            f" · {source.omitted_messages} omitted",
        ),
        ("omitted bytes", str(source.omitted_bytes)),
        ("compacted", "yes" if source.compacted else "no"),
        ("truncated", "yes" if source.truncated else "no"),
    ]
    for name, value in rows:
        out.append("\n  ")
        out.append(f"{name}: ", style="dim")
        out.append(value)
    return out


def source_name(source: CardSource, limit: int = 60) -> str:
    """A source named in one safe line (the palette, a notice): its label, then its id in
    parentheses when the two differ; the id alone when there is no label."""
    label = source.label or source.session_id
    name = single_line(label, limit) or "(no label)"
    if source.session_id and label != source.session_id:
        name += f" ({single_line(source.session_id, 40)})"
    return name


def conversation_text(source: CardSource) -> Text:
    """The source's conversation exactly as the model received it: ``role: text`` lines."""
    out = Text()
    if not source.conversation:
        out.append("(no messages)", style="dim")
        return out
    for i, (role, text) in enumerate(source.conversation):
        if i:
            out.append("\n")
        out.append(f"{single_line(role, 40)}: ", style="bold")
        out.append(escape_control(text))
    return out


class ReferenceCard(Foldable):
    """The stored snapshot of referenced sessions, built only from the snapshot message.

    Collapsed: "Referenced sessions · labels" and a one-line summary. Expanded: the stored
    statistics of every source, each with an "Open session" button, and a toggle (button,
    or ``v``) that shows the conversation exactly as the model received it. ``o`` opens a
    source from the focused card, expanded or not (the app asks which when there are
    several); it is dimmed when the card names no session.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "toggle_conversation", "Model input"),
        Binding("o", "open_source", OPEN_SESSION),
    ]

    conversation_shown: reactive[bool] = reactive(False, init=False)

    class OpenRequested(Message):
        """The user wants to open a source: ``sources`` holds the one they chose (a source's
        button), or every source the card can open (``o``: one, or several to choose from)."""

        def __init__(self, card: ReferenceCard, sources: tuple[CardSource, ...]) -> None:
            super().__init__()
            self.card = card
            self.sources = sources

        @property
        def control(self) -> ReferenceCard:
            return self.card

    def __init__(
        self,
        card: CardData,
        *,
        expanded: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        self.card = card
        self.openable = openable_sources(card)
        """The sources that name a session, each once: what "Open session" offers."""
        self._conversation: Vertical | None = None
        self._toggle_button: Button | None = None
        self._open_buttons: dict[Button, CardSource] = {}
        super().__init__(expanded=expanded, id=id, classes=classes)

    def title_text(self) -> Text:
        return Text(single_line(card_title(self.card), 2 * LIMIT))

    def summary_text(self) -> Text | None:
        return Text(card_summary(self.card))

    def build_body(self) -> Iterable[Widget]:
        for source in self.card.sources:
            parts: list[Widget] = [
                Static(source_details(source), classes="card-source", markup=False)
            ]
            if any(source is s for s in self.openable):  # (a repeated id: its first only)
                button = Button(OPEN_SESSION, classes="card-open-source", compact=True)
                self._open_buttons[button] = source
                parts.append(button)
            yield Vertical(*parts, classes="card-source-box")
        if not self.card.sources:
            none = Static(Text("(no source details were stored)"), classes="card-source")
            yield Vertical(none, classes="card-source-box")
        self._toggle_button = Button(
            SHOW_CONVERSATION, classes="card-conversation-toggle", compact=True
        )
        yield self._toggle_button

    def _build_conversation(self) -> Vertical:
        parts: list[Widget] = []
        for source in self.card.sources:
            heading = Text(single_line(source.label, LIMIT) or "(no label)", style="bold")
            parts.append(Static(heading, classes="card-conversation-heading", markup=False))
            parts.append(
                Static(conversation_text(source), classes="card-conversation", markup=False)
            )
        return Vertical(*parts, classes="card-conversation-body")

    def action_toggle_conversation(self) -> None:
        if not self.expanded:
            self.expanded = True
        self.conversation_shown = not self.conversation_shown

    def watch_conversation_shown(self, shown: bool) -> None:
        body = self.body
        if shown and self._conversation is None and body is not None:
            self._conversation = self._build_conversation()
            body.mount(self._conversation)
        elif self._conversation is not None:
            self._conversation.display = shown
        if self._toggle_button is not None:
            self._toggle_button.label = HIDE_CONVERSATION if shown else SHOW_CONVERSATION

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_source" and not self.openable:
            return None  # a damaged card that names no session: shown dimmed
        return super().check_action(action, parameters)

    def action_open_source(self) -> None:
        """``o``: open the source whose button has focus, else any of the card's."""
        focused = self.screen.focused
        chosen = self._open_buttons.get(focused) if isinstance(focused, Button) else None
        sources = (chosen,) if chosen is not None else self.openable
        if sources:
            self.post_message(self.OpenRequested(self, sources))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._toggle_button:
            event.stop()
            self.action_toggle_conversation()
        elif (source := self._open_buttons.get(event.button)) is not None:
            event.stop()
            self.post_message(self.OpenRequested(self, (source,)))

    @property
    def conversation_widget(self) -> Vertical | None:
        """The mounted conversation, or ``None`` until it was first shown."""
        return self._conversation

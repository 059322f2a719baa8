"""The transcript's stored messages: a user's (or steering) message, an assistant's reply as
stored (header, folded reasoning, Markdown body, status marker), and the newcomer's guide an
empty session shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widgets import Static

from core.display import single_line
from core.log import Event, message_text
from tui.app.transcript.cards import CollapsedItem
from tui.app.transcript.navigation import MESSAGE_BINDINGS, MessageItem
from tui.app.transcript.text import (
    TimeFormat,
    as_mapping,
    cut_for_display,
    header_text,
    reasoning_text,
    reply_body,
    status_marker,
)
from tui.shared.render import highlight_mentions

__all__ = [
    "EMPTY_STATE_TEXT",
    "EMPTY_STATE_TITLE",
    "AssistantMessage",
    "EmptyState",
    "UserMessage",
]

EMPTY_STATE_TITLE = "Start a conversation"
EMPTY_STATE_TEXT = (
    "Type a message below and press Enter to send it.\n"
    "Type @ to reference another session: a read-only snapshot of that session is attached "
    "to your message as background for the model.\n"
    "\n"
    "Ctrl+N starts a new session · Ctrl+P opens the command palette."
)


class UserMessage(MessageItem, Static, can_focus=True):
    """A direct user message (or steering message): readable text, ``@label`` mentions styled
    by the component class ``user-message--mention`` (theme colours, in the stylesheet)."""

    BINDINGS: ClassVar[list[BindingType]] = MESSAGE_BINDINGS

    COMPONENT_CLASSES: ClassVar[set[str]] = {"user-message--mention"}

    def __init__(
        self,
        text: str,
        *,
        labels: Sequence[str] = (),
        title: str = "You",
        time: str = "",
        classes: str | None = None,
    ) -> None:
        self.text = text
        self._labels = tuple(labels)
        self._title = title
        self._time = time
        self._drawn: tuple[Style, Text] | None = None
        super().__init__(markup=False, classes=classes)

    def render(self) -> Text:
        # The mention style comes from the theme (the component class's CSS), so the text
        # is built when drawn, and again only when the theme changes the style.
        style = self.get_component_rich_style("user-message--mention", partial=True)
        if self._drawn is None or self._drawn[0] != style:
            body = header_text(self._title, [self._time])
            body.append("\n")
            body.append_text(highlight_mentions(cut_for_display(self.text), self._labels, style))
            self._drawn = (style, body)
        return self._drawn[1]


class EmptyState(Static):
    """What a newcomer sees in an empty session."""

    def __init__(self) -> None:
        text = Text(EMPTY_STATE_TITLE + "\n\n", style="bold")
        text.append(EMPTY_STATE_TEXT)
        super().__init__(text, id="transcript-empty", markup=False)


class AssistantMessage(MessageItem, Vertical, can_focus=True):
    """A stored assistant message: header, collapsed reasoning, Markdown body, status marker."""

    BINDINGS: ClassVar[list[BindingType]] = MESSAGE_BINDINGS

    def __init__(
        self,
        text: str,
        *,
        reasoning: str = "",
        model: str | None = None,
        time: str = "",
        status: str | None = None,
        error: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(classes=classes)
        self.text = text
        self.reasoning = reasoning
        self.status = status
        self.error = error
        self._header = Static(
            header_text("Assistant", [single_line(model, 60) if model else "", time]),
            classes="message-header",
            markup=False,
        )
        self._body = Static(
            reply_body(text), classes="message-body-static" if text else "message-empty"
        )
        marker = status_marker(status, error)
        self._marker = (
            None
            if marker is None
            else Static(
                marker,
                markup=False,
                classes="message-marker "
                + ("-error" if error or status == "error" else "-interrupted"),
            )
        )

    @classmethod
    def from_event(cls, event: Event, *, time_format: TimeFormat | None = None) -> AssistantMessage:
        data = event.data
        message = as_mapping(data.get("message"))
        source = as_mapping(message.get("source"))
        model = source.get("model")
        finish = data.get("finish")
        status = finish if isinstance(finish, str) else None
        if data.get("interrupted") is True and status is None:
            status = "interrupted"
        error_data = data.get("error")
        error: str | None = None
        if isinstance(error_data, Mapping):
            error = str(error_data.get("message") or error_data.get("kind") or "")
        elif error_data is not None:
            error = str(error_data)
        return cls(
            message_text(message),
            reasoning=reasoning_text(message),
            model=model if isinstance(model, str) else None,
            time=time_format(event.time) if time_format is not None else "",
            status=status,
            error=error,
        )

    def compose(self) -> ComposeResult:
        yield self._header
        if self.reasoning:
            yield CollapsedItem("Reasoning", cut_for_display(self.reasoning), classes="reasoning")
        yield self._body
        if self._marker is not None:
            yield self._marker

"""Keyboard focus in the transcript: messages are focusable items, Up/Down walk the items.

A focused message offers the conversation controls (``r`` retry, ``e`` edit and resend,
``f`` fork here). They are the app's actions (``app.…``): whether one can run now (the
app busy, a read-only database, a message that is not the user's own) is the app's to
say, and the footer shows it dimmed when not. Any other printable key typed on a message
is for the composer (``TypedAhead``), as on a card. Up/Down move between the items while
one is focused; on the transcript itself they scroll, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget

__all__ = ["CONTROL_KEY_HELP", "ITEM_BINDINGS", "MESSAGE_BINDINGS", "ItemNavigation", "MessageItem"]

CONTROL_KEY_HELP = (
    "r / e / f",
    "on a message: retry the reply, edit and resend, fork",
)
"""The keys of a focused message (``MESSAGE_BINDINGS``), as the help screen lists them."""

MESSAGE_BINDINGS: list[BindingType] = [
    Binding("r", "app.retry_reply", "Retry"),
    Binding("e", "app.edit_message", "Edit"),
    Binding("f", "app.fork_session", "Fork"),
]
"""A focused message's keys (each message class lists them as its ``BINDINGS``: Textual
merges bindings along a widget's own bases only, and ``Static``/``Vertical`` start afresh)."""

ITEM_BINDINGS: list[BindingType] = [
    Binding("up", "item_up", "Previous", show=False),
    Binding("down", "item_down", "Next", show=False),
]
"""The transcript's Up/Down (they replace its scrolling keys; see ``ItemNavigation``)."""

if TYPE_CHECKING:
    _WidgetBase = Widget
else:  # a plain mixin: Textual takes CSS and bindings from DOMNode bases only
    _WidgetBase = object


class MessageItem(_WidgetBase):
    """For a transcript message (mixed in before its widget class, which sets
    ``can_focus=True`` and ``BINDINGS = MESSAGE_BINDINGS``): a printable key it has no
    binding for is posted as ``TypedAhead`` for the composer."""

    class TypedAhead(Message):
        """A printable key the message has no use for: it belongs to the composer."""

        def __init__(self, item: Widget, key: str, character: str) -> None:
            super().__init__()
            self.item = item
            self.key = key
            self.character = character

        @property
        def control(self) -> Widget:
            return self.item

    def on_key(self, event: events.Key) -> None:
        if (
            self.has_focus
            and event.is_printable
            and event.character
            and event.key not in self._bindings.key_to_bindings
        ):
            event.stop()
            event.prevent_default()
            self.post_message(MessageItem.TypedAhead(self, event.key, event.character))


class ItemNavigation(_WidgetBase):
    """For the transcript (mixed in before its widget class, whose ``BINDINGS`` hold
    ``ITEM_BINDINGS``): Up/Down move the focus between its items (its focusable children)
    while one of them, or something inside one, has focus; otherwise they scroll. Past
    the last item the focus goes on to what follows (the composer)."""

    def focused_item(self) -> Widget | None:
        """The item (a child of this widget) that holds the focus, if any."""
        node = self.screen.focused if self.is_attached else None
        while node is not None and node.parent is not self:
            parent = node.parent
            node = parent if isinstance(parent, Widget) else None
        return node

    def _items(self) -> list[Widget]:
        """The focusable children on show (``focusable`` alone counts hidden ones)."""
        return [child for child in self.children if child.focusable and child.display]

    def action_item_up(self) -> None:
        item = self.focused_item()
        items = self._items()
        if item is None or item not in items or items.index(item) == 0:
            self.action_scroll_up()
            return
        items[items.index(item) - 1].focus()

    def action_item_down(self) -> None:
        item = self.focused_item()
        items = self._items()
        if item is None or item not in items:
            self.action_scroll_down()
            return
        index = items.index(item)
        if index + 1 < len(items):
            items[index + 1].focus()
            return
        chain = self.screen.focus_chain
        if item in chain:  # on to the first widget after the transcript (the composer)
            later = chain[chain.index(item) + 1 :]
            after = [w for w in later if w is not self and self not in w.ancestors]
            if after:
                after[0].focus()

    def focus_last_item(self) -> bool:
        """Focus the newest item (``False`` when there is none)."""
        items = self._items()
        if not items:
            return False
        items[-1].focus()
        return True

"""Small modal screens: rename a session, confirm a deletion or a compaction, name the user
to share a session with (or to stop sharing it with)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

from core.display import single_line

__all__ = [
    "ConfirmScreen",
    "RenameScreen",
    "UserNameScreen",
    "compact_question",
    "delete_question",
    "share_question",
]

_CSS_PATH = "modals.tcss"
"""The modals' stylesheet, beside this module."""


class RenameScreen(ModalScreen[str | None]):
    """Ask for a new title; dismisses with the title, or ``None`` when cancelled or unchanged.

    The title is untrusted and an ``Input`` draws its value as is: it is pre-filled with the
    safe one-line form (``single_line``), never the raw title (whose escape sequences set
    the window title, cleared the screen and wrote the clipboard). What is pasted into any
    ``Input`` is made safe by the app (``DshApp.on_event``).
    """

    CSS_PATH = _CSS_PATH
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current
        self._shown = single_line(current)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("Rename session"), id="rename-title")
            yield Input(value=self._shown, id="rename-input", select_on_focus=True)
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Rename", id="ok", variant="primary")

    def on_mount(self) -> None:
        # The old title starts selected, so typing replaces it: whichever the field gets
        # first, its focus or its value (the value puts the cursor at its end).
        field = self.query_one("#rename-input", Input)
        field.focus()
        self.call_after_refresh(self._select_untouched)

    def _select_untouched(self) -> None:
        field = self.query_one("#rename-input", Input)
        if field.value == self._shown:  # nothing typed yet
            field.select_all()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._accept()

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self._accept()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    def _accept(self) -> None:
        typed = self.query_one(Input).value
        if typed == self._shown:  # untouched: keep the title exactly as it is
            self.dismiss(None)
            return
        value = " ".join(single_line(typed).split())
        if not value:
            self.notify("A title cannot be empty.", severity="warning", markup=False)
            return
        self.dismiss(value)


class UserNameScreen(ModalScreen[str | None]):
    """Ask for a user name (who to share the session with, or stop sharing it with);
    dismisses with the name typed, or ``None`` when cancelled or left empty. ``question``
    is untrusted-safe (``Text``)."""

    CSS_PATH = _CSS_PATH
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: Text, confirm_label: str) -> None:
        super().__init__()
        self._question = question
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question, id="user-question")
            yield Input(placeholder="user name", id="user-input")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button(self._confirm_label, id="ok", variant="primary")

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._accept()

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self._accept()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

    def _accept(self) -> None:
        value = self.query_one(Input).value.strip()
        if not value:
            self.notify("Type the user's name.", severity="warning", markup=False)
            return
        self.dismiss(value)


def share_question(label: str, session_id: str, *, share: bool) -> Text:
    text = Text("Share the session " if share else "Stop sharing the session ")
    text.append(single_line(label, 60), style="bold")
    if label != session_id:
        text.append(f" ({single_line(session_id, 40)})", style="dim")
    text.append(
        " with:\nThey can read it and @-mention it, never change it." if share else " with:"
    )
    return text


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; the question text is untrusted-safe (rendered as ``Text``)."""

    CSS_PATH = _CSS_PATH
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "no", "Cancel"),
        Binding("y", "yes", "Yes", show=False),
    ]

    def __init__(self, question: Text, confirm_label: str = "Delete") -> None:
        super().__init__()
        self._question = question
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question, id="confirm-question")
            with Horizontal():
                yield Button("Cancel", id="no")
                yield Button(self._confirm_label, id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        self.dismiss(False)


def delete_question(label: str, session_id: str) -> Text:
    text = Text("Delete the session ")
    text.append(single_line(label, 60), style="bold")
    if label != session_id:
        text.append(f" ({single_line(session_id, 40)})", style="dim")
    text.append(
        "?\nIts whole log is removed. Reference cards in other sessions keep their snapshot."
    )
    return text


def compact_question(label: str, session_id: str) -> Text:
    text = Text("Compact the session ")
    text.append(single_line(label, 60), style="bold")
    if label != session_id:
        text.append(f" ({single_line(session_id, 40)})", style="dim")
    text.append(
        "?\nThe model summarises the conversation; from then on it sees only the summary."
        " The full log stays stored."
    )
    return text

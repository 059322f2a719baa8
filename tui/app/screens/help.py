"""The help screen (F1, or ``?`` outside the composer and the session filter): every key of the app on one page."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HELP_KEYS", "HelpScreen", "help_table"]

HELP_KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Writing",
        (
            ("Enter", "send the message"),
            ("Shift+Enter, Ctrl+J", "add a line"),
            ("Up / Down", "walk your sent messages (on the first / last line)"),
            ("@", "reference another session (Up/Down to choose, Enter or Tab to insert)"),
            ("Esc", "stop a reply, cancel preparing, or come back to the composer"),
        ),
    ),
    (
        "Sessions",
        (
            ("Ctrl+N", "new session"),
            ("F2", "rename the session"),
            ("F4", "compact the session (asks first)"),
            ("F8", "delete the session (asks first)"),
            ("Ctrl+L", "go to the session list and its filter"),
            ("Ctrl+B", "show or hide the session list"),
        ),
    ),
    (
        "Everything else",
        (
            ("Enter / Space", "expand or collapse a focused card"),
            ("Tab / Shift+Tab", "move between the list, the cards and the composer"),
            ("Ctrl+P", "command palette: switch session, profile, export, copy, theme"),
            ("F1, ?", "this help (? outside the composer and the session filter)"),
            ("Ctrl+Q", "quit"),
        ),
    ),
)
"""The keys shown, by section: (key, what it does)."""


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for index, (section, rows) in enumerate(HELP_KEYS):
        if index:
            table.add_row("", "")
        table.add_row(Text(section, style="bold underline"), "")
        for key, what in rows:
            table.add_row(Text(key), Text(what))
    return table


class HelpScreen(ModalScreen[None]):
    """A modal list of the keys; Esc (or F1, ``q``) closes it."""

    CSS_PATH = "help.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("f1", "close", "Close", show=False),
        Binding("q", "close", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "dsh keys"
            box.border_subtitle = "Esc closes this help"
            yield Static(help_table(), id="help-keys")

    def action_close(self) -> None:
        self.dismiss(None)

"""The title bar, the status line, the notice bar and the key footer: plain ``Text``
only, never markup."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer, Static

from core.display import escape_control, single_line

__all__ = ["KeyFooter", "NoticeBar", "StatusLine", "TitleBar"]


class TitleBar(Static):
    """Session title (or id), its cwd, and the model in use."""

    DEFAULT_CSS = """
    TitleBar { dock: top; height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    def show(self, title: str | None, session_id: str | None, cwd: str | None, model: str) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("dsh", style="bold")
        text.append(" · ", style="dim")
        text.append(single_line(model, 30), style="italic")
        text.append(" · ", style="dim")
        if session_id is None:
            text.append("no session", style="dim")
        else:
            text.append(single_line(title or session_id, 60), style="bold")
            if cwd is not None:
                text.append(f"  {single_line(cwd, 40)}", style="dim")
        self.update(text)


class StatusLine(Static):
    """What the app is doing right now (preparing, streaming, compacting)."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; color: $text-muted; }
    StatusLine.-idle { display: none; }
    """

    def on_mount(self) -> None:
        self.add_class("-idle")

    def set_status(self, message: str | None) -> None:
        self.set_class(message is None, "-idle")
        self.update(Text(message or "", style="italic", no_wrap=True, overflow="ellipsis"))


class NoticeBar(Static):
    """The latest problem in plain words, with its error code dimmed; stays until dismissed."""

    DEFAULT_CSS = """
    NoticeBar {
        height: auto; max-height: 4; padding: 0 1; margin: 0 1;
        border-left: thick $error; background: $error 15%;
    }
    NoticeBar.-warning { border-left: thick $warning; background: $warning 15%; }
    NoticeBar.-hidden { display: none; }
    """

    def on_mount(self) -> None:
        self.add_class("-hidden")

    _plain = ""

    def show_notice(self, message: str, code: str | None = None, *, warning: bool = False) -> None:
        # The sink escapes too (idempotent): a notice may quote untrusted text.
        message = escape_control(message)
        code = single_line(code) if code else code
        self._plain = message + (f"  {code}" if code else "")
        text = Text(message)
        if code:
            text.append(f"  {code}", style="dim")
        self.update(text)
        self.set_class(warning, "-warning")
        self.remove_class("-hidden")

    def clear(self) -> None:
        self._plain = ""
        self.add_class("-hidden")
        self.update("")

    @property
    def visible_text(self) -> str:
        """The notice as plain text ('' when hidden)."""
        return "" if self.has_class("-hidden") else self._plain


class KeyFooter(Footer):
    """The footer, with the keys that cannot run now (dimmed) after those that can. Keys
    that do not fit beside the palette key are left out whole, from the right (what is lost
    first is what could not run anyway), never cut mid-word or shown under it."""

    def compose(self) -> ComposeResult:
        dimmed: list[Widget] = []
        for widget in super().compose():
            # Only a footer key has these classes (a key group holds its keys itself).
            palette = widget.has_class("-command-palette")
            if widget.has_class("-disabled") and not (palette or widget.has_class("-grouped")):
                dimmed.append(widget)
                continue
            if palette:
                yield from dimmed
                dimmed = []
            yield widget
        yield from dimmed

    async def recompose(self) -> None:
        await super().recompose()
        self.fit_keys()

    def on_resize(self, event: events.Resize) -> None:
        self.fit_keys()

    def fit_keys(self) -> None:
        """Show the keys, in order, while they fit; hide the rest."""
        width = self.size.width
        if not width:
            return
        items = list(self.children)
        room = width - sum(
            self._width(item) for item in items if item.has_class("-command-palette")
        )
        used, fits = 0, True
        for item in items:
            if item.has_class("-command-palette"):
                continue
            item_width = self._width(item)
            fits = fits and used + item_width <= room
            item.display = fits
            used += item_width if fits else 0

    def _width(self, item: Widget) -> int:
        """The cells ``item`` takes in the row: its content, padding, border and margin."""
        styles = item.styles
        content = item.get_content_width(Size(self.size.width, 1), self.app.size)
        return content + styles.gutter.width + styles.margin.width

"""The title bar, the status line, the notice bar and the key footer: plain ``Text``
only, never markup."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from core.display import escape_control, single_line

__all__ = ["NO_PROFILE", "KeyFooter", "NoticeBar", "ProfileShown", "StatusLine", "TitleBar"]


@dataclass(frozen=True, slots=True)
class ProfileShown:
    """What the header says about the profile that answers: its name (``None``: the
    runtime is not open yet) and model, the recorded name it stands in for (no longer
    configured), whether its API key is missing."""

    profile: str | None
    model: str
    instead_of: str | None = None
    no_key: bool = False


NO_PROFILE = ProfileShown(None, "")


class TitleBar(Static):
    """Session title (or id), its cwd, and the profile and model that answer it."""

    DEFAULT_CSS = """
    TitleBar { dock: top; height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    def show(
        self, title: str | None, session_id: str | None, cwd: str | None, profile: ProfileShown
    ) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("dsh", style="bold")
        text.append(" · ", style="dim")
        if profile.profile is not None:
            text.append(single_line(profile.profile, 30))
            text.append(" (", style="dim")
            text.append(single_line(profile.model, 30), style="italic")
            text.append(")", style="dim")
            if profile.instead_of is not None:
                text.append(f" not {single_line(profile.instead_of, 24)}", style="dim")
            if profile.no_key:
                text.append(" no API key", style="bold")
        else:
            text.append(single_line(profile.model, 30), style="italic")
        text.append(" · ", style="dim")
        if session_id is None:
            text.append("no session", style="dim")
        else:
            text.append(single_line(title or session_id, 60), style="bold")
            if cwd is not None:
                text.append(f"  {single_line(cwd, 40)}", style="dim")
        self.plain = text.plain
        self.update(text)

    plain = ""
    """The bar as plain text."""


class StatusLine(Horizontal):
    """What the app is doing right now (preparing, streaming, compacting), or, while it
    is doing nothing, the context meter of the open session on the right (``set_meter``;
    a reply under way would make its figures stale, and its words say how to stop it).

    ``-idle``: the app is doing nothing; the line is hidden when it has no meter either."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; color: $text-muted; }
    StatusLine.-idle.-no-meter { display: none; }
    StatusLine > #activity { width: 1fr; height: 1; text-style: italic; }
    StatusLine > #meter {
        width: 1fr; height: 1; text-align: right; text-wrap: nowrap; text-overflow: ellipsis;
    }
    StatusLine.-idle > #activity { display: none; }
    StatusLine.-busy > #meter { display: none; }
    StatusLine > #meter.-warning { color: $text-warning; text-style: bold; }
    StatusLine > #meter.-error { color: $text-warning; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="activity")
        yield Static(id="meter")

    def on_mount(self) -> None:
        self.add_class("-idle", "-no-meter")

    def set_status(self, message: str | None) -> None:
        self.set_class(message is None, "-idle")
        self.set_class(message is not None, "-busy")
        self.query_one("#activity", Static).update(
            Text(escape_control(message or ""), no_wrap=True, overflow="ellipsis")
        )

    def set_meter(
        self, text: str | None, *, warning: bool = False, error: bool = False, tooltip: str = ""
    ) -> None:
        """Show the meter (``None``: none); ``warning``: the next request would not fit;
        ``error``: the line tells why the draft's references cannot be measured."""
        meter = self.query_one("#meter", Static)
        self.set_class(not text, "-no-meter")
        meter.set_class(warning, "-warning")
        meter.set_class(error, "-error")
        self._meter = single_line(text or "")
        meter.update(Text(self._meter, no_wrap=True, overflow="ellipsis"))
        meter.tooltip = tooltip or None

    _meter = ""

    @property
    def meter_text(self) -> str:
        """The meter as plain text ('' when there is none)."""
        return self._meter

    @property
    def meter_warning(self) -> bool:
        return self.query_one("#meter", Static).has_class("-warning")


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

    _composed: tuple[object, ...] = ()
    """What the keys now shown were composed from (``_what_shows``)."""
    _recompose_due = False

    def bindings_changed(self, screen: Screen[object]) -> None:
        """As Footer's, but one recompose for a burst of changes, and none when the keys
        would come out the same: Textual recomposes on every change of focus, of a reactive
        the keys depend on, of the app's bindings, each time remounting every key (most of
        the CPU a keystroke cost, some forty recomposes per session opened)."""
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._recompose_due:
            self._recompose_due = True
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        self._recompose_due = False
        if self.is_attached and self._what_shows() != self._composed:
            await self.recompose()

    def _what_shows(self) -> tuple[object, ...]:
        """Everything ``compose`` reads: the screen's active bindings (each with whether it
        can run now and its tooltip) and how the app shows their keys, and the footer's
        own settings."""
        if not self._bindings_ready:
            return ()
        bindings = tuple(
            (binding, enabled, tooltip, self.app.get_key_display(binding))
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
        )
        palette = self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE
        return (bindings, self.compact, self.combine_groups, palette)

    def compose(self) -> ComposeResult:
        self._composed = self._what_shows()
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

"""Command palette entries that list sessions ("Switch to: …", "Open referenced session: …").
Titles and labels are untrusted: they are shown as plain ``Content``, never parsed as markup
(Textual's system commands and ``SimpleProvider`` parse their titles: not for these)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.widget import Widget

from core.display import single_line
from tui.app.host import AppHost
from tui.app.transcript.cards import ReferenceCard, source_name

__all__ = ["OPEN_REFERENCED", "ReferenceCommands", "SessionCommands", "focused_card"]

OPEN_REFERENCED = "Open referenced session"
"""The start of each palette entry that opens a source of the focused reference card."""


class SessionCommands(Provider):
    def _entries(self) -> list[tuple[str, str]]:
        app: AppHost = self.app  # type: ignore[assignment]
        try:
            entries = app.sidebar.entries
        except Exception:  # the main screen is not up (e.g. a modal is)
            return []
        return [(e.header.id, single_line(e.label, 80)) for e in entries]

    async def discover(self) -> Hits:
        app: AppHost = self.app  # type: ignore[assignment]
        for session_id, label in self._entries()[:20]:
            yield DiscoveryHit(
                Content(f"Switch to: {label}"),
                partial(app.switch_to, session_id),
                text=f"Switch to: {label}",
                help="Open this session",
            )

    async def search(self, query: str) -> Hits:
        app: AppHost = self.app  # type: ignore[assignment]
        matcher = self.matcher(query)
        for session_id, label in self._entries():
            text = f"Switch to: {label}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    Content(text),
                    partial(app.switch_to, session_id),
                    text=text,
                    help="Open this session",
                )


def focused_card(focused: Widget | None) -> ReferenceCard | None:
    """The reference card that has focus, or holds it (one of its buttons), if any."""
    node = focused
    while isinstance(node, Widget):
        if isinstance(node, ReferenceCard):
            return node
        node = node.parent  # type: ignore[assignment]
    return None


class ReferenceCommands(Provider):
    """An "Open referenced session: label (id)" entry for each source of the focused
    reference card (none when no card has focus); the app's ``o`` chooser is a palette of
    these alone."""

    def _entries(self) -> list[tuple[str, str, str]]:
        card = focused_card(self.focused)
        if card is None:
            return []
        names = [(s.session_id, source_name(s)) for s in card.openable]
        return [(sid, name, f"{OPEN_REFERENCED}: {name}") for sid, name in names]

    async def discover(self) -> Hits:
        app: AppHost = self.app  # type: ignore[assignment]
        for session_id, name, text in self._entries():
            yield DiscoveryHit(
                Content(text),
                partial(app.open_referenced_session, session_id, name),
                text=text,
                help="Switch to the session this reference card was taken from",
            )

    async def search(self, query: str) -> Hits:
        app: AppHost = self.app  # type: ignore[assignment]
        matcher = self.matcher(query)
        for session_id, name, text in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    Content(text),
                    partial(app.open_referenced_session, session_id, name),
                    text=text,
                    help="Switch to the session this reference card was taken from",
                )

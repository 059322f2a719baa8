"""Command palette entries that list sessions ("Switch to: …"). Titles are untrusted:
they are shown as plain ``Content``, never parsed as markup."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from core.display import single_line

if TYPE_CHECKING:
    from tui.app.app import DshApp

__all__ = ["SessionCommands"]


class SessionCommands(Provider):
    def _entries(self) -> list[tuple[str, str]]:
        app: DshApp = self.app  # type: ignore[assignment]
        try:
            entries = app.sidebar.entries
        except Exception:  # the main screen is not up (e.g. a modal is)
            return []
        return [(e.header.id, single_line(e.label, 80)) for e in entries]

    async def discover(self) -> Hits:
        app: DshApp = self.app  # type: ignore[assignment]
        for session_id, label in self._entries()[:20]:
            yield DiscoveryHit(
                Content(f"Switch to: {label}"),
                partial(app.switch_to, session_id),
                text=f"Switch to: {label}",
                help="Open this session",
            )

    async def search(self, query: str) -> Hits:
        app: DshApp = self.app  # type: ignore[assignment]
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

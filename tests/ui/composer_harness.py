"""A small app around one ``Composer`` for the composer and picker Pilot tests.

The candidate source is the real one: ``SessionReferenceService.list_candidates`` over a
``MemorySessionStore`` through ``SessionQuery``. The clock is fixed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from core.log import SessionHeader
from core.references import SessionReferenceCandidate, SessionReferenceService
from stores import MemorySessionStore, SessionQuery
from tui.app.composer.composer import CandidateSource, Composer

NOW_MS = 1_750_000_000_000
"""The harness clock (epoch ms)."""

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR

CURRENT_ID = "current-session"


@dataclass(frozen=True)
class Seed:
    """One session to create: id, optional title and cwd, age in ms before ``NOW_MS``."""

    id: str
    title: str | None = None
    cwd: str | None = None
    age: int = HOUR


DEFAULT_SEEDS: tuple[Seed, ...] = (
    Seed("s-alpha", "Alpha planning", "/work/app", 5 * MINUTE),
    Seed("s-beta", "Beta release notes", "/work/app", 3 * HOUR),
    Seed("s-gamma", None, None, 2 * DAY),
    Seed("s-delta", "Delta bugs", "/elsewhere", 3 * DAY),
)


@dataclass
class World:
    """The store, the current session and a candidate source over them."""

    store: MemorySessionStore
    current: SessionHeader
    service: SessionReferenceService
    calls: list[str] = field(default_factory=list)

    async def source(self, query: str) -> Sequence[SessionReferenceCandidate]:
        self.calls.append(query)
        return await self.service.list_candidates(self.current, query)


async def make_world(
    seeds: Sequence[Seed] = DEFAULT_SEEDS, *, current_cwd: str | None = "/work/app"
) -> World:
    store = MemorySessionStore()
    current = await store.create_session(CURRENT_ID, cwd=current_cwd, created_at=NOW_MS)
    await store.append(
        CURRENT_ID, "session/title", {"title": "The current one", "source": {"kind": "user"}}
    )
    for seed in seeds:
        await store.create_session(seed.id, cwd=seed.cwd, created_at=NOW_MS - seed.age)
        if seed.title is not None:
            await store.append(
                seed.id, "session/title", {"title": seed.title, "source": {"kind": "user"}}
            )
    return World(store, current, SessionReferenceService(SessionQuery(store)))


def slow_first(source: CandidateSource, delay: float) -> CandidateSource:
    """A source whose first call answers only after ``delay`` seconds (a stale lookup)."""
    calls = 0

    async def wrapped(query: str) -> Sequence[SessionReferenceCandidate]:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(delay)
        return await source(query)

    return wrapped


async def failing_source(query: str) -> Sequence[SessionReferenceCandidate]:
    raise OSError(f"database is locked ({query!r})")


class ComposerHarness(App[None]):
    """A transcript placeholder above a bottom-docked composer; records what reaches it."""

    CSS = """
    #transcript { height: 1fr; }
    #sidebar { width: 20; }
    .flat Composer { dock: bottom; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app_escape", "Interrupt")]

    def __init__(
        self,
        source: CandidateSource | None,
        *,
        text: str = "",
        now_ms: Callable[[], int] = lambda: NOW_MS,
        nested: bool = False,
    ) -> None:
        super().__init__()
        self._source = source
        self._text = text
        self._now_ms = now_ms
        self._nested = nested
        self.submitted: list[str] = []
        self.blocked = 0
        self.escapes = 0

    def compose(self) -> ComposeResult:
        composer = Composer(
            self._text,
            candidate_source=self._source,
            now_ms=self._now_ms,
            cursor_blink=False,
            id="composer",
        )
        if not self._nested:
            self.screen.add_class("flat")
            yield Static(Text("transcript"), id="transcript")
            yield composer
            return
        # Like the real app: sidebar | (transcript / status / composer), footer below.
        with Horizontal():
            yield Static(Text("sidebar"), id="sidebar")
            with Vertical():
                yield Static(Text("transcript"), id="transcript")
                yield Static(Text("status"), id="status")
                yield composer
        yield Footer()

    def on_mount(self) -> None:
        self.composer.focus()

    @property
    def composer(self) -> Composer:
        return self.query_one(Composer)

    def action_app_escape(self) -> None:
        self.escapes += 1

    def on_composer_submitted(self, message: Composer.Submitted) -> None:
        self.submitted.append(message.text)

    def on_composer_send_blocked(self, message: Composer.SendBlocked) -> None:
        self.blocked += 1

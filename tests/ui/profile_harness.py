"""Apps on a config file with profiles (issue 32): the seeded database of ``conftest``, a
``[profiles.NAME]`` table per test, and the runtime built as ``dsh`` builds it (a provider
per profile, none injected), so a reply is answered by its profile's own model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot

from core.config import DshConfig, load_config
from core.log import ASSISTANT_MESSAGE, SESSION_PROFILE, Event
from stores import SqliteSessionStore
from tests.ui.conftest import seed
from tests.ui.test_app import wait_for
from tui.app.app import DshApp
from tui.shared.runtime import Runtime, open_runtime

__all__ = [
    "PROFILES",
    "choose_in_palette",
    "profile_events",
    "profile_runtime",
    "replies",
    "write_config",
]

NO_KEY_ENV = "DSH_TEST_PROFILE_KEY_NOT_SET"

PROFILES = f"""
default_profile = "alpha"

[profiles.alpha]
provider = "offline"
model = "alpha-1"

[profiles.beta]
provider = "offline"
model = "beta-1"
context_window = 64000

[profiles.keyless]
provider = "openai"
base_url = "http://127.0.0.1:9"
model = "keyless-model"
api_key_env = "{NO_KEY_ENV}"

[profiles.tiny]
provider = "offline"
model = "tiny-1"
context_window = 50
"""
"""Two offline profiles with their own model names (``alpha`` the default), one whose key
is never set, and one whose context window nothing fits in."""


def write_config(tmp_path: Path, body: str = PROFILES) -> DshConfig:
    """The configuration of ``config.toml`` holding ``body``, on ``tmp_path``'s database."""
    path = tmp_path / "config.toml"
    database = tmp_path / "ui.sqlite3"
    path.write_text(f"database = {str(database)!r}\n{body}", encoding="utf-8")
    return load_config({}, config_path=path)


@asynccontextmanager
async def profile_runtime(
    tmp_path: Path,
    body: str = PROFILES,
    *,
    seeded: bool = True,
    offline_delay: float = 0.0,
    before: Callable[[SqliteSessionStore], Any] | None = None,
) -> AsyncIterator[Runtime]:
    """A runtime on ``body``'s profiles over the seeded database (``before(store)`` may
    add to it first)."""
    config = write_config(tmp_path, body)
    async with await SqliteSessionStore.open(tmp_path / "ui.sqlite3") as store:
        if seeded:
            await seed(store)
        if before is not None:
            await before(store)
        async with open_runtime(config, store=store, offline_delay=offline_delay) as runtime:
            yield runtime


async def profile_events(runtime: Runtime, session_id: str) -> list[Event]:
    return [e for e in await runtime.store.read_events(session_id) if e.type == SESSION_PROFILE]


async def replies(runtime: Runtime, session_id: str) -> list[Event]:
    return [e for e in await runtime.store.read_events(session_id) if e.type == ASSISTANT_MESSAGE]


async def choose_in_palette(app: DshApp, pilot: Pilot[int], *typed: str) -> None:
    """Open the command palette and, for each of ``typed`` in turn, type it and press
    Enter on the one entry it leaves (the first opens "Switch profile…", the next picks
    a profile in the list that opens)."""
    await pilot.press("ctrl+p")
    for text in typed:
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*text)

        def found() -> bool:
            if not isinstance(app.screen, CommandPalette):
                return False
            hits = app.screen.query_one(CommandList)
            return hits.option_count == 1 and hits.highlighted == 0

        await wait_for(pilot, found)
        palette = app.screen
        await pilot.press("enter")
        await wait_for(pilot, lambda shown=palette: app.screen is not shown)

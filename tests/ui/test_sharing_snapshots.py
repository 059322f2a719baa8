"""SVG snapshot of a session shared with the user (issue 17): the sidebar names the owner
of sessions not the user's own (``⇄ alice``), and the open shared session is read-only —
the notice says whose it is, the composer does not send, the writing keys are dimmed.

Two users on one SQLite file (the store opened as each): alice owns the seeded sessions
and shares two with bob; the app runs as bob, who also has one of his own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.config import DshConfig
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.ui.conftest import FIXED_NOW, SIZE, make_app, seed, title
from tests.ui.snapshots import assert_snapshot, pinned_environment
from tests.ui.test_app import settle
from tui.shared.runtime import Runtime, open_runtime

__all__ = ["pinned_environment"]  # autouse: the test is drawn in it


@pytest.fixture
async def bob_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    path = tmp_path / "team.sqlite3"
    async with await SqliteSessionStore.open(path, user="alice") as alice:
        await seed(alice)
        await alice.share("checkout", "bob")
        await alice.share("search-tuning", "bob")
    bob = await SqliteSessionStore.open(path, user="bob")
    try:
        await bob.create_session("bob-notes", cwd="/home/dev/shop", created_at=FIXED_NOW - 60_000)
        await bob.append_batch("bob-notes", [title("Bob's release notes", FIXED_NOW - 50_000)])
        config = DshConfig(database=path)
        async with open_runtime(config, store=bob, provider=OfflineProvider()) as rt:
            yield rt
    finally:
        await bob.close()


async def test_a_session_shared_with_you(
    bob_runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(bob_runtime, initial_session="checkout")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.sidebar.visible_ids == ["bob-notes", "checkout", "search-tuning"]
        assert app.composer.send_enabled is False
        assert "belongs to alice" in app.notice.visible_text
        assert_snapshot(request, app, "app_session_shared_with_you")

"""Issue 17 in the TUI (Textual Pilot), as bob on the team PostgreSQL: alice's private
session never shows (sidebar, @ picker, live updates through LISTEN/NOTIFY), her shared
one is marked with her name and read-only (composer, keys, palette), and bob shares his
own from the palette."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.config import DshConfig
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceInput, format_session_reference_mention
from stores import open_store
from tests.pgcluster import ALICE
from tests.pilot_wait import wait_for
from tests.sharing.team import Team, team
from tests.sharing.test_cli_sharing import event_counts
from tests.ui.conftest import SIZE, make_app
from tests.ui.test_app import settle
from tui.app.app import DshApp
from tui.app.screens.modals import UserNameScreen
from tui.shared.runtime import Runtime, open_runtime

__all__ = ["team"]

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def bob_runtime(team: Team, tmp_path: Path) -> AsyncIterator[Runtime]:
    store = await open_store(team.bob_url)
    config = DshConfig(database=tmp_path / "unused.sqlite3")
    try:
        async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:
            yield rt
    finally:
        await store.close()


def notice(app: DshApp) -> str:
    return app.notice.visible_text


async def test_the_tui_as_bob(team: Team, bob_runtime: Runtime) -> None:
    app = make_app(bob_runtime, initial_session=team.shared)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert set(app.sidebar.visible_ids) == {team.shared, team.bobs}
        # The shared session is marked with its owner's name; bob's own is not.
        for sid in app.sidebar.visible_ids:
            index = app.sidebar.visible_ids.index(sid)
            detail = app.sidebar.row_lines(index)[1].plain
            assert (f"⇄ {ALICE}" in detail) == (sid == team.shared)

        # Opened, the shared session is read-only: composer, keys, palette.
        assert app.current_id == team.shared
        assert f"belongs to {ALICE}" in notice(app)
        assert app.composer.send_enabled is False
        for action in ("rename_session", "compact_session", "delete_session", "share_session"):
            assert app.check_action(action, ()) is None, action
        names = {c.title for c in app.get_system_commands(app.screen)}
        assert "Share session…" not in names
        before = event_counts(team)
        app.composer.focus()
        await pilot.press(*"mine now?", "enter")
        await pilot.pause()
        assert f"belongs to {ALICE}" in notice(app)
        app._confirm_delete(team.shared)  # the sidebar's delete key
        await pilot.pause()
        assert f"Only {ALICE} can delete" in notice(app)
        assert event_counts(team) == before

        # Bob's own session: writable, shareable from the palette; the @ picker offers
        # the shared session and never the private one.
        app.switch_to(team.bobs)
        await wait_for(pilot, lambda: app.current_id == team.bobs)
        await settle(app, pilot)
        assert app.composer.send_enabled is True
        assert "belongs to" not in notice(app)
        assert [c.candidate.session_id for c in await app._candidates("")] == [team.shared]
        assert await app._candidates("secret") == []
        # A mention of the private session fails as one of a deleted session does.
        failures = {}
        for sid in (team.private, "deleted-long-ago"):
            mention = format_session_reference_mention(SessionReferenceInput(sid, "that one"))
            app.composer.set_draft(f"see {mention}")
            app.notice.clear()
            await pilot.press("enter")
            await wait_for(pilot, lambda: notice(app) != "" and not app.preparing)
            failures[sid] = notice(app)
            assert app.composer.draft == f"see {mention}"  # the draft is kept
        assert failures[team.private] == failures["deleted-long-ago"]
        assert "does not exist" in failures[team.private]
        assert event_counts(team) == before
        app.composer.set_draft("")
        names = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Share session…", "Unshare session…"} <= names
        app.action_share_session()
        await wait_for(pilot, lambda: isinstance(app.screen, UserNameScreen))
        await pilot.press(*ALICE, "enter")
        store = bob_runtime.store
        await wait_for(pilot, lambda: "Shared" in "".join(n.message for n in app._notifications))
        assert [(g.session_id, g.grantee) for g in await store.list_shares(team.bobs)] == [
            (team.bobs, ALICE)
        ]

        # Live: alice makes a new private session, then shares her old one. Bob's sidebar
        # gets the shared one (LISTEN/NOTIFY), never the new private one.
        async with await open_store(team.alice_url) as alice:
            await alice.create_session("alice-new-private", cwd="/work/a")
            await alice.share(team.private, "bob")
            await wait_for(pilot, lambda: team.private in app.sidebar.visible_ids)
            assert "alice-new-private" not in app.sidebar.visible_ids
            await alice.unshare(team.private, "bob")
            await wait_for(pilot, lambda: team.private not in app.sidebar.visible_ids)
            assert "alice-new-private" not in app.sidebar.visible_ids

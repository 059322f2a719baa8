"""Issue 32, point 4, on the team PostgreSQL store (Textual Pilot, as bob): a reference
card's source that alice shares with bob opens; once she stops sharing it, "Open session"
says so in one line and bob stays in his own session; shared again, it opens again."""

from __future__ import annotations

import pytest

from core.references import SessionReferenceInput, format_session_reference_mention
from stores import open_store
from tests.pgcluster import BOB
from tests.sharing.team import Team, team
from tests.sharing.test_tui_sharing import bob_runtime, notice, wait_for
from tests.ui.conftest import SIZE, make_app
from tests.ui.test_app import send_idle, settle
from tui.app.app import SOURCE_GONE
from tui.app.transcript.cards import ReferenceCard
from tui.shared.runtime import Runtime

__all__ = ["bob_runtime", "team"]

pytestmark = pytest.mark.timeout(90)


async def test_open_a_shared_source_then_one_no_longer_shared(
    team: Team, bob_runtime: Runtime
) -> None:
    app = make_app(bob_runtime, initial_session=team.bobs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == team.bobs
        mention = format_session_reference_mention(
            SessionReferenceInput(team.shared, "Alice shared notes")
        )
        app.composer.set_draft(f"see {mention}")
        await pilot.press("enter")
        await send_idle(app, pilot)

        # Shared with bob: the card's source opens (read-only, as alice's sessions are).
        app.transcript.query_one(ReferenceCard).focus()
        await pilot.press("o")
        await wait_for(pilot, lambda: app.current_id == team.shared)
        assert app.sidebar.current_id == team.shared
        assert "belongs to" in notice(app)

        # No longer shared: one line, and bob stays in his own session.
        app.switch_to(team.bobs)
        await wait_for(pilot, lambda: app.current_id == team.bobs)
        await settle(app, pilot)
        async with await open_store(team.alice_url) as alice:
            assert await alice.unshare(team.shared, BOB)
            card = app.transcript.query_one(ReferenceCard)
            card.focus()
            await pilot.press("o")
            expected = f"{SOURCE_GONE}: Alice shared notes ({team.shared})."
            await wait_for(pilot, lambda: notice(app) == expected)
            assert app.current_id == team.bobs
            assert team.shared not in app.sidebar.visible_ids
            assert card.has_focus

            # Shared again: it opens again (not listed yet: the list is read first).
            assert await alice.share(team.shared, BOB)
            await pilot.press("o")
            await wait_for(pilot, lambda: app.current_id == team.shared)
            assert app.sidebar.current_id == team.shared
            assert team.shared in app.sidebar.visible_ids

"""The app on a session whose stored rows nest deeper than the limit (issue 31 point 3,
rows written before it or by hand): it opens, the unknown event and the message with an
unknown block show, what lies deeper than ``MAX_JSON_DEPTH`` elided as ``…``."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import DshConfig
from core.providers.offline import OfflineProvider
from tests.cli.test_deep_events import seed_deep
from tests.ui.conftest import SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle
from tests.ui.transcript_harness import shown_text
from tui.app.transcript.cards import CollapsedItem
from tui.shared.runtime import open_runtime

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("depth", [500, 980])
async def test_the_app_opens_a_session_with_deep_rows(tmp_path: Path, depth: int) -> None:
    db = tmp_path / "deep.sqlite3"
    await seed_deep(db, "deep", depth)
    async with open_runtime(DshConfig(database=db), provider=OfflineProvider()) as runtime:
        app = make_app(runtime, initial_session="deep")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "deep"
            screen = screen_text(app)
            assert "hello" in screen and "later" in screen and "odd/event event" in screen
            (odd,) = [w for w in app.transcript.item_widgets if w.has_class("unknown")]
            assert isinstance(odd, CollapsedItem)
            odd.focus()
            await pilot.press("enter")
            await settle(app, pilot)
            assert odd.expanded and '"…"' in odd.body_text
            assert '"x"' not in odd.body_text  # the leaf lies deeper than what is shown
            assert "…" in shown_text(odd)

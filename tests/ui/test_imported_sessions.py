"""A session imported from another tool (issue 33) is listed in the app under the tool's
title, and opens with its messages."""

from __future__ import annotations

from core.importers.foreign import ForeignSession, Provenance
from core.importers.foreign_import import store_foreign_session
from tests.importers.toy_foreign import message, to_events
from tests.pilot_wait import wait_for
from tests.ui.conftest import FIXED_NOW, SIZE, make_app
from tui.app.app import DshApp
from tui.shared.runtime import Runtime


async def test_an_imported_session_is_listed_under_its_title(runtime: Runtime) -> None:
    records = [
        message("user", "where is the parser bug?", FIXED_NOW - 5000),
        message("assistant", "In the tokenizer.", FIXED_NOW - 4000),
    ]
    session = ForeignSession(
        provenance=Provenance("claude-code", "/home/dev/.claude/projects/p/cc-1.jsonl", "cc-1"),
        created_at=FIXED_NOW - 6000,
        cwd="/home/dev/shop",
        title="Fix the [b]parser[/b]",
        events=to_events("claude-code", records, "cc-1"),
    )
    assert (await store_foreign_session(runtime.store, session)).status == "imported"
    app: DshApp = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.sidebar.entry("cc-1") is not None)
        entry = app.sidebar.entry("cc-1")
        assert entry is not None and entry.title == "Fix the [b]parser[/b]"

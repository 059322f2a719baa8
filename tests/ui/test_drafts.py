"""Drafts and notices belong to their session; drafts and Up/Down history survive a restart
(tui/drafts.py, tui/sent_history.py, their use in tui/app.py)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from textual.pilot import Pilot

from core.references import SessionReferenceInput, format_session_reference_mention
from tests.ui.conftest import SIZE, make_app, workers_done
from tests.ui.test_app import send_idle, settle, wait_for
from tui.app.app import DshApp
from tui.app.drafts import DraftKeeper, drafts_path, load_drafts, save_drafts
from tui.app.sent_history import rebuild_draft
from tui.shared.runtime import Runtime


def mention(session_id: str, label: str) -> str:
    return format_session_reference_mention(SessionReferenceInput(session_id, label))


async def switch(app: DshApp, pilot: Pilot[int], session_id: str) -> None:
    """Switch the way the command palette's "Switch to" does."""
    app.switch_to(session_id)
    await wait_for(pilot, lambda: app.current_id == session_id)
    await settle(app, pilot)


async def pick(pilot: Pilot[int], app: DshApp, letters: str) -> None:
    await pilot.press("@", *letters)
    await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 1)
    await pilot.press("enter")


# --------------------------------------------------------------------------- per session


async def test_each_session_keeps_its_own_draft(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        await pilot.press(*"draft for checkout")
        await switch(app, pilot, "k8s-upgrade")
        assert app.composer.draft == ""
        await pilot.press(*"draft for k8s")
        await switch(app, pilot, "checkout")
        assert app.composer.draft == "draft for checkout"
        await switch(app, pilot, "k8s-upgrade")
        assert app.composer.draft == "draft for k8s"


async def test_a_draft_does_not_follow_into_the_session_it_mentions(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"compare with ")
        await pick(pilot, app, "kub")
        await switch(app, pilot, "k8s-upgrade")
        assert app.composer.draft == ""  # no self reference waiting to be sent
        await switch(app, pilot, "checkout")
        assert (
            app.composer.draft
            == "compare with " + mention("k8s-upgrade", "Kubernetes upgrade") + " "
        )


async def test_a_notice_goes_when_you_switch(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.composer.set_draft("gone " + mention("ghost", "Ghost"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "SESSION_REFERENCE_READ_FAILED" in app.notice.visible_text)
        await switch(app, pilot, "k8s-upgrade")
        assert app.notice.visible_text == ""
        assert app.composer.draft == ""
        await switch(app, pilot, "checkout")
        assert app.composer.draft == "gone " + mention("ghost", "Ghost")


# --------------------------------------------------------------------------- restart


async def test_unsent_drafts_survive_a_restart(runtime: Runtime, _state_dir: Path) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"half written about ")
        await pick(pilot, app, "kub")
        await switch(app, pilot, "scratch")
        await pilot.press(*"scratch idea")
        await pilot.press("ctrl+q")
    path = drafts_path(runtime.config.database)
    assert path.is_relative_to(_state_dir)
    saved = load_drafts(path)
    expected = "half written about " + mention("k8s-upgrade", "Kubernetes upgrade") + " "
    assert saved == {"checkout": expected, "scratch": "scratch idea"}

    again = make_app(runtime)
    async with again.run_test(size=SIZE) as pilot:
        await settle(again, pilot)
        assert again.current_id == "checkout"
        assert again.composer.draft == expected
        assert again.composer.shown_text == "half written about @Kubernetes upgrade "
        await switch(again, pilot, "scratch")
        assert again.composer.draft == "scratch idea"


async def test_a_sent_draft_is_forgotten(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"hello there")
        await pilot.press("enter")
        await send_idle(app, pilot)
        await pilot.press("ctrl+q")
    assert load_drafts(drafts_path(runtime.config.database)) == {}


# --------------------------------------------------------------------------- history


async def test_up_walks_the_sessions_own_messages_after_a_restart(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"what about ")
        await pick(pilot, app, "sea")
        await pilot.press("enter")
        await send_idle(app, pilot)
        await pilot.press("ctrl+q")
    again = make_app(runtime)
    async with again.run_test(size=SIZE) as pilot:
        await settle(again, pilot)
        composer = again.composer
        await pilot.press("up")
        assert composer.draft == "what about " + mention("search-tuning", "Search relevance") + " "
        assert composer.shown_text == "what about @Search relevance "
        await pilot.press("up")
        assert composer.draft == "Can we merge shipping and billing?"
        await pilot.press("down", "down")
        assert composer.draft == ""
        # Another session: its own messages only.
        await switch(again, pilot, "scratch")
        await pilot.press("up")
        assert composer.draft == "remember: freeze on Friday"


# --------------------------------------------------------------------------- plain units


def test_drafts_file_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    path = drafts_path("/some/db.sqlite3", tmp_path)
    assert path != drafts_path("/other/db.sqlite3", tmp_path)
    save_drafts(path, {"a": "text \ud800 with a lone surrogate", "b": "  "})
    assert load_drafts(path) == {"a": "text \ud800 with a lone surrogate"}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    save_drafts(path, {})
    assert not path.exists()


@pytest.mark.parametrize(
    "content", ["", "{", "[]", '{"version": 9, "drafts": {}}', '{"version": 1, "drafts": [1]}']
)
def test_a_damaged_drafts_file_reads_as_none(tmp_path: Path, content: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(content, encoding="utf-8")
    assert load_drafts(path) == {}


async def test_a_failed_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = drafts_path("/db", tmp_path)
    keeper = DraftKeeper(path)
    keeper.set("s", "first")
    await keeper.flush()

    def disk_full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", disk_full)
        keeper.set("s", "second")
        with pytest.raises(OSError):
            await keeper.flush()
    assert json.loads(path.read_text())["drafts"] == {"s": "first"}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the temp file is gone
    await keeper.flush()  # the next flush tries again
    assert load_drafts(path) == {"s": "second"}


def test_rebuild_draft_turns_labels_back_into_mentions() -> None:
    refs = [("b1", "Beta"), ("b2", "Beta release")]
    text = "see @Beta release and @Beta, not @Gamma"
    rebuilt = rebuild_draft(text, refs)
    assert rebuilt.startswith(
        "see " + mention("b2", "Beta release") + " and " + mention("b1", "Beta")
    )
    assert "@Gamma" in rebuilt


async def test_up_reaches_messages_older_than_the_first_page(runtime: Runtime) -> None:
    from tests.ui.conftest import FIXED_NOW, MINUTE, exchange

    await runtime.store.create_session("long", cwd=None, created_at=FIXED_NOW - 9 * MINUTE)
    events = []
    for turn in range(1, 31):
        events += exchange(f"question {turn}", f"answer {turn}", turn, FIXED_NOW + turn * 1000)
    await runtime.store.append_batch("long", events)
    app = make_app(runtime, initial_session="long")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await workers_done(app)
        composer = app.composer
        assert len(composer.sent_history) == 12  # opening read only the newest page
        for _ in range(12):
            await pilot.press("up")
        assert composer.draft == "question 19"
        await pilot.press("up")  # past the oldest: the older messages are read
        await wait_for(pilot, lambda: len(composer.sent_history) == 30)
        assert composer.draft == "question 19"  # the walk keeps its place
        for _ in range(18):
            await pilot.press("up")
        assert composer.draft == "question 1"
        await pilot.press("down")
        assert composer.draft == "question 2"


async def test_a_draft_change_arriving_after_the_composer_is_gone_is_kept(
    runtime: Runtime,
) -> None:
    """Quitting removes the screen's widgets; a change message still queued then must
    neither crash the app (it did, now and then, in test_follow) nor be lost."""
    from textual.widgets import TextArea

    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        composer = app.composer
        composer.set_draft("last words")
        await composer.remove()
        app._draft_changed(TextArea.Changed(composer))
        assert app._drafts.get("checkout") == "last words"

"""The app on a replay (``dsh replay FILE``): the log's transcript, a banner saying it is a
read-only replay, every writing action dimmed and inert, and nothing written anywhere."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.config import DshConfig
from core.errors import StoreError
from core.logfile import export_jsonl
from stores import SqliteSessionStore
from tests.ui.conftest import FIXED_NOW, SIZE, seed
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle
from tui.app.app import WRITING_ACTIONS, DshApp
from tui.shared.replay import open_replay, replay_runtime

pytestmark = pytest.mark.timeout(60)


async def test_replay_is_read_only_and_writes_nothing(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "seed.sqlite3") as store:
        await seed(store)
        header = await store.read_header("k8s-upgrade")
        lines = list(export_jsonl(header, await store.read_events("k8s-upgrade")))
    log = tmp_path / "k8s.jsonl"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    before = await asyncio.to_thread(lambda: sorted(tmp_path.rglob("*")))

    database = tmp_path / "never.sqlite3"
    runtime = replay_runtime(DshConfig(database=database), await open_replay(str(log)))
    app = DshApp(runtime, now=lambda: FIXED_NOW, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "k8s-upgrade"
        assert "One minor version at a time" in screen_text(app)
        assert app.notice.visible_text.startswith(f"Replay of {log} (read-only)")
        for action in sorted(WRITING_ACTIONS):
            assert app.check_action(action, ()) is None, action
        await pilot.press(*"hello")
        await pilot.press("enter", "ctrl+n", "f2", "f8", "f4")
        await settle(app, pilot)
        assert [h.id for h in await runtime.store.list_headers()] == ["k8s-upgrade"]
        assert len(await runtime.store.read_events("k8s-upgrade")) == len(lines) - 1
    assert await asyncio.to_thread(lambda: sorted(tmp_path.rglob("*"))) == before
    assert not await asyncio.to_thread(database.exists)


async def test_replay_shows_unknown_events_and_says_the_composer_is_read_only(
    tmp_path: Path,
) -> None:
    from tests.cli.test_show_unknown import write_log
    from tui.app.transcript.cards import CollapsedItem

    log = await asyncio.to_thread(write_log, tmp_path / "odd.jsonl")
    runtime = replay_runtime(
        DshConfig(database=tmp_path / "never.sqlite3"), await open_replay(str(log))
    )
    app = DshApp(runtime, now=lambda: FIXED_NOW, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        placeholder = str(app.composer.placeholder)
        assert "read-only" in placeholder and "Message" not in placeholder
        # The newest page: the last turns with their unknown events, collapsed.
        odd = [w for w in app.transcript.item_widgets if w.has_class("unknown")]
        assert odd and all(isinstance(w, CollapsedItem) and not w.expanded for w in odd)
        assert "step/end event" in screen_text(app)
        # Paging to the start brings the earlier ones, never those before the compaction.
        while app.transcript.hidden_count:
            await app.transcript.load_earlier()
            await settle(app, pilot)
        shown = [w for w in app.transcript.item_widgets if w.has_class("unknown")]
        titles = [w.title_text().plain for w in shown if isinstance(w, CollapsedItem)]
        assert sum(t.startswith("step/start event") for t in titles) == 7
        assert not any("while compacting" in t or "session/opened" in t for t in titles)


async def test_replay_shows_the_newest_page_first_and_tells_a_bad_later_line(
    tmp_path: Path,
) -> None:
    """``dsh replay FILE`` (the app): a dsh log is shown from its newest page while the
    rest is checked in the background; a bad line found then is told in the notice line
    (file and line), and the page stays."""
    from tests.replays.corpus import large_log_lines
    from tests.ui.test_follow import wait_for

    lines = list(large_log_lines(3_000))
    lines[41] = lines[41].replace('"seq":40,', '"seq":41,')  # line 42: a seq out of place
    log = tmp_path / "bad-later.jsonl"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    store = await open_replay(str(log), lazy=True)
    runtime = replay_runtime(DshConfig(database=tmp_path / "never.sqlite3"), store)
    app = DshApp(runtime, now=lambda: FIXED_NOW, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "large"
        assert "question" in screen_text(app)
        await wait_for(pilot, lambda: "line 42" in app.notice.visible_text, 30)
        notice = app.notice.visible_text
        assert "bad-later.jsonl: line 42: expected seq 40" in notice
        assert "question" in screen_text(app)  # the page stays
        # An earlier page needs the whole log: reading it fails with the same words.
        while app.transcript.hidden_count > app.transcript.unread_count:
            await app.transcript.load_earlier()  # items read with the page, not mounted
        await app.transcript.load_earlier()
        await wait_for(pilot, lambda: "Could not read earlier messages" in app.notice.visible_text)
    assert not (tmp_path / "never.sqlite3").exists()


async def test_a_lazy_replay_pages_back_to_its_start(tmp_path: Path) -> None:
    from tests.replays.corpus import large_log_lines

    log = tmp_path / "large.jsonl"
    log.write_text("".join(line + "\n" for line in large_log_lines(600)), encoding="utf-8")
    eager = await open_replay(str(log))
    whole = (await eager.read_surface_events("large"))[2]
    runtime = replay_runtime(
        DshConfig(database=tmp_path / "never.sqlite3"), await open_replay(str(log), lazy=True)
    )
    app = DshApp(runtime, now=lambda: FIXED_NOW, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        transcript = app.transcript
        for _ in range(100):
            if not transcript.hidden_count:
                break
            await transcript.load_earlier()
            await settle(app, pilot)
        assert transcript.hidden_count == 0
        assert transcript.known_seqs == {e.seq for e in whole}
        assert len(transcript.item_widgets) == len(whole)


async def test_a_streamed_replay_is_the_same_read_only_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log above ``STREAM_ABOVE_BYTES`` is replayed from a temporary database: the
    same newest page and banner, every write refused, the database gone once closed."""
    import tempfile

    import tui.shared.replay as replay_module
    from stores.replay import ReplayDatabase

    async with await SqliteSessionStore.open(tmp_path / "seed.sqlite3") as store:
        await seed(store)
        header = await store.read_header("k8s-upgrade")
        lines = list(export_jsonl(header, await store.read_events("k8s-upgrade")))
    log = tmp_path / "k8s.jsonl"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(replay_module, "STREAM_ABOVE_BYTES", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(spool))

    replay = await open_replay(str(log), lazy=True)
    assert isinstance(replay, ReplayDatabase)
    try:
        runtime = replay_runtime(DshConfig(database=tmp_path / "never.sqlite3"), replay)
        app = DshApp(runtime, now=lambda: FIXED_NOW, cursor_blink=False, keep_drafts=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "k8s-upgrade"
            assert "One minor version at a time" in screen_text(app)
            assert app.notice.visible_text.startswith(f"Replay of {log} (read-only)")
            for action in sorted(WRITING_ACTIONS):
                assert app.check_action(action, ()) is None, action
            await pilot.press(*"hello", "enter")
            await settle(app, pilot)
        assert len(await replay.read_events("k8s-upgrade")) == len(lines) - 1
        with pytest.raises(StoreError, match=r"\(read-only\): nothing can be written"):
            await replay.create_session()
    finally:
        await replay.close()
    assert not await asyncio.to_thread(lambda: list(spool.iterdir()))

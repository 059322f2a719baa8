"""Ordinary faults of the store never crash the app nor touch the draft (issue 13).

A real SQLite file; "another process" is a second connection to it: a second store that
deletes or compacts the open session, or a plain ``sqlite3`` connection holding the write
lock (``BEGIN IMMEDIATE``) past the app's (short, for the test) busy timeout.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import stores.sqlite
import tui.app.follow
from core.config import DshConfig
from core.errors import SessionBusyError
from core.log import COMPACT_START
from core.providers.base import ProviderMessage, StreamEvent, TextDelta
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.providers.fake_openai import run_dsh
from tests.ui.conftest import SIZE, make_app, seed
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle, wait_for
from tui.app.app import DshApp
from tui.app.screens.modals import ConfirmScreen, RenameScreen
from tui.shared.runtime import Runtime, open_runtime

DRAFT = "half-written thought"


class SlowSummarizer:
    """Offline replies; summaries wait until the test lets them go."""

    name = "slow"
    model = "slow-1"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        yield TextDelta("ok")

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        self.started.set()
        await self.go.wait()
        return "the slow summary"

    async def aclose(self) -> None:
        return None


@pytest.fixture(autouse=True)
def _no_following(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests make a store call fail under the app (a session deleted, a lock held):
    the app must not learn of it first by following the database (tui/follow.py, tested
    on its own), or the failing call would never be made."""
    monkeypatch.setattr(tui.app.follow, "FOLLOW_INTERVAL_SECONDS", 3600.0)


async def compact_confirmed(app: DshApp, pilot: Any) -> None:
    """F4, then yes in its confirmation."""
    await pilot.press("f4")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    await pilot.click("#yes")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # A write that finds the lock taken gives up after about half a second, not 40.
    monkeypatch.setattr(stores.sqlite.connection, "_RETRY_WINDOW_S", 0.3)
    return tmp_path / "faults.sqlite3"


async def open_app_runtime(db: Path, provider: object) -> tuple[SqliteSessionStore, Runtime]:
    store = await SqliteSessionStore.open(db, busy_timeout=0.2)
    await seed(store)
    query = SessionQuery(store)
    rt = Runtime(DshConfig(database=db), store, query, SessionReferenceService(query), provider)  # type: ignore[arg-type]
    return store, rt


@pytest.fixture
async def rt(db: Path) -> AsyncIterator[Runtime]:
    store, runtime = await open_app_runtime(db, OfflineProvider())
    async with open_runtime(runtime.config, store=store, provider=runtime.provider) as opened:
        yield opened
    await store.close()


@pytest.fixture
async def elsewhere(db: Path, rt: Runtime) -> AsyncIterator[SqliteSessionStore]:
    """The same database through another connection, as another dsh process has it."""
    async with await SqliteSessionStore.open(db) as other:
        yield other


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Another process holds the database's write lock for the duration."""
    conn = sqlite3.connect(db, timeout=5, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def type_draft(app: DshApp, pilot: object) -> None:
    app.composer.focus()
    await pilot.press(*DRAFT)  # type: ignore[attr-defined]
    assert app.composer.draft == DRAFT


def still_fine(app: DshApp) -> None:
    assert app.is_running and app._exception is None
    assert app.composer.draft == DRAFT, "the draft is untouched"


async def test_rename_of_a_session_deleted_elsewhere(
    rt: Runtime, elsewhere: SqliteSessionStore
) -> None:
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        await type_draft(app, pilot)
        await elsewhere.delete_session("checkout")
        await pilot.press("f2")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press(*" v2", "enter")
        await wait_for(pilot, lambda: "no longer exists" in app.notice.visible_text)
        assert app.notice.visible_text.startswith("Could not rename the session:")
        await wait_for(pilot, lambda: "checkout" not in app.sidebar.visible_ids)
        still_fine(app)
    assert not app.return_code


async def test_compact_of_a_session_deleted_elsewhere(
    rt: Runtime, elsewhere: SqliteSessionStore
) -> None:
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await type_draft(app, pilot)
        await elsewhere.delete_session("checkout")
        await compact_confirmed(app, pilot)
        await wait_for(pilot, lambda: "no longer exists" in app.notice.visible_text)
        assert app.notice.visible_text.startswith("Could not compact the session:")
        await wait_for(pilot, lambda: "Compacting…" not in screen_text(app))
        still_fine(app)


async def test_new_session_while_another_process_holds_the_write_lock(
    rt: Runtime, db: Path
) -> None:
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await type_draft(app, pilot)
        before = len(await rt.store.list_headers())
        with write_lock_held(db):
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: "database is busy" in app.notice.visible_text)
        assert "Creating a session…" not in screen_text(app)
        assert app.notice.visible_text.startswith("Could not create a session:")
        still_fine(app)
        assert len(await rt.store.list_headers()) == before
        assert app.current_id == "checkout"
        # The lock is gone: the same key now works.
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: app.current_id not in (None, "checkout"))


async def test_send_while_the_write_lock_is_held_keeps_the_draft(rt: Runtime, db: Path) -> None:
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await type_draft(app, pilot)
        with write_lock_held(db):
            await pilot.press("enter")
            await wait_for(pilot, lambda: "database is busy" in app.notice.visible_text)
            await wait_for(pilot, lambda: not app.preparing)
        assert app.notice.visible_text.startswith("Could not send the message:")
        still_fine(app)
        assert len(await rt.store.read_events("checkout")) == 3, "nothing appended"


async def test_send_to_a_session_deleted_elsewhere_gives_the_draft_back(
    rt: Runtime, elsewhere: SqliteSessionStore
) -> None:
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await type_draft(app, pilot)
        await elsewhere.delete_session("checkout")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "no longer exists" in app.notice.visible_text)
        await wait_for(pilot, lambda: not app.preparing and app.composer.draft == DRAFT)
        assert app.notice.visible_text.startswith("Could not send the message:")
        await wait_for(pilot, lambda: "checkout" not in app.sidebar.visible_ids)
        still_fine(app)


async def test_dsh_compact_during_the_tuis_f4_is_refused_and_the_tui_compacts(
    db: Path, tmp_path: Path
) -> None:
    """``dsh compact`` (a real process) started during the TUI's own F4 is refused (the
    session's reply lease) and stores nothing; the app's compaction completes, draft intact."""
    provider = SlowSummarizer()
    store, runtime = await open_app_runtime(db, provider)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "TEXTUAL"))}
    env.update(DSH_DB=str(db), DSH_PROVIDER="offline", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    try:
        app = make_app(runtime)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await type_draft(app, pilot)
            await compact_confirmed(app, pilot)
            await asyncio.wait_for(provider.started.wait(), 10)
            code, out, err = await run_dsh(env, "compact", "checkout")
            assert code == 1 and not out, err
            assert err == f"dsh: error: {SessionBusyError.MESSAGE}\n"
            provider.go.set()
            await wait_for(pilot, lambda: app.chat is not None and not app.chat.busy)
            assert not app.notice.visible_text
            still_fine(app)
        events = await store.read_events("checkout")
        assert [e.type for e in events].count(COMPACT_START) == 1
        assert "the slow summary" in str([e.data for e in events])
    finally:
        await store.close()

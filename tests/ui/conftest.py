"""Deterministic UI fixtures: UTC, a frozen clock, no cursor blink, seeded temp databases."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

import core.log
from core.config import DshConfig
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    user_message,
)
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tui.app.app import DshApp
from tui.shared.runtime import Runtime, open_runtime

FIXED_NOW = 1_764_000_000_000  # 2025-11-24 16:00:00 UTC
MINUTE = 60_000
DAY = 86_400_000
SIZE = (100, 32)
SHOP = "/home/dev/shop"
INFRA = "/home/dev/infra"


@pytest.fixture(autouse=True, scope="session")
def _utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Drafts (platformdirs.user_state_dir) go to a temp dir, never the real one."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events the app writes get deterministic times (one second apart from FIXED_NOW)."""
    counter = itertools.count()
    monkeypatch.setattr(core.log, "now_ms", lambda: FIXED_NOW + 1000 * next(counter))


def exchange(question: str, answer: str, turn: int, at: int) -> list[NewEvent]:
    return [
        NewEvent(USER_MESSAGE, user_message(question, id=f"u{turn}-{at}"), "append", time=at),
        NewEvent(
            ASSISTANT_MESSAGE,
            {
                "turn": turn,
                "step": 0,
                "message": assistant_message(
                    answer, provider="offline", model="echo-1", id=f"a{turn}-{at}"
                ),
                "finish": "completed",
            },
            "append",
            time=at + 5000,
        ),
    ]


def title(text: str, at: int) -> NewEvent:
    return NewEvent(SESSION_TITLE, {"title": text, "source": {"kind": "user"}}, time=at)


async def seed(store: SqliteSessionStore) -> None:
    """Four sessions over two projects, fixed ids and times."""
    specs = [
        (
            "checkout",
            SHOP,
            2 * DAY,
            "Checkout redesign",
            [
                (
                    "Can we merge shipping and billing?",
                    "Yes: one address form with a **billing differs** toggle.",
                )
            ],
        ),
        (
            "k8s-upgrade",
            INFRA,
            3 * DAY,
            "Kubernetes upgrade",
            [
                (
                    "How do we get from 1.27 to 1.30?",
                    "One minor version at a time, with a soak day in between.",
                )
            ],
        ),
        (
            "search-tuning",
            SHOP,
            5 * DAY,
            "Search relevance",
            [
                (
                    "Why are exact matches ranked low?",
                    "The BM25 field boosts favour descriptions; boost the title field.",
                )
            ],
        ),
        ("scratch", None, 7 * DAY, None, [("remember: freeze on Friday", "Noted.")]),
    ]
    for session_id, cwd, age, name, turns in specs:
        created = FIXED_NOW - age
        await store.create_session(session_id, cwd=cwd, created_at=created)
        events: list[NewEvent] = [title(name, created + 1000)] if name else []
        for turn, (q, a) in enumerate(turns, start=1):
            events += exchange(q, a, turn, created + turn * MINUTE)
        await store.append_batch(session_id, events)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    store = await SqliteSessionStore.open(tmp_path / "ui.sqlite3")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def runtime(store: SqliteSessionStore, tmp_path: Path) -> AsyncIterator[Runtime]:
    await seed(store)
    config = DshConfig(database=tmp_path / "ui.sqlite3")
    async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:
        yield rt


def make_app(runtime: Runtime, **kwargs: object) -> DshApp:
    options: dict[str, object] = {"now": lambda: FIXED_NOW, "cwd": SHOP, "cursor_blink": False}
    options.update(kwargs)
    return DshApp(runtime, **options)  # type: ignore[arg-type]


async def workers_done(app: App[Any]) -> None:
    """Wait until every worker the app has started so far has ended. A worker of an
    exclusive group (the meter's, the follower's) is cancelled when a newer one starts:
    that is its normal end, not a failure (``wait_for_complete`` would raise for it)."""
    from textual.worker import WorkerCancelled

    for worker in list(app.workers):
        with contextlib.suppress(WorkerCancelled):
            await worker.wait()

"""``read_surface_tail`` (both stores) and ``SessionQuery.read_surface_tail``: the newest
items of the surface without folding the whole log (``dsh show --tail N``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stores import MemorySessionStore, SessionQuery, SqliteSessionStore
from stores.base import SessionStore
from tests.references.test_prepare_bounded import step, write


async def check(store: SessionStore, newest: int) -> None:
    query = SessionQuery(store)
    whole = await query.read_surface("src")
    tail = await query.read_surface_tail("src", newest)
    assert tail.session == whole.session
    assert tail.captured_through_seq == whole.captured_through_seq
    assert tail.events == whole.events[len(whole.events) - min(newest, len(whole.events)) :]
    header, last, rows = await store.read_surface_tail("src", newest)
    _, _, all_rows = await store.read_surface_rows("src")
    assert (header, last) == (whole.session, whole.captured_through_seq)
    assert rows == all_rows[len(all_rows) - min(newest, len(all_rows)) :]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), newest=st.integers(0, 12))
def test_the_tail_is_the_end_of_the_folded_surface(
    tmp_path_factory: Any, steps: list[tuple[str, Any]], newest: int
) -> None:
    path: Path = tmp_path_factory.mktemp("tail") / "dsh.sqlite3"

    async def run() -> None:
        memory = MemorySessionStore()
        await write(memory, "src", steps)
        await check(memory, newest)
        async with await SqliteSessionStore.open(path) as sqlite:
            await write(sqlite, "src", steps)
            await check(sqlite, newest)

    asyncio.run(run())


async def test_a_tail_after_a_recent_compaction_is_folded(store: SessionStore) -> None:
    """On every store kind (memory, SQLite, PostgreSQL)."""
    steps: list[tuple[str, Any]] = [("user", "q"), ("assistant", "a")] * 5
    steps.append(("compact", ("summary", 2, 9)))
    steps.append(("user", "after"))
    await write(store, "src", steps)
    for newest in (0, 1, 3, 12, 50):
        await check(store, newest)
    tail = await SessionQuery(store).read_surface_tail("src", 3)
    # seqs 2..9 became the checkpoint (10); the newest rows hold that replace, so the
    # surface was folded: the answer before it, the checkpoint, the newest question.
    assert [e.seq for e in tail.events] == [1, 10, 11]
    with pytest.raises(ValueError):
        await store.read_surface_tail("src", -1)


async def test_a_negative_count_is_refused(db_path: Path) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s")
        with pytest.raises(ValueError):
            await store.read_surface_tail("s", -1)
        with pytest.raises(ValueError):
            await MemorySessionStore().read_surface_tail("s", -1)

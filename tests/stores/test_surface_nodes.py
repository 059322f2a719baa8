"""``read_surface_nodes`` (every store) and the reads built on it (``SessionQuery``'s
``read_surface_window`` and ``read_surface_seqs``): the folded surface as the store keeps
it, exactly what folding every surface row gives, read without that fold (opening a long
session costs its page and its nodes' seqs, not its history)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import InvalidEventError, SessionNotFoundError
from core.log import Event, NewEvent, Replace
from core.surface import fold_surface
from stores import MemorySessionStore, SessionQuery, SqliteSessionStore, SurfaceSnapshot
from stores.base import SessionStore
from stores.query import unknown_floor
from stores.sqlite import _NEWEST_REPLACES_SQL, _NODE_SEQS_SQL
from tests.references.test_prepare_bounded import step, write

MSG = "user/message"
UNKNOWN = "plugin/unheard-of"


async def folded(store: SessionStore, sid: str) -> tuple[Any, ...]:
    """What ``read_surface_nodes`` must give: the fold of every surface row."""
    header, last, rows = await store.read_surface_rows(sid)
    return header, last, tuple(row.seq for row in fold_surface(rows)), unknown_floor(rows)


async def folded_surface(
    store: SessionStore, sid: str
) -> tuple[SurfaceSnapshot, tuple[Event, ...]]:
    """What ``read_surface_with_unknown`` must give: the fold of every surface event and
    the unknown events after the newest replace."""
    header, last, events = await store.read_surface_events(sid)
    floor = unknown_floor(events)
    unknown = (
        [] if last is None or last <= floor else await store.read_unknown_events(sid, floor, last)
    )
    return SurfaceSnapshot(header, last, tuple(fold_surface(events))), tuple(unknown)


def message(text: str, op: Any = "append", sources: list[int] | None = None) -> NewEvent:
    return NewEvent(MSG, {"role": "user", "content": text}, op, sources)


async def test_the_nodes_are_the_fold_of_the_rows(store: SessionStore) -> None:
    """On every store kind: replaces in the middle, one shadowing an older replace (the
    newest replace is then the floor, not the first), unknown and log-only events."""
    header = await store.create_session("s", created_at=1)
    assert await store.read_surface_nodes("s") == (header, None, (), -1)
    await store.append("s", UNKNOWN, {"x": 1})
    assert await store.read_surface_nodes("s") == (header, 0, (), -1)
    steps: list[list[NewEvent]] = [
        [message("a"), message("b"), message("c")],  # 1 2 3
        [NewEvent("assistant/chunk", {"turn": 1, "chunk": {"text": "t"}})],  # 4
        [message("r1", Replace(2, 3), [2, 3])],  # 5: [1, 5]
        [message("d"), NewEvent(UNKNOWN, {"y": 2}), message("e")],  # 6 7 8
        [message("r2", Replace(5, 6), [5, 6, 2, 3])],  # 9 shadows 5: [1, 9, 8]
        [message("f")],  # 10
        [message("r3", Replace(1, 1), [1])],  # 11: [11, 9, 8, 10]
    ]
    for batch in steps:
        await store.append_batch("s", batch)
        assert await store.read_surface_nodes("s") == await folded(store, "s")
    assert await store.read_surface_nodes("s") == (header, 11, (11, 9, 8, 10), 11)
    with pytest.raises(SessionNotFoundError):
        await store.read_surface_nodes("nope")


async def test_a_rejected_replace_leaves_the_nodes_as_they_were(store: SessionStore) -> None:
    await store.create_session("s", created_at=1)
    await store.append_batch("s", [message("a"), message("b"), message("c")])
    before = await store.read_surface_nodes("s")
    bad = [message("r", Replace(0, 1), [0, 1]), message("r", Replace(0, 2), [0, 2])]
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", bad)  # the second refers to 0, shadowed by the first
    assert await store.read_surface_nodes("s") == before == await folded(store, "s")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30))
def test_the_nodes_are_the_fold_on_random_logs(
    tmp_path_factory: Any, steps: list[tuple[str, Any]]
) -> None:
    """Compactions, replaces and batches that replace their own appends (memory and
    SQLite; PostgreSQL by the fixed log above and by tests/stores/test_store_agreement)."""
    path: Path = tmp_path_factory.mktemp("nodes") / "dsh.sqlite3"

    async def run() -> None:
        memory = MemorySessionStore()
        await write(memory, "src", steps)
        expected = await folded(memory, "src")
        assert await memory.read_surface_nodes("src") == expected
        surface = await folded_surface(memory, "src")
        assert await SessionQuery(memory).read_surface_with_unknown("src") == surface
        async with await SqliteSessionStore.open(path) as sqlite:
            await write(sqlite, "src", steps)
            assert await sqlite.read_surface_nodes("src") == expected
            surface = await folded_surface(sqlite, "src")  # (its own message ids and times)
            assert await SessionQuery(sqlite).read_surface_with_unknown("src") == surface
            assert await SessionQuery(sqlite).read_surface("src") == surface[0]

    asyncio.run(run())


async def test_a_window_reads_no_surface_row(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window and the seqs come from ``read_surface_nodes``: the reads of every
    surface row (whose fold grew with the session) are not used, also when the newest
    rows hold a replace (``read_surface_page`` then reads the whole window)."""
    await store.create_session("s", created_at=1)
    await store.append_batch("s", [message(str(i)) for i in range(6)])
    await store.append_batch("s", [NewEvent(UNKNOWN, {}), message("r", Replace(1, 3), [1, 2, 3])])
    query = SessionQuery(store)
    window = await query.read_surface_window("s", 2)
    seqs = await query.read_surface_seqs("s")
    page = await query.read_surface_page("s", 2)
    surface = await folded_surface(store, "s")

    def forbidden(*_args: Any) -> Any:
        raise AssertionError("read every surface row")

    for name in ("read_surface_rows", "read_surface_events", "read_surface_outline"):
        monkeypatch.setattr(store, name, forbidden)
    assert await query.read_surface_window("s", 2) == window
    assert await query.read_surface_seqs("s") == seqs == ((0, 7, 4, 5), 7)
    assert await query.read_surface_page("s", 2) == page == window
    assert [e.seq for e in window.events] == [4, 5]
    assert window.unknown_floor == 7
    # The whole surface too (what a reply sends the model), and with its unknown events
    # (what `dsh show` prints).
    assert await query.read_surface_with_unknown("s") == surface
    assert await query.read_surface("s") == surface[0]
    assert [e.seq for e in surface[0].events] == [0, 7, 4, 5]


def plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (1,)).fetchall()]


async def test_sqlite_reads_the_nodes_and_the_replaces_index_only(db_path: Path) -> None:
    """The plans that keep ``read_surface_nodes`` off the events: the nodes are one range
    of surface_nodes' primary key, the newest replace the end of ``events_replaces``
    (SQLite uses a partial index only when the query's WHERE implies the index's; the
    primary key of events would be a walk of every event of the session)."""
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [message(str(i)) for i in range(4)])
        await store.append("s", MSG, {"n": 1}, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    with sqlite3.connect(db_path) as conn:
        assert plan(conn, _NODE_SEQS_SQL) == ["SEARCH surface_nodes USING PRIMARY KEY (session=?)"]
        assert plan(conn, _NEWEST_REPLACES_SQL) == [
            "SEARCH events USING INDEX events_replaces (session=?)"
        ]
    conn.close()


async def test_sqlite_upgrade_indexes_the_replaces(db_path: Path) -> None:
    """A database of schema v7 (no ``events_replaces``) gains the index when opened, and
    the newest replace is then read from it."""
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [message(str(i)) for i in range(4)])
        await store.append("s", MSG, {"n": 1}, surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP INDEX events_replaces")
        conn.execute("DROP TRIGGER search_messages_linked")  # the rest of schema v8
        conn.execute("DROP INDEX events_marks")  # schema v11's
        conn.execute(  # schema v13 dropped it
            "CREATE TRIGGER search_messages_insert AFTER INSERT ON search_messages BEGIN "
            "INSERT INTO search_index (rowid, text) VALUES (new.id, new.text); END"
        )
        conn.execute("DROP TRIGGER short_grams_reused")  # schema v14's
        for table in ("short_grams", "short_grams_state", "short_grams_loose"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("PRAGMA user_version = 7")
    conn.close()
    async with await SqliteSessionStore.open(db_path) as store:
        assert (await store.read_surface_nodes("s"))[2:] == ((0, 4, 3), 4)
    with sqlite3.connect(db_path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema")}
        assert "events_replaces" in names
    conn.close()

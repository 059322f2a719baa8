"""Issue 32: the upgrade to schema v11 takes each ``session/profile`` and ``session/fork``
event an older dsh packed (a type it did not know) out of its pack, so that
``read_latest_events`` finds it through ``events_marks``; issue 33's upgrade to v12 does
the same for ``session/source``. ``fixtures/v10.sqlite3`` was written by the whole dsh of
820326b (``make_v10_fixture``), ``fixtures/v11.sqlite3`` by that of 2353de2
(``make_v11_fixture``); upgraded, each must read exactly as a fresh store given the same
sessions: events, unknown events, marks, surface, search."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Collection, Sequence
from pathlib import Path

from core.log import (
    SESSION_FORK,
    SESSION_MARK_TYPES,
    SESSION_PROFILE,
    SESSION_SOURCE,
    NewEvent,
    SessionHeader,
)
from stores import SqliteSessionStore
from stores.sqlite import KIND_PACK, SCHEMA_VERSION, _pack_types, latest_events_sql
from tests.stores.fixtures import make_v11_fixture as v11
from tests.stores.fixtures.make_v10_fixture import DB, SESSIONS, Item
from tests.stores.test_sqlite_migration import assert_tails_fold

MARKS = (SESSION_PROFILE, SESSION_FORK)
IDS = [sid for sid, _ in SESSIONS]


async def _fresh(
    path: Path,
    sessions: Sequence[tuple[str, list[list[Item]]]] = SESSIONS,
    imported: Collection[str] = (),
) -> None:
    """A fixture's sessions written by today's store (``imported``: by ``import_session``,
    as the fixture's maker wrote them)."""
    async with await SqliteSessionStore.open(path) as store:
        for n, (sid, batches) in enumerate(sessions):
            if sid in imported:
                (batch,) = batches
                new = [NewEvent(t, d, op, None, 10 + k) for k, (t, d, op) in enumerate(batch)]
                await store.import_session(SessionHeader(sid, n + 1), new)
                continue
            await store.create_session(sid, created_at=n + 1)
            time = 10
            for batch in batches:
                new = [NewEvent(t, d, op, None, time + k) for k, (t, d, op) in enumerate(batch)]
                await store.append_batch(sid, new)
                time += len(batch)


def _packed_marks(path: Path, marks: Collection[str] = MARKS) -> list[tuple[bytes, int]]:
    """The packs holding one of ``marks``: their sessions' ids and first seqs."""
    with sqlite3.connect(path) as conn:
        return [
            (sid, seq)
            for sid, seq, blob in conn.execute(
                "SELECT s.id, e.seq, e.data FROM events AS e JOIN sessions AS s "
                f"ON s.key = e.session WHERE e.kind = {KIND_PACK} ORDER BY s.id, e.seq"
            )
            if set(marks) & set(_pack_types(blob))
        ]


async def _assert_reads_as(
    store: SqliteSessionStore, want: SqliteSessionStore, ids: list[str]
) -> None:
    """``store`` (upgraded) reads as ``want`` (fresh): every session's events, unknown
    events, folded tails, and the latest of every mark type."""
    for sid in ids:
        events = await store.read_events(sid)
        assert events == await want.read_events(sid), sid
        seqs = [e.seq for e in events]
        assert await store.read_events_at(sid, seqs[::-1]) == events[::-1]
        assert await store.read_unknown_events(sid) == await want.read_unknown_events(sid)
        await assert_tails_fold(store, sid)
    for type_ in SESSION_MARK_TYPES:
        found = await store.read_latest_events(type_)
        assert found == await want.read_latest_events(type_)
        assert found == await store.read_latest_events(type_, ids)
        for sid in ids:
            marks = [e for e in await store.read_events(sid) if e.type == type_]
            assert found.get(sid) == (marks[-1] if marks else None)


def _assert_marks_alone(path: Path, count: int) -> None:
    """Every mark of the file is a row of its own (``count`` of them), read through
    ``events_marks``; the file is whole."""
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        rows = conn.execute("SELECT type, n, kind FROM events").fetchall()
        marks = [(n, kind) for type_, n, kind in rows if type_.decode() in SESSION_MARK_TYPES]
        assert marks == [(1, 0)] * count
        for type_ in SESSION_MARK_TYPES:
            plan = conn.execute("EXPLAIN QUERY PLAN " + latest_events_sql(type_)).fetchall()
            assert any("USING INDEX events_marks" in row[3] for row in plan), plan
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")


async def test_a_v10_database_with_packed_marks_reads_as_a_fresh_store(tmp_path: Path) -> None:
    path = tmp_path / "v10.sqlite3"
    shutil.copyfile(DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (10,)
    # What the upgrade must take apart: the fork packed with the event after it, profiles
    # inside chunk runs linked to their replies, and after a turn's end.
    assert _packed_marks(path) == [(b"forked", 0), (b"forked", 18), (b"paced", 1), (b"paced", 15)]
    fresh = tmp_path / "fresh.sqlite3"
    await _fresh(fresh)
    async with (
        await SqliteSessionStore.open(path) as store,
        await SqliteSessionStore.open(fresh) as want,
    ):
        await _assert_reads_as(store, want, IDS)
        assert await store.read_latest_events(SESSION_SOURCE) == {}
        assert {
            sid: e.data["profile"]
            for sid, e in (await store.read_latest_events(SESSION_PROFILE)).items()
        } == {"forked": "switched in turn 2", "paced": "after the turn", "alone": "large"}
        assert (await store.read_latest_events(SESSION_FORK))["forked"].seq == 0
        for query in ("word", "continue", "stream"):
            hits = await store.search_messages(query, limit=20)
            assert hits == await want.search_messages(query, limit=20), query
    assert _packed_marks(path) == []
    _assert_marks_alone(path, 5)  # a fork, four profiles: each alone
    # Opened again: nothing to upgrade, the same marks.
    async with await SqliteSessionStore.open(path) as store:
        assert (await store.read_latest_events(SESSION_FORK))["forked"].seq == 0


async def test_a_damaged_pack_is_left_as_it_is(tmp_path: Path) -> None:
    """A pack that does not decode stays (its readers name the damage); the upgrade takes
    the other packs apart."""
    path = tmp_path / "v10.sqlite3"
    shutil.copyfile(DB, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET data = x'789c00' WHERE seq = 15 AND session = "
            "(SELECT key FROM sessions WHERE id = CAST('paced' AS BLOB))"
        )
    async with await SqliteSessionStore.open(path) as store:
        found = await store.read_latest_events(SESSION_PROFILE)
        assert found["paced"].data["profile"] == "while streaming"  # the damaged one's gone
        assert found["forked"].data["profile"] == "switched in turn 2"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        packs = conn.execute(f"SELECT count(*) FROM events WHERE kind = {KIND_PACK} AND seq = 15")
        assert packs.fetchone() == (1,)


async def test_a_v11_database_with_packed_sources_reads_as_a_fresh_store(tmp_path: Path) -> None:
    """Issue 33: v11 packed ``session/source`` (an unknown type to it) as it packed
    profiles before v11; the upgrade to v12 takes each out, as v11's did for its types."""
    path = tmp_path / "v11.sqlite3"
    shutil.copyfile(v11.DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (11,)
    # A source at seq 0 packed with the tool's records (imported), inside a chunk run
    # linked to its reply, after a turn's end, after a fork and a profile (alone already).
    assert _packed_marks(path, SESSION_MARK_TYPES) == [
        ("claude 🚀".encode(), 0),
        (b"codex", 0),
        (b"codex", 4),
        (b"codex", 18),
        (b"forked", 2),
        (b"forked", 13),
    ]
    fresh = tmp_path / "fresh.sqlite3"
    await _fresh(fresh, v11.SESSIONS, v11.IMPORTED)
    ids = [sid for sid, _ in v11.SESSIONS]
    async with (
        await SqliteSessionStore.open(path) as store,
        await SqliteSessionStore.open(fresh) as want,
    ):
        await _assert_reads_as(store, want, ids)
        sources = await store.read_latest_events(SESSION_SOURCE)
        assert {sid: (e.seq, e.data["id"]) for sid, e in sources.items()} == {
            "claude 🚀": (0, "9f0c\u2028-\x1b[31m"),
            "codex": (19, "rollout-2"),
            "forked": (14, "conv-2"),
            "big": (1, "big"),
        }
        assert (await store.read_latest_events(SESSION_FORK))["forked"].seq == 0
        assert (await store.read_latest_events(SESSION_PROFILE))["forked"].seq == 7
        for query in ("import", "word", "and on"):
            hits = await store.search_messages(query, limit=20)
            assert hits == await want.search_messages(query, limit=20), query
    assert _packed_marks(path, SESSION_MARK_TYPES) == []
    _assert_marks_alone(path, 10)  # seven sources, a fork, two profiles: each alone
    async with await SqliteSessionStore.open(path) as store:  # nothing more to upgrade
        assert await store.read_latest_events(SESSION_SOURCE) == sources


async def test_a_damaged_pack_of_a_source_is_left_as_it_is(tmp_path: Path) -> None:
    """As at v11: the pack that does not decode stays, the others are taken apart."""
    path = tmp_path / "v11.sqlite3"
    shutil.copyfile(v11.DB, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET data = x'789c00' WHERE seq = 18 AND session = "
            "(SELECT key FROM sessions WHERE id = CAST('codex' AS BLOB))"
        )
    async with await SqliteSessionStore.open(path) as store:
        found = await store.read_latest_events(SESSION_SOURCE)
        assert found["codex"].seq == 7  # the damaged one's gone
        assert found["codex"].data["note"] == "while streaming"
        assert found["forked"].seq == 14
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        packs = conn.execute(f"SELECT count(*) FROM events WHERE kind = {KIND_PACK} AND seq = 18")
        assert packs.fetchone() == (1,)

"""SPEC §4.1 (issue 31): the upgrade to schema v10 writes each stored surrogate pair as
its character. ``fixtures/v9.sqlite3`` was written by the whole dsh of dcbf3f6, which kept
pairs apart (``make_v9_fixture``); upgraded, it must read exactly as a fresh store given
the same sessions: events, ids, titles, projections and sums, search."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

from core.errors import SessionExistsError
from core.log import NewEvent
from core.surrogates import merge_surrogate_pairs
from stores import SqliteSessionStore
from stores.sqlite import SCHEMA_VERSION, _text
from tests.stores.fixtures.make_v9_fixture import DB, ROCKET, SESSIONS
from tests.stores.test_sqlite_migration import assert_tails_fold

_ESCAPED_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


async def _fresh(path: Path) -> list[str]:
    """The fixture's sessions written by today's store; the ids it knows them by."""
    ids = []
    # An id already whole keeps its name; one spelt apart that merges into it becomes
    # "(2)" (as the upgrade names it): the whole ones are created first.
    order = sorted(enumerate(SESSIONS), key=lambda s: merge_surrogate_pairs(s[1][0]) != s[1][0])
    async with await SqliteSessionStore.open(path) as store:
        for n, (sid, cwd, events) in order:
            try:
                header = await store.create_session(sid, cwd=cwd, created_at=n + 1)
            except SessionExistsError:
                header = await store.create_session("🚀 (2)", cwd=cwd, created_at=n + 1)
            batch = [NewEvent(t, d, op, None, 10 + k) for k, (t, d, op) in enumerate(events)]
            await store.append_batch(header.id, batch)
            ids.append(header.id)
    return ids


def _rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        return {
            "projections": conn.execute(
                "SELECT s.id, e.seq, e.projection FROM events AS e JOIN sessions AS s "
                "ON s.key = e.session WHERE e.kind = 1 ORDER BY s.id, e.seq"
            ).fetchall(),
            "sums": conn.execute(
                "SELECT s.id, u.messages, u.bytes FROM surface_sums AS u JOIN sessions AS s "
                "ON s.key = u.session ORDER BY s.id"
            ).fetchall(),
            "search": conn.execute(
                "SELECT s.id, m.seq, m.text FROM search_messages AS m JOIN sessions AS s "
                "ON s.key = m.session ORDER BY s.id, m.seq"
            ).fetchall(),
        }


async def test_a_v9_database_with_pairs_apart_reads_as_a_fresh_store(tmp_path: Path) -> None:
    path = tmp_path / "v9.sqlite3"
    shutil.copyfile(DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (9,)
        # The fixture holds what the upgrade must rewrite: pairs apart in ids (bytes),
        # in JSON (escaped apart), in linked chunk runs (lengths counted apart).
        assert conn.execute("SELECT count(*) FROM sessions WHERE instr(id, x'eda0bd')").fetchone()[
            0
        ]
        assert conn.execute("SELECT count(*) FROM events WHERE kind = 3").fetchone()[0] == 2
    fresh = tmp_path / "fresh.sqlite3"
    ids = await _fresh(fresh)
    assert ids == ["plain", "🚀", "mig-hé🚀", "🚀 (2)"]
    async with (
        await SqliteSessionStore.open(path) as store,
        await SqliteSessionStore.open(fresh) as want,
    ):
        assert [(h.id, h.cwd) for h in await store.list_headers()] == [
            (h.id, h.cwd) for h in await want.list_headers()
        ]
        for sid in ids:
            events = await store.read_events(sid)
            assert events == await want.read_events(sid), sid
            seqs = [e.seq for e in events]
            assert await store.read_events_at(sid, seqs[::-1]) == events[::-1]
            assert await store.read_unknown_events(sid) == await want.read_unknown_events(sid)
            await assert_tails_fold(store, sid)
        assert (await store.read_titles())["mig-hé🚀"].title == "Launch 🚀"
        # Named as a user types it, or as JSON escaped it.
        assert await store.read_header(f"mig-hé{ROCKET}") == await store.read_header("mig-hé🚀")
        for query in ("🚀", "moon 🚀 and", "launch"):
            hits = await store.search_messages(query, limit=20)
            assert hits == await want.search_messages(query, limit=20), query
        assert len(await store.search_messages("🚀", limit=20)) == 4
        events = await store.read_events("mig-hé🚀")
        assert events[0].data["content"][0]["text"] == "rocket 🚀 launch, lone \ud800 stays"
        assert [e.data["chunk"]["text"] for e in events[2:6]] == [
            merge_surrogate_pairs(t)
            for t in [
                "We are going ",
                "to the moon \ud83d",
                "\ude80 and back, ",
                "safely home again.",
            ]
        ]
    got, expected = _rows(path), _rows(fresh)
    assert got["projections"] == expected["projections"]
    assert got["sums"] == expected["sums"]
    assert got["search"] == expected["search"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        for (data,) in conn.execute("SELECT data FROM events WHERE kind <> 3"):
            assert not _ESCAPED_PAIR.search(
                _text(data) if not isinstance(data, bytes) or data[:1] != b"\x01" else ""
            )
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")

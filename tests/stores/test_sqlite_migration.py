"""Upgrading a database written by the previous release (schema v2, dsh 1d17249).

``fixtures/v2.sqlite3`` was written by 1d17249's own store and ``v2.expected.json`` holds
what that store read back (``fixtures/make_v2_fixture.py`` made both). Opening the file
with today's store migrates it; every event must read back byte-identical.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from core.jsoncodec import dumps_js
from core.log import NewEvent, surface_op_to_json
from stores import SqliteSessionStore
from stores.sqlite import SCHEMA_VERSION
from tests.stores.fixtures.make_v2_fixture import DB, EXPECTED, IDS, event_json

MSG = "user/message"


def expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXPECTED.read_text(encoding="ascii"))
    return data


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "old.sqlite3"
    shutil.copyfile(DB, target)
    return target


async def test_a_v2_database_upgrades_with_every_event_byte_identical(tmp_path: Path) -> None:
    path = copy_fixture(tmp_path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    want = expected()
    async with await SqliteSessionStore.open(path) as store:
        headers = [[h.id, h.created_at, h.cwd] for h in await store.list_headers()]
        assert repr(headers) == want["headers"]
        for k, sid in enumerate(IDS):
            events = await store.read_events(sid)
            assert repr([event_json(e) for e in events]) == want["events"][k]
            # Every event is still addressable by its seq.
            seqs = [e.seq for e in events]
            again = await store.read_events_at(sid, seqs[::-1])
            assert again == events[::-1]
            _header, last, surface = await store.read_surface_events(sid)
            assert last == seqs[-1]
            assert surface == [e for e in events if e.surface_op is not None]
        titles = await store.read_titles()
        rows = sorted((sid, t.title, t.event_seq, t.updated_at) for sid, t in titles.items())
        assert repr(rows) == want["titles"]
        times = sorted((await store.read_last_event_times()).items())
        assert repr(times) == want["last_event_times"]
        # The upgraded session takes new events after its old ones.
        count = len(await store.read_events(IDS[0]))
        event = await store.append(IDS[0], MSG, {"after": "upgrade"}, surface_op="append")
        assert event.seq == count
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        # The reply lease moved with its session.
        leases = (
            "SELECT s.id, r.owner FROM reply_leases AS r JOIN sessions AS s ON s.key = r.session"
        )
        assert conn.execute(leases).fetchall() == [(b"plain", "owner-1")]
    # Reopening does not migrate again, and the data is the same.
    async with await SqliteSessionStore.open(path) as store:
        events = await store.read_events(IDS[1])
        assert repr([event_json(e) for e in events]) == want["events"][1]


async def test_new_events_after_an_upgrade_read_back_like_a_fresh_store(tmp_path: Path) -> None:
    """Chunks appended after the upgrade are packed; the old ones stay one per row."""
    path = copy_fixture(tmp_path)
    sid = IDS[2]
    batch = [
        NewEvent("assistant/chunk", {"turn": 9, "chunk": {"text": f"t{i}"}}, time=5 + i)
        for i in range(30)
    ]
    async with await SqliteSessionStore.open(path) as store:
        before = await store.read_events(sid)
        written = await store.append_batch(sid, batch)
        after = await store.read_events(sid)
    assert after[: len(before)] == before
    assert after[len(before) :] == written
    assert [dumps_js(e.data) for e in written] == [dumps_js(e.data) for e in batch]
    assert [surface_op_to_json(e.surface_op) for e in written] == [None] * 30
    with sqlite3.connect(path) as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM events WHERE session = "
            "(SELECT key FROM sessions WHERE id = ?) AND seq >= ?",
            (sid.encode("utf-8", "surrogatepass"), len(before)),
        ).fetchone()
    assert rows == 1  # the 30 chunks are one packed row

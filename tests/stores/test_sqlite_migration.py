"""Upgrading a database written by the previous release (schema v2, dsh 1d17249).

``fixtures/v2.sqlite3`` was written by 1d17249's own store and ``v2.expected.json`` holds
what that store read back (``fixtures/make_v2_fixture.py`` made both). Opening the file
with today's store migrates it; every event must read back byte-identical.
"""

from __future__ import annotations

import ast
import json
import os
import pty
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stores.sqlite as sqlite_module
from core.jsoncodec import dumps_js
from core.log import NewEvent, Replace, surface_op_to_json
from core.query import message_tail
from core.surface import fold_surface
from core.surrogates import merge_escaped_pairs, merge_surrogate_pairs
from stores import SqliteSessionStore
from stores.sqlite import SCHEMA_VERSION
from tests.stores.fixtures.make_v2_fixture import DB, EXPECTED, IDS, event_json
from tests.stores.fixtures.make_v3_fixture import DB as V3_DB
from tests.stores.fixtures.make_v3_fixture import EXPECTED as V3_EXPECTED
from tests.stores.fixtures.make_v3_fixture import IDS as V3_IDS
from tests.stores.fixtures.make_v6_fixture import hit_json
from tests.stores.fixtures.make_v8_fixture import DB as V8_DB
from tests.stores.fixtures.make_v8_fixture import EXPECTED as V8_EXPECTED
from tests.stores.fixtures.make_v8_fixture import QUERIES as V8_QUERIES

MSG = "user/message"


def merged(expected_repr: str) -> str:
    """An expectation written by an older store (a ``repr``), as this one reads it: a
    surrogate pair is its character (SPEC 4.1, the schema v10 upgrade), in a str and
    escaped in a JSON text (an event's data)."""

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("{") and value.endswith("}"):
                value = merge_escaped_pairs(value)
            return merge_surrogate_pairs(value)
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, tuple):
            return tuple(fix(v) for v in value)
        if isinstance(value, dict):
            return {fix(k): fix(v) for k, v in value.items()}
        return value

    return repr(fix(ast.literal_eval(expected_repr)))


def merged_hex(id_hex: str) -> str:
    """A session id's ``surrogatepass`` bytes in hex, its surrogate pairs merged."""
    text = bytes.fromhex(id_hex).decode("utf-8", "surrogatepass")
    return merge_surrogate_pairs(text).encode("utf-8", "surrogatepass").hex()


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
        assert repr(headers) == merged(want["headers"])
        for k, sid in enumerate(IDS):
            events = await store.read_events(sid)
            assert repr([event_json(e) for e in events]) == merged(want["events"][k])
            # Every event is still addressable by its seq.
            seqs = [e.seq for e in events]
            again = await store.read_events_at(sid, seqs[::-1])
            assert again == events[::-1]
            _header, last, surface = await store.read_surface_events(sid)
            assert last == seqs[-1]
            assert surface == [e for e in events if e.surface_op is not None]
        titles = await store.read_titles()
        rows = sorted((sid, t.title, t.event_seq, t.updated_at) for sid, t in titles.items())
        assert repr(rows) == merged(want["titles"])
        times = sorted((await store.read_last_event_times()).items())
        assert repr(times) == merged(want["last_event_times"])
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
        assert repr([event_json(e) for e in events]) == merged(want["events"][1])


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


# ---------------------------------------------------------------- schema v3 (99902a9)


def copy_v3(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "v3.sqlite3"
    shutil.copyfile(V3_DB, target)
    return target


async def assert_tails_fold(store: SqliteSessionStore, sid: str) -> None:
    """The kept surface nodes and sums give exactly the tail a fold of every row does."""
    _, last, rows = await store.read_surface_outline(sid)
    nodes = [(row.seq, row.projection) for row in fold_surface(rows) if row.projection >= 0]
    assert nodes  # every fixture session has messages
    for budget in (0, 5, 50, 300, 1_000, 3_000, 10_000, 100_000):
        _, last_seq, tail = await store.read_message_tail(sid, budget)
        assert last_seq == last
        assert tail == message_tail(nodes, budget), (sid, budget)


async def assert_reads_as_written(store: SqliteSessionStore, want: dict[str, Any]) -> None:
    """The v3 fixture's sessions (also the v8 fixture's) read back as the old store read
    them (``make_v3_fixture.write_fixture``): headers, every event, by seq in reverse,
    the surface, and tails that agree with a fold."""
    headers = [[h.id, h.created_at, h.cwd] for h in await store.list_headers()]
    assert repr(headers) == merged(want["headers"])
    for k, sid in enumerate(V3_IDS):
        events = await store.read_events(sid)
        assert repr([event_json(e) for e in events]) == merged(want["events"][k])
        seqs = [e.seq for e in events]
        assert await store.read_events_at(sid, seqs[::-1]) == events[::-1]
        surface = (await store.read_surface_events(sid))[2]
        assert repr([e.seq for e in surface]) == want["surfaces"][k]
        await assert_tails_fold(store, sid)


async def test_a_v3_database_upgrades_with_every_event_byte_identical(tmp_path: Path) -> None:
    """A database written by the store of 99902a9 (schema v3: packs, compressed payloads,
    compactions and an edit) opens with every event byte-identical, and its surfaces are
    folded into the nodes prepare reads."""
    path = copy_v3(tmp_path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (3,)
    want = json.loads(V3_EXPECTED.read_text(encoding="ascii"))
    async with await SqliteSessionStore.open(path) as store:
        await assert_reads_as_written(store, want)
        # New events (a compaction in the same batch as the appends it shadows) keep
        # the nodes in step.
        sid = V3_IDS[1]
        nodes = [row.seq for row in fold_surface((await store.read_surface_rows(sid))[2])]
        first = len(await store.read_events(sid))
        batch = [
            NewEvent(MSG, {"id": "n1", "role": "user", "content": []}, "append"),
            NewEvent(
                MSG,
                {"id": "n2", "role": "user", "content": [{"type": "text", "text": "again"}]},
                Replace(nodes[2], first),
                [*nodes[2:], first],
            ),
        ]
        await store.append_batch(sid, batch)
        await assert_tails_fold(store, sid)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_a_v8_database_upgrades_with_every_event_byte_identical(tmp_path: Path) -> None:
    """A database written by the store of 123748c (schema v8: the last release; rows
    compressed against the preset dictionary, messages linked to their search rows,
    chunk runs linked to their replies) opens with every event byte-identical and the
    same search hits, and the upgrade to v9 drops ``events_surface``."""
    path = tmp_path / "v8.sqlite3"
    shutil.copyfile(V8_DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (8,)
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # INCREMENTAL
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        (linked,) = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 1 AND substr(data, 1, 1) = x'01'"
        ).fetchone()
        assert linked > 0  # the fixture holds linked rows to upgrade
        assert conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'events_surface'").fetchone()
    want = json.loads(V8_EXPECTED.read_text(encoding="ascii"))
    async with await SqliteSessionStore.open(path) as store:
        await assert_reads_as_written(store, want)
        for query in V8_QUERIES:
            hits = await store.search_messages(query, limit=20)
            wanted = [[merged_hex(h[0]), *h[1:]] for h in want["search"][query]]
            assert [hit_json(h) for h in hits] == wanted, query
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert not conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE name = 'events_surface'"
        ).fetchone()
        # The store only read, but it upgraded the file: its close gave the index's
        # pages back (``_tidy``).
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")


async def test_the_v2_fixture_upgrades_through_v3_to_the_surface_nodes(tmp_path: Path) -> None:
    """Rows copied from schema v2 have no projection kept: the upgrade computes it."""
    path = copy_fixture(tmp_path)
    async with await SqliteSessionStore.open(path) as store:
        for sid in IDS:
            await assert_tails_fold(store, sid)


async def test_a_large_upgrade_reports_its_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module.surfaces, "_BACKFILL_REPORT_MIN", 10)
    monkeypatch.setattr(sqlite_module.surfaces, "_BACKFILL_BATCH", 7)
    calls: list[tuple[int, int]] = []
    path = copy_v3(tmp_path)
    with sqlite3.connect(path) as conn:
        (total,) = conn.execute("SELECT count(*) FROM events WHERE kind = 1").fetchone()
    async with await SqliteSessionStore.open(path, fold_progress=lambda d, t: calls.append((d, t))):
        pass
    assert len(calls) > 3
    assert calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert {t for _, t in calls} == {total}
    # An upgrade below the threshold says nothing.
    monkeypatch.setattr(sqlite_module.surfaces, "_BACKFILL_REPORT_MIN", total + 1)
    calls.clear()
    later = copy_v3(tmp_path / "b")
    async with await SqliteSessionStore.open(
        later, fold_progress=lambda d, t: calls.append((d, t))
    ):
        pass
    assert calls == []


def test_the_upgrade_progress_is_a_line_on_the_terminal(tmp_path: Path) -> None:
    """On a real terminal (a pty as stderr), a large upgrade prints its progress there;
    the database path (the user's text) is never printed."""
    path = copy_v3(tmp_path / "x\x1b[31m")
    code = (
        "import asyncio, sys\n"
        "import stores.sqlite as s\n"
        "s.surfaces._BACKFILL_REPORT_MIN = 1\n"
        "async def main():\n"
        "    store = await s.SqliteSessionStore.open(sys.argv[1])\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    master, slave = pty.openpty()
    try:
        child = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=slave,
            cwd=Path(__file__).resolve().parents[2],
            timeout=60,
            check=False,
        )
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert child.returncode == 0, out
    text = out.decode("utf-8")
    assert "dsh: upgrading the database: 100%" in text
    assert "\x1b" not in text
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)

"""A title row that cannot be read (issue 30) costs its session its title, never the
listing: the session is listed untitled and the store reports the row in
``damaged_rows()`` until a listing no longer meets it."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import pytest

from core.damage import DamagedRow
from core.log import build_event
from stores import MemorySessionStore, SessionQuery, SqliteSessionStore
from stores.replay import LazyReplayStore
from tui.shared.replay import open_replay

TITLE = "session/title"

CORRUPT: list[tuple[str | bytes | int, str]] = [
    ('{"title":5}', "its title is not text"),
    ('{"source":{"kind":"user"}}', "its title is not text"),
    ("not json", "it is not JSON"),
    ("[1]", "it is not a JSON object"),
    ('{"title":"' + "x" * 2000 + '"}', "its title holds 2,000 bytes, over the 1,024 allowed"),
    (
        '{"title":"t","pad":"' + "p" * 9000 + '"}',
        "it holds 9,022 bytes, over the 8,192 a title event may hold",
    ),
    (
        zlib.compress(b'{"title":"' + b"x" * (16 << 20) + b'"}'),  # 16 MiB from 16 KiB
        "it holds more than the 8,192 bytes a title event may hold",
    ),
    (b"x\x9c\x01\x02\x03\x04", "its compressed data is corrupt"),
    (b"\xff\xfe", "its compressed data is corrupt"),
    (5, "it is not JSON"),  # the column takes any type
]


async def _two_sessions(store: SqliteSessionStore | MemorySessionStore) -> None:
    await store.create_session("ok", created_at=2)
    await store.append("ok", TITLE, {"title": "fine"})
    await store.create_session("bad", created_at=1)
    await store.append("bad", TITLE, {"title": "was fine"})


def _corrupt(path: Path, data: str | bytes | int) -> None:
    """What a hand-written row holds: the title row of session ``bad`` replaced."""
    with sqlite3.connect(path) as raw:
        changed = raw.execute(
            "UPDATE events SET data = ? WHERE kind = 2 AND session = "
            "(SELECT key FROM sessions WHERE id = ?)",
            (data, b"bad"),
        ).rowcount
        assert changed == 1
    raw.close()


@pytest.mark.parametrize(("data", "reason"), CORRUPT, ids=range(len(CORRUPT)))
async def test_sqlite_lists_a_session_whose_title_row_is_damaged(
    tmp_path: Path, data: str | bytes | int, reason: str
) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        await _two_sessions(store)
        assert set(await store.read_titles()) == {"ok", "bad"}
        _corrupt(path, data)  # by another connection, while the store is open
        query = SessionQuery(store)
        assert [h.id for h in await query.list_sessions()] == ["ok", "bad"]
        titles = await query.read_titles()
        assert {sid: t.title for sid, t in titles.items()} == {"ok": "fine"}
        assert store.damaged_rows() == (DamagedRow("title", reason, None, "bad"),)
        assert await query.read_title("bad") is None
        assert await query.read_titles(["bad", "ok"]) == {"ok": titles["ok"]}
        assert await query.read_titles() == titles  # the kept listing, and its damage
        assert store.damaged_rows() == (DamagedRow("title", reason, None, "bad"),)
        # a new title is the latest: the next listing meets no damage
        await store.append("bad", TITLE, {"title": "named again"})
        assert (await query.read_titles())["bad"].title == "named again"
        assert store.damaged_rows() == ()


async def test_a_listing_of_some_ids_leaves_the_damage_of_the_whole_listing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        await _two_sessions(store)
        _corrupt(path, '{"title":5}')
        assert await store.read_titles(["bad"]) == {}
        assert store.damaged_rows() == ()  # no whole listing yet
        await store.read_titles()
        assert len(store.damaged_rows()) == 1
        assert await store.read_titles(["ok"]) != {}
        assert len(store.damaged_rows()) == 1


async def test_the_memory_store_lists_a_session_whose_title_event_is_damaged() -> None:
    async with MemorySessionStore(user="me") as store:
        await _two_sessions(store)
        session = store._sessions["bad"]  # what no append can make: a replayed file's
        seq = session.title_seq
        assert seq is not None
        event = session.events[seq]
        for data, reason in (
            ({"title": 5}, "its title is not text"),
            ({"title": "y" * 1025}, "its title holds 1,025 bytes, over the 1,024 allowed"),
            ({"title": "t", "pad": "p" * 9000}, "it holds 9,022 bytes, over the 8,192"),
        ):
            session.events[seq] = build_event(seq, TITLE, event.time, data)
            titles = await store.read_titles()
            assert {sid: t.title for sid, t in titles.items()} == {"ok": "fine"}
            (row,) = store.damaged_rows()
            assert (row.what, row.owner, row.session_id) == ("title", "me", "bad")
            assert row.reason.startswith(reason)
        await store.append("bad", TITLE, {"title": "again"})
        assert (await store.read_titles())["bad"].title == "again"
        assert store.damaged_rows() == ()


async def test_a_replayed_log_with_an_over_long_title_shows_no_title(tmp_path: Path) -> None:
    """``dsh replay`` reads the newest page before checking the file: its over-long title
    is left out (the check then rejects the file, naming the line)."""
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"type":"session","id":"r","created_at":1,"cwd":null}\n'
        '{"seq":0,"type":"session/title","time":2,"data":{"title":"'
        + "x" * 2000
        + '"},"surface_op":null,"source_event_seqs":null}\n'
    )
    store = await open_replay(str(log), lazy=True)
    assert isinstance(store, LazyReplayStore)
    try:
        assert await store.read_titles() == {}
        (row,) = store.damaged_rows()
        assert (row.what, row.session_id) == ("title", "r")
        assert "2,000 bytes" in row.reason
    finally:
        await store.close()

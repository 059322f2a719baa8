"""SqliteSessionStore specifics: schema, migrations, bad files, read-only use, contention."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import stores.sqlite as sqlite_module
from core.errors import SessionNotFoundError, StoreError
from core.log import NewEvent, Replace
from stores import SqliteSessionStore
from stores.sqlite import MIGRATIONS, SCHEMA_VERSION

MSG = "user/message"


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def write_file(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def read_file(path: Path) -> bytes:
    return path.read_bytes()


def chmod(path: Path, mode: int) -> None:
    path.chmod(mode)


def exists(path: Path) -> bool:
    return path.exists()


async def make_db(path: Path) -> None:
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session("s", cwd="/w", created_at=1)
        await store.append("s", MSG, {"text": "hi"}, surface_op="append")
        await store.append("s", "session/title", {"title": "T"})


# --------------------------------------------------------------------------- schema


_SHORT_GRAMS_FTS5 = {f"short_grams{part}" for part in ("", "_config", "_data", "_idx")}
"""The FTS5 table of short terms' grams (issue 36) and its own tables."""


async def test_open_creates_parent_dirs_and_schema(db_path: Path) -> None:
    assert not db_path.parent.exists()
    async with await SqliteSessionStore.open(db_path) as store:
        assert store.path == db_path
        assert store.read_only is False
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {
            row[1]: row[5]
            for row in conn.execute("PRAGMA table_list")
            if row[0] == "main"
            and not row[1].startswith(("sqlite_", "search_index"))
            and row[1] not in _SHORT_GRAMS_FTS5
        }
        assert tables == {  # STRICT (search_index*: the FTS5 table and its own tables)
            "sessions": 1,
            "events": 1,
            "reply_leases": 1,
            "search_messages": 1,
            "search_pending": 1,
            "surface_nodes": 1,
            "surface_sums": 1,
            "shares": 1,
            "short_grams_state": 1,
            "short_grams_loose": 1,
        }
        indexes = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type='index'")
        }
        assert {"sessions_by_created", "events_title", "events_replaces"} <= indexes
        assert "events_surface" not in indexes  # dropped by schema v9: no query read it
        fks = conn.execute("PRAGMA foreign_key_list(events)").fetchall()
        assert [(fk[2], fk[6]) for fk in fks] == [("sessions", "CASCADE")]


async def test_data_survives_reopen(db_path: Path) -> None:
    await make_db(db_path)
    async with await SqliteSessionStore.open(db_path) as store:
        (header,) = await store.list_headers()
        assert (header.id, header.cwd, header.created_at) == ("s", "/w", 1)
        events = await store.read_events("s")
        assert [e.type for e in events] == [MSG, "session/title"]
        assert events[0].data == {"text": "hi"}
        assert (await store.read_titles())["s"].title == "T"
        assert (await store.append("s", "x", {})).seq == 2


async def test_storage_format(db_path: Path) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("\ude00\ud83d", cwd=None, created_at=3)
        await store.append("\ude00\ud83d", MSG, {"t": "\ud800<"}, surface_op="append")
        await store.append(
            "\ude00\ud83d", MSG, {}, surface_op=Replace(0, 0), source_event_seqs=[0], time=9
        )
    with raw(db_path) as conn:
        assert conn.execute("SELECT id, cwd FROM sessions").fetchall() == [
            (b"\xed\xb8\x80\xed\xa0\xbd", None)
        ]
        rows = conn.execute(
            "SELECT seq, type, kind, data, surface_op, source_event_seqs FROM events ORDER BY seq"
        ).fetchall()
        assert rows == [
            (0, b"user/message", 1, '{"t":"\\ud800<"}', '"append"', None),
            (1, b"user/message", 1, "{}", '{"op":"replace","start":0,"end":0}', "[0]"),
        ]


async def test_delete_cascades_to_events(db_path: Path) -> None:
    await make_db(db_path)
    async with await SqliteSessionStore.open(db_path) as store:
        await store.delete_session("s")
    with raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)


async def test_empty_file_is_migrated(db_path: Path) -> None:
    write_file(db_path, b"")
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s")
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


async def test_forward_migration_step_runs_on_an_old_database(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_db(db_path)
    step = ("CREATE TABLE extra (x INTEGER NOT NULL) STRICT", "INSERT INTO extra VALUES (42)")
    monkeypatch.setattr(sqlite_module.schema, "MIGRATIONS", (*MIGRATIONS, step))
    monkeypatch.setattr(sqlite_module.schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    async with await SqliteSessionStore.open(db_path) as store:
        assert [e.seq for e in await store.read_events("s")] == [0, 1]
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert conn.execute("SELECT x FROM extra").fetchall() == [(42,)]
    # Opening again does not re-run the step.
    async with await SqliteSessionStore.open(db_path):
        pass
    with raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM extra").fetchone() == (1,)


# --------------------------------------------------------------------------- bad files


def assert_one_line_naming(err: StoreError, path: Path) -> None:
    message = str(err)
    assert str(path) in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "content",
    [
        random.Random(1).randbytes(8192),
        b"hello, this is a text file\n" * 200,
        b"SQLite format 3\x00" + b"\xff" * 4080,
    ],
    ids=["random-bytes", "text-file", "bad-header"],
)
async def test_not_a_database(db_path: Path, content: bytes) -> None:
    write_file(db_path, content)
    with pytest.raises(StoreError) as info:
        await SqliteSessionStore.open(db_path)
    assert_one_line_naming(info.value, db_path)
    assert read_file(db_path) == content  # left untouched


async def checkpointed_db(path: Path, sessions: int = 50) -> None:
    async with await SqliteSessionStore.open(path) as store:
        for i in range(sessions):
            await store.create_session(f"s{i}", created_at=i)
            await store.append_batch(
                f"s{i}", [NewEvent(MSG, {"text": "x" * 500}, "append") for _ in range(5)]
            )
    with raw(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def test_corrupt_schema_page(db_path: Path) -> None:
    await checkpointed_db(db_path)
    data = bytearray(read_file(db_path))
    data[100:4096] = random.Random(2).randbytes(3996)  # page 1 after the header: sqlite_schema
    write_file(db_path, bytes(data))
    with pytest.raises(StoreError) as info:
        await SqliteSessionStore.open(db_path)
    assert_one_line_naming(info.value, db_path)


async def test_corrupt_data_pages(db_path: Path) -> None:
    await checkpointed_db(db_path)
    data = bytearray(read_file(db_path))
    page, rng = 4096, random.Random(3)
    for start in range(2 * page, len(data), page):
        data[start : start + page] = b"\x0d" + rng.randbytes(page - 1)
    write_file(db_path, bytes(data))
    with pytest.raises(StoreError) as info:
        async with await SqliteSessionStore.open(db_path) as store:
            await store.list_headers()
            for header in await store.list_headers():
                await store.read_events(header.id)
    assert_one_line_naming(info.value, db_path)


async def test_newer_schema_version(db_path: Path) -> None:
    await make_db(db_path)
    with raw(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer") as info:
        await SqliteSessionStore.open(db_path)
    assert_one_line_naming(info.value, db_path)


async def test_foreign_database_is_not_taken_over(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with raw(db_path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(StoreError, match="not a dsh database"):
        await SqliteSessionStore.open(db_path)
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")}
        assert names == {"notes"}


async def test_directory_in_the_way(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        await SqliteSessionStore.open(tmp_path)


def test_a_failed_open_leaves_no_worker_behind(tmp_path: Path) -> None:
    """aiosqlite stops the worker of a connection that failed to open without waiting for
    it; a loop closed right after the failure made that thread die reporting to a closed
    loop (a traceback on stderr). ``open`` now waits for it: no thread may fail."""
    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        for _ in range(300):

            async def fail_to_open() -> None:
                with pytest.raises(StoreError, match="cannot open"):
                    await SqliteSessionStore.open(tmp_path)  # a directory

            asyncio.run(fail_to_open())
        time.sleep(0.2)  # a late worker would report by now
    finally:
        threading.excepthook = previous
    assert failures == []


# --------------------------------------------------------------------------- read-only


async def check_read_only(store: SqliteSessionStore) -> None:
    assert store.read_only is True
    assert [h.id for h in await store.list_headers()] == ["s"]
    assert len(await store.read_events("s")) == 2
    assert (await store.read_titles())["s"].title == "T"
    header, last, surface = await store.read_surface_events("s")
    assert (header.id, last, len(surface)) == ("s", 1, 1)
    with pytest.raises(SessionNotFoundError):
        await store.read_events("missing")
    for write in (
        store.create_session("new"),
        store.append("s", "x", {}),
        store.append_batch("s", [NewEvent("x", {})]),
        store.delete_session("s"),
    ):
        with pytest.raises(StoreError, match="read-only"):
            await write


async def test_listings_are_built_off_the_event_loop(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100,000 headers or titles take a second to build: never on the loop's thread."""
    await make_db(db_path)
    seen: list[tuple[str, threading.Thread]] = []
    real_dec, real_title = sqlite_module.listing.decode_text, sqlite_module.listing.stored_title

    def dec(value: bytes) -> str:
        seen.append(("header", threading.current_thread()))
        return real_dec(value)

    def stored_title(*args: object) -> object:
        seen.append(("title", threading.current_thread()))
        return real_title(*args)  # type: ignore[arg-type]

    async with await SqliteSessionStore.open(db_path) as store:
        monkeypatch.setattr(sqlite_module.listing, "decode_text", dec)
        monkeypatch.setattr(sqlite_module.listing, "stored_title", stored_title)
        headers = await store.list_headers()
        titles = await store.read_titles()
        assert [h.id for h in headers] == ["s"] and titles["s"].title == "T"
        assert {kind for kind, _ in seen} == {"header", "title"}
        assert all(thread is not threading.main_thread() for _, thread in seen)
        # Cached now: the same objects, nothing rebuilt.
        seen.clear()
        assert await store.list_headers() == headers and await store.read_titles() == titles
        assert seen == []


async def test_read_only_parameter(db_path: Path) -> None:
    await make_db(db_path)
    async with await SqliteSessionStore.open(db_path, read_only=True) as store:
        await check_read_only(store)
    async with await SqliteSessionStore.open(db_path) as store:
        assert len(await store.read_events("s")) == 2


async def test_file_without_write_permission_opens_read_only(db_path: Path) -> None:
    await make_db(db_path)
    chmod(db_path, 0o444)
    try:
        async with await SqliteSessionStore.open(db_path) as store:
            await check_read_only(store)
    finally:
        chmod(db_path, 0o644)


async def test_read_only_reader_sees_a_writers_commits(db_path: Path) -> None:
    await make_db(db_path)
    async with (
        await SqliteSessionStore.open(db_path) as writer,
        await SqliteSessionStore.open(db_path, read_only=True) as reader,
    ):
        await writer.append("s", "x", {})
        assert len(await reader.read_events("s")) == 3


async def test_read_only_missing_file(db_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        await SqliteSessionStore.open(db_path, read_only=True)
    assert not exists(db_path)


async def test_read_only_database_that_needs_migration(db_path: Path) -> None:
    write_file(db_path, b"")
    with pytest.raises(StoreError, match="read-only"):
        await SqliteSessionStore.open(db_path, read_only=True)


# --------------------------------------------------------------------------- contention


def hold_write_lock(path: Path, seconds: float, started: threading.Event) -> None:
    conn = raw(path)
    conn.execute("BEGIN IMMEDIATE")
    started.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


@pytest.mark.parametrize("busy_timeout", [10.0, 0.01])
async def test_append_waits_out_another_writer(db_path: Path, busy_timeout: float) -> None:
    # With a tiny busy timeout the SQLITE_BUSY escapes SQLite and our retry takes over.
    await make_db(db_path)
    async with await SqliteSessionStore.open(db_path, busy_timeout=busy_timeout) as store:
        started = threading.Event()
        holder = threading.Thread(target=hold_write_lock, args=(db_path, 0.3, started))
        holder.start()
        started.wait()
        began = time.monotonic()
        event = await store.append("s", "x", {})
        waited = time.monotonic() - began
        holder.join()
        assert event.seq == 2
        assert waited > 0.1
        # Reads are not blocked by a writer in WAL mode.
        started.clear()
        holder = threading.Thread(target=hold_write_lock, args=(db_path, 0.8, started))
        holder.start()
        started.wait()
        began = time.monotonic()
        assert len(await store.read_events("s")) == 3
        assert time.monotonic() - began < 0.5
        holder.join()


async def test_two_stores_on_one_file_interleave(db_path: Path) -> None:
    async with (
        await SqliteSessionStore.open(db_path) as one,
        await SqliteSessionStore.open(db_path) as two,
    ):
        await one.create_session("s")
        for i in range(20):
            store = one if i % 2 else two
            assert (await store.append("s", "x", {"i": i})).seq == i
        assert [e.data["i"] for e in await two.read_events("s")] == list(range(20))


async def test_cached_listings_see_commits_from_other_connections(tmp_path: Path) -> None:
    """Whole listings are reused only while nothing was committed, by us or by anyone."""
    path = tmp_path / "shared.sqlite3"
    async with await SqliteSessionStore.open(path) as a, await SqliteSessionStore.open(path) as b:
        await a.create_session("one", created_at=1)
        assert [h.id for h in await a.list_headers()] == ["one"]
        assert await a.read_titles() == {}
        await b.create_session("two", created_at=2)
        await b.append("one", "session/title", {"title": "T1", "source": {"kind": "user"}})
        assert [h.id for h in await a.list_headers()] == ["two", "one"]
        assert {k: v.title for k, v in (await a.read_titles()).items()} == {"one": "T1"}
        await a.append("two", "session/title", {"title": "T2", "source": {"kind": "user"}})
        assert {k: v.title for k, v in (await a.read_titles()).items()} == {
            "one": "T1",
            "two": "T2",
        }
        await a.delete_session("one")
        assert [h.id for h in await b.list_headers()] == ["two"]
        assert [h.id for h in await a.list_headers()] == ["two"]
        listed = await a.list_headers()
        listed.clear()  # callers get their own copy
        assert [h.id for h in await a.list_headers()] == ["two"]

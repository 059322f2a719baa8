"""The SQLite search index kept in step by the store itself (issue 36, schema v13): an
append's or an import's search rows go into the FTS5 index in one statement per batch, no
trigger per row. After every kind of write (appends, batches, replaces, imports in
batches, deletes, reopening, upgrades from every older schema) the index must hold exactly
its rows (FTS5's own ``integrity-check`` with ``rank = 1``, which compares the index with
its external content) and search must find what the memory store finds."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.batches import EventBatches
from core.log import NewEvent, Replace, SessionHeader, assistant_message, user_message
from core.surface import fold_surface
from stores import MemorySessionStore, SessionStore, SqliteSessionStore
from stores.sqlite import MIGRATIONS, SCHEMA_VERSION
from tests.stores.fixtures import make_v12_fixture as v12
from tests.stores.fixtures.make_v10_fixture import HERE

MSG = "user/message"
ASSISTANT = "assistant/message"
CHUNK = "assistant/chunk"
CHECKPOINT = {"kind": "plugin", "plugin": "compact"}
TERMS = ["retry", "RETRY", "重试策略", "größe", "GRÖSSE", "alpha", "beta", "gamma", "summary"]
TERMS += ["imported", "épée", "question", "deleted", "three", "after", "delta", "zeta"]


def fts_exact(path: Path) -> None:
    """The FTS5 index holds exactly the rows of ``search_messages`` (``rank = 1``: checked
    against the content table; without it FTS5 checks only its own structure) and the
    file is whole."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO search_index (search_index, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def triggers(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        sql = "SELECT name FROM sqlite_schema WHERE type = 'trigger'"
        return {name for (name,) in conn.execute(sql)}


async def hits(store: SessionStore, terms: Sequence[str] = TERMS) -> dict[str, list[Any]]:
    return {
        term: [
            (h.session_id, h.seq, h.snippet) for h in await store.search_messages(term, limit=50)
        ]
        for term in terms
    }


def test_the_check_finds_a_row_missing_from_the_index_or_indexed_twice(tmp_path: Path) -> None:
    """What the tests below rely on: ``fts_exact`` fails when the index and its rows
    disagree either way."""
    path = tmp_path / "dsh.sqlite3"
    asyncio.run(_one_message(path))
    fts_exact(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO search_messages (session, seq, text) VALUES (1, 99, 'lost')")
    with pytest.raises(sqlite3.DatabaseError):
        fts_exact(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO search_index (rowid, text) SELECT id, text FROM search_messages")
    with pytest.raises(sqlite3.DatabaseError):
        fts_exact(path)


async def _one_message(path: Path) -> None:
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session("s", created_at=1)
        await store.append("s", MSG, user_message("hello"), surface_op="append")


async def test_no_trigger_indexes_each_row(tmp_path: Path) -> None:
    path = tmp_path / "dsh.sqlite3"
    await _one_message(path)
    assert MIGRATIONS[12] == ("DROP TRIGGER search_messages_insert",)  # (step v12 -> v13)
    # (short_grams_reused, schema v14, lists a reused id only: the FTS5 index is not its)
    assert triggers(path) == {
        "search_messages_delete",
        "search_messages_linked",
        "short_grams_reused",
    }
    fts_exact(path)


async def _write_sessions(store: SessionStore, sessions: list[tuple[str, list[list[Any]]]]) -> None:
    """``make_v12_fixture``'s sessions as its writer wrote them (imported ones in batches)."""
    for n, (sid, batches) in enumerate(sessions):
        if sid in v12.IMPORTED:
            (batch,) = batches
            new = v12.new_events(batch, 10)
            step = v12.IMPORT_BATCH
            parts = [new[i : i + step] for i in range(0, len(new), step)]
            await store.import_session(SessionHeader(sid, n + 1), EventBatches(parts))
            continue
        await store.create_session(sid, created_at=n + 1)
        time = 10
        for batch in batches:
            await store.append_batch(sid, v12.new_events(batch, time))
            time += len(batch)
    for sid in v12.DELETED:
        await store.delete_session(sid)


MORE: list[tuple[str, list[list[Any]]]] = [
    ("chat", [[v12._said("delta after the upgrade")], v12._replied(3, "retry delta")]),
    # The surface is 10 (the summary, where the first exchange was), 6, 9, 11: the old
    # summary and the beta question shadowed, the beta answer and gamma kept.
    ("compacted", [[v12._summary("summary: zeta replaces beta", 10, 6, [6, 10])]]),
]


async def _write_more(store: SessionStore) -> None:
    """The same writes after the upgrade (and after the fresh store's sessions)."""
    for sid, batches in MORE:
        time = 100
        for batch in batches:
            await store.append_batch(sid, v12.new_events(batch, time))
            time += len(batch)
    events = [
        NewEvent(MSG, user_message(f"imported again zeta {i}"), "append", None, 200 + i)
        for i in range(7)
    ]
    parts = [events[:3], events[3:6], events[6:]]
    await store.import_session(SessionHeader("imported later", 9), EventBatches(parts))
    await store.delete_session("imported")


async def test_a_v12_database_upgrades_and_its_index_stays_exact(tmp_path: Path) -> None:
    path = tmp_path / "v12.sqlite3"
    shutil.copyfile(v12.DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (12,)
    assert "search_messages_insert" in triggers(path)
    fts_exact(path)  # (the old trigger's index was exact too)
    memory = MemorySessionStore()
    await _write_sessions(memory, v12.SESSIONS)
    want = await hits(memory)
    assert all(want[t] for t in ("retry", "重试策略", "größe", "GRÖSSE", "summary", "épée"))
    async with await SqliteSessionStore.open(path) as store:
        assert await hits(store) == want
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert "search_messages_insert" not in triggers(path)
    fts_exact(path)
    await _write_more(memory)
    async with await SqliteSessionStore.open(path) as store:
        await _write_more(store)
        assert await hits(store) == await hits(memory)
    fts_exact(path)
    async with await SqliteSessionStore.open(path) as store:  # reopened
        assert await hits(store) == await hits(memory)


@pytest.mark.parametrize("version", [2, 3, 6, 8, 9, 10, 11, 12])
async def test_every_older_database_upgrades_to_an_exact_index(
    tmp_path: Path, version: int
) -> None:
    """Each fixture's upgrade (v9's rewrites each session's search rows under the old
    trigger; v2's and v3's index their sessions after the migration, without it) leaves
    the index exact, and so do appends after it."""
    path = tmp_path / "old.sqlite3"
    shutil.copyfile(HERE / f"v{version}.sqlite3", path)
    async with await SqliteSessionStore.open(path):
        pass  # upgraded (and its pending sessions indexed)
    fts_exact(path)
    with sqlite3.connect(path) as conn:
        (owner,) = conn.execute("SELECT owner FROM sessions ORDER BY key LIMIT 1").fetchone()
    async with await SqliteSessionStore.open(path, user=owner) as store:
        headers = await store.list_headers()
        assert headers
        sid = headers[0].id
        batch = [
            NewEvent(MSG, user_message("upkeep after the upgrade"), "append"),
            NewEvent(MSG, user_message("and another upkeep"), "append"),
        ]
        added = await store.append_batch(sid, batch)
        found = await store.search_messages("upkeep")
        assert sorted((h.session_id, h.seq) for h in found) == [(sid, e.seq) for e in added]
    fts_exact(path)
    assert "search_messages_insert" not in triggers(path)


# ---------------------------------------------------------------- random writes, two stores

WORDS = ["alpha", "Beta", "gamma", "DELTA", "épée", "重试策略", "größe", "zeta"]
SIDS = ["a", "b", "c"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@st.composite
def messages(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    """A batch: messages (user, or a reply after a few chunks), a replace sometimes (its
    run counted back from the end of the surface: ``back`` nodes, then ``length``)."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["user", "reply", "reply", "replace"]))
        out.append((kind, draw(texts), draw(st.integers(0, 3))))
    return out


operations = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["batch", "single"]), st.sampled_from(SIDS), messages()),
        st.tuples(st.just("import"), st.integers(1, 3), messages()),
        st.tuples(st.just("delete"), st.sampled_from(SIDS), st.just([])),
        st.tuples(st.just("reopen"), st.just(""), st.just([])),
    ),
    max_size=12,
)


async def _batch(
    store: SessionStore, sid: str, items: list[tuple[str, str, int]]
) -> list[NewEvent]:
    """The events of ``items`` appended to what ``sid`` holds (memory store: the model)."""
    try:
        events = await store.read_events(sid)
    except Exception:
        events = []
    seq = len(events)
    surface = [e.seq for e in fold_surface(events)]
    out: list[NewEvent] = []
    for kind, text, back in items:
        if kind == "user":
            out.append(NewEvent(MSG, user_message(text), "append"))
            surface.append(seq)
            seq += 1
        elif kind == "reply":
            first = seq
            for i, word in enumerate(text.split(" ")):
                chunk = {"type": "text-delta", "index": i, "text": word}
                out.append(NewEvent(CHUNK, {"turn": 1, "step": 0, "chunk": chunk}))
                seq += 1
            message = assistant_message(text, provider="p", model="m")
            data = {"turn": 1, "step": 0, "message": message}
            out.append(NewEvent(ASSISTANT, data, "append", list(range(first, seq))))
            surface.append(seq)
            seq += 1
        elif surface:
            end = max(0, len(surface) - 1 - back)
            start = max(0, end - back)
            run = surface[start : end + 1]
            summary = user_message(f"summary {text}", source=CHECKPOINT)
            out.append(NewEvent(MSG, summary, Replace(run[0], run[-1]), run))
            surface[start : end + 1] = [seq]
            seq += 1
            event(f"a replace of {min(len(run), 3)}+ messages")
    return out


async def _run(ops: list[tuple[str, Any, list[Any]]], path: Path) -> None:
    memory = MemorySessionStore()
    store = await SqliteSessionStore.open(path)
    try:
        for n, sid in enumerate(SIDS):
            for s in (memory, store):
                await s.create_session(sid, created_at=n + 1)
        imports = 0
        for name, sid, items in ops:
            if name == "reopen":
                await store.close()
                fts_exact(path)
                store = await SqliteSessionStore.open(path)
                continue
            if name == "delete":
                if sid in {h.id for h in await memory.list_headers()}:
                    for s in (memory, store):
                        await s.delete_session(sid)
                continue
            if name == "import":
                imports += 1
                new_id = f"imported {imports}"
                batch = await _batch(memory, new_id, items)
                parts = [batch[i : i + sid] for i in range(0, len(batch), sid)]
                for s in (memory, store):
                    await s.import_session(SessionHeader(new_id, 10 + imports), EventBatches(parts))
                continue
            if sid not in {h.id for h in await memory.list_headers()}:
                continue
            batch = await _batch(memory, sid, items)
            for s in (memory, store):
                if name == "batch":
                    await s.append_batch(sid, batch)
                else:
                    for one in batch:
                        await s.append(
                            sid,
                            one.type,
                            one.data,
                            surface_op=one.surface_op,
                            source_event_seqs=one.source_event_seqs,
                        )
            assert await hits(store, WORDS) == await hits(memory, WORDS)
        assert await hits(store, [*WORDS, "summary"]) == await hits(memory, [*WORDS, "summary"])
        event(f"{min(imports, 2)}+ imports")
    finally:
        await store.close()
    fts_exact(path)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=operations)
def test_random_writes_keep_the_index_exact_and_search_as_the_memory_store(
    ops: list[tuple[str, Any, list[Any]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(ops, Path(tmp) / "dsh.sqlite3"))

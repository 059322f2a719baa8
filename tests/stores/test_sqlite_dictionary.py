"""Single events compressed against the preset dictionary (issue 15, schema v8): they read
back byte for byte on every read path, rows compressed without it (every dsh before v8)
still read, the dictionary never changes, damage is a ``StoreError`` naming the file, and
a message's row is smaller than without the dictionary."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import StoreError
from core.jsoncodec import dumps_js
from core.log import NewEvent
from stores import MemorySessionStore, SqliteSessionStore
from stores import sqlite as sqlite_store
from tests.stores.test_sqlite_linked import as_json, reply, rows, set_row, user

MSG = "user/message"
ASSISTANT = "assistant/message"
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["中", "文", "\ud800", "\udfff", '"', "\\", "\x00", "\u2028", "😀", " "]),
    ),
    max_size=600,
)


@pytest.fixture
def unlinked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages stored whole in their rows: without a search index to link to (see
    tests/stores/test_sqlite_linked.py for the rows that link)."""
    monkeypatch.setattr(sqlite_store.search, "SEARCH_INDEX", False)


def message(kind: int, text: str) -> NewEvent:
    return user(text) if kind == 0 else reply(text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.integers(0, 1), TEXT), min_size=1, max_size=6))
async def test_events_read_back_as_the_memory_store_has_them(
    tmp_path_factory: pytest.TempPathFactory, messages: list[tuple[int, str]]
) -> None:
    db = tmp_path_factory.mktemp("dict") / "dsh.sqlite3"
    memory = MemorySessionStore()
    batch = [message(kind, text) for kind, text in messages]
    async with await SqliteSessionStore.open(db) as store:
        for s in (store, memory):
            await s.create_session("s", created_at=1)
            await s.append_batch("s", batch)
        want = as_json(await memory.read_events("s"))
        assert as_json(await store.read_events("s")) == want
        seqs = [e.seq for e in await memory.read_events("s")]
        assert as_json(await store.read_events_at("s", seqs[::2])) == want[::2]
        bodies = await store.read_bodies_at("s", seqs)
        assert [(kind, dumps_js(data)) for kind, data in bodies] == [(w[1], w[3]) for w in want]
    async with await SqliteSessionStore.open(db, read_only=True) as again:
        assert as_json(await again.read_events("s")) == want


async def test_messages_are_stored_against_the_dictionary_and_smaller(
    db_path: Path, unlinked: None
) -> None:
    texts = ["Could you check why the deploy failed last night?", "好的，我来看一下部署日志。"]
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [message(i % 2, t) for i, t in enumerate(texts)])
        events = await store.read_events("s")
    for (_seq, data), event in zip(rows(db_path).items(), events, strict=True):
        assert isinstance(data, bytes) and data[1] & 0x20  # zlib's FDICT: a preset dictionary
        assert data[2:6] == sqlite_store._DICTIONARY_ID
        plain = zlib.compress(dumps_js(event.data).encode(), 6)
        assert len(data) < 0.75 * len(plain)


def test_the_dictionary_never_changes() -> None:
    """Rows name it by its Adler-32: another dictionary under the same name would make
    every file written with this one unreadable. A new one needs a new name beside it."""
    assert sqlite_store._DICTIONARY_ID.hex() == EXPECTED_DICTIONARY_ID
    assert zlib.adler32(sqlite_store._DICTIONARY) == int(EXPECTED_DICTIONARY_ID, 16)


EXPECTED_DICTIONARY_ID = "98512523"  # the Adler-32 of the dictionary of schema v8


async def test_rows_compressed_without_the_dictionary_still_read(
    db_path: Path, unlinked: None
) -> None:
    """As every dsh before schema v8 wrote them (and as the v6 fixture's upgrade shows)."""
    text = "an older row " * 40
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [message(0, text), message(1, text)])
        want = as_json(await store.read_events("s"))
    for seq, data in rows(db_path).items():
        old = zlib.compress(sqlite_store._inflate(data).encode(), 6)
        assert not old[1] & 0x20
        set_row(db_path, "UPDATE events SET data = ? WHERE seq = ? AND kind = 1", old, seq)
    async with await SqliteSessionStore.open(db_path) as store:
        assert as_json(await store.read_events("s")) == want
        assert as_json(await store.read_events_at("s", [1])) == want[1:]


def unknown_dictionary(data: bytes) -> bytes:
    return data[:2] + bytes(4) + data[6:]


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (unknown_dictionary, "unknown dictionary"),
        (lambda data: data[:-6], "truncated"),
        (lambda data: data + b"more", "after its end"),
        (lambda data: data[:12] + bytes(len(data) - 12), "corrupt"),
    ],
)
async def test_a_damaged_row_is_a_store_error_naming_the_file(
    db_path: Path, damage: Any, says: str, unlinked: None
) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [message(0, "a message of some length " * 8)])
    ((seq, data),) = rows(db_path).items()
    set_row(db_path, "UPDATE events SET data = ? WHERE seq = ? AND kind = 1", damage(data), seq)
    async with await SqliteSessionStore.open(db_path) as store:
        with pytest.raises(StoreError, match=str(db_path)) as caught:
            await store.read_events("s")
        assert says in str(caught.value)
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events_at("s", [0])

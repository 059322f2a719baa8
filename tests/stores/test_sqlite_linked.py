"""A message's text stored once (issue 15): a surface message's row keeps its JSON
without the text its search row holds, and readers put it back. Every read is byte for
byte what was appended (compared with the memory store, through replaces that drop the
search rows), a row whose search row goes first holds its text again, texts that cannot
be linked are stored whole, and damage is a ``StoreError`` naming the file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import StoreError
from core.jsoncodec import dumps_js
from core.log import NewEvent, Replace, assistant_message, text_block, user_message
from stores import MemorySessionStore, SessionStore, SqliteSessionStore
from stores import sqlite as sqlite_store
from tests.benchmarks.bench_storage import workload
from tests.stores.test_sqlite_chunk_runs import texts as as_json

MSG = "user/message"
ASSISTANT = "assistant/message"
CHECKPOINT = {"kind": "plugin", "plugin": "compact"}
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["中", "\ud800", '"', "\\", "\x00", "\n", "\u2028", "😀", " ", "a"]),
    ),
    max_size=300,
)
# Most long enough to link (hypothesis favours short texts).
LONG_TEXT = st.tuples(TEXT, st.integers(0, 3), TEXT).map(
    lambda t: t[0] + " long enough to be linked to its search row" * t[1] + t[2]
)


def user(text: str, **extra: Any) -> NewEvent:
    return NewEvent(MSG, user_message(text, id="u", **extra), "append", time=1)


def reply(content: Any) -> NewEvent:
    data = {
        "turn": 1,
        "step": 0,
        "message": assistant_message(content, provider="offline", model="offline", id="a"),
        "finish": "completed",
    }
    return NewEvent(ASSISTANT, data, "append", time=2)


def rows(path: Path) -> dict[int, Any]:
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT seq, data FROM events WHERE kind = 1 ORDER BY seq")
        return dict(found.fetchall())


def linked(path: Path) -> list[int]:
    return [
        seq for seq, data in rows(path).items() if isinstance(data, bytes) and data[:1] == b"\x01"
    ]


def search_rows(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [s for (s,) in conn.execute("SELECT seq FROM search_messages ORDER BY seq")]


async def everything(store: SessionStore, sid: str) -> list[Any]:
    """What the readers give: the log, subsets of it, the bodies, search hits."""
    events = await store.read_events(sid)
    seqs = [e.seq for e in events]
    bodies = await store.read_bodies_at(sid, seqs)
    return [
        as_json(events),
        as_json(await store.read_events_at(sid, seqs[1::2])),
        [(kind, dumps_js(data)) for kind, data in bodies],
        as_json(await store.read_unknown_events(sid))
        if hasattr(store, "read_unknown_events")
        else [],
    ]


@st.composite
def logs(draw: Any) -> list[list[NewEvent]]:
    """Batches of messages, some replacing the surface so far (a compaction)."""
    batches: list[list[NewEvent]] = []
    surface: list[int] = []  # seqs of the current surface
    seq = 0
    for _ in range(draw(st.integers(1, 5))):
        batch: list[NewEvent] = []
        for _ in range(draw(st.integers(1, 3))):
            text = draw(LONG_TEXT)
            if surface and draw(st.integers(0, 4)) == 0:
                start = draw(st.integers(0, len(surface) - 1))
                gone = surface[start:]
                batch.append(
                    NewEvent(
                        MSG,
                        user_message(text, source=CHECKPOINT, id="c"),
                        Replace(gone[0], gone[-1]),
                        gone,
                        time=3,
                    )
                )
                surface = [*surface[:start], seq]
            else:
                kind = draw(st.integers(0, 2))
                if kind == 0:
                    batch.append(user(text))
                elif kind == 1:
                    batch.append(reply(text))
                else:  # two text blocks: not one text in the JSON, stored whole
                    batch.append(reply([text_block(text), text_block(draw(LONG_TEXT))]))
                surface.append(seq)
            seq += 1
        batches.append(batch)
    return batches


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(logs())
async def test_every_read_is_the_memory_stores(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[NewEvent]]
) -> None:
    db = tmp_path_factory.mktemp("linked") / "dsh.sqlite3"
    memory = MemorySessionStore()
    await memory.create_session("s", created_at=1)
    for batch in batches:
        await memory.append_batch("s", batch)
    want = await everything(memory, "s")
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("s", created_at=1)
        for batch in batches:
            await store.append_batch("s", batch)
            # Every linked row has its search row (a replace made the others whole).
            assert set(linked(db)) <= set(search_rows(db))
        assert await everything(store, "s") == want
    async with await SqliteSessionStore.open(db, read_only=True) as again:
        assert await everything(again, "s") == want


async def test_messages_are_linked_and_their_rows_shrink(db_path: Path) -> None:
    text = "Could you look at why the nightly deploy failed? The log says: timeout. " * 4
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [user(text), reply(text + " Found it.")])
        events = await store.read_events("s")
    assert linked(db_path) == [0, 1]
    for seq, data in rows(db_path).items():
        # The row holds no copy of the text: less than its JSON without the text.
        assert len(data) < len(dumps_js(events[seq].data)) - len(text) + 40
    assert [e.data["message"]["content"][0]["text"] for e in events[1:]] == [text + " Found it."]


@pytest.mark.parametrize(
    "event",
    [
        user("short"),  # under _LINK_MIN: the row holds it
        user("a NUL \x00 the index holds as U+FFFD, so not the very text " * 2),
        user("a lone surrogate \ud800 the index cannot hold, so not the very text " * 2),
        reply([text_block("two text blocks " * 4), text_block("joined by a newline " * 4)]),
    ],
)
async def test_texts_that_cannot_be_linked_are_stored_whole(db_path: Path, event: NewEvent) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [event])
        (got,) = await store.read_events("s")
        assert dumps_js(got.data) == dumps_js(event.data)
    assert linked(db_path) == []
    assert search_rows(db_path) == [0]


async def test_a_compaction_makes_the_rows_it_shadows_whole(db_path: Path) -> None:
    texts = [f"message number {i} about the retry policy and its backoff" for i in range(4)]
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [user(t) for t in texts])
        before = as_json(await store.read_events("s"))
        assert linked(db_path) == [0, 1, 2, 3]
        summary = user_message(
            "summary: the retry policy, in short, is three tries", source=CHECKPOINT
        )
        await store.append("s", MSG, summary, surface_op=Replace(0, 2), source_event_seqs=[0, 1, 2])
        assert search_rows(db_path) == [3, 4]
        assert linked(db_path) == [3, 4]
        assert as_json(await store.read_events("s"))[:4] == before
        assert await store.search_messages("number 1") == []
    # And a deleted session takes both its rows and its search rows.
    async with await SqliteSessionStore.open(db_path) as store:
        await store.delete_session("s")
    assert rows(db_path) == {} and search_rows(db_path) == []


def set_row(path: Path, sql: str, *params: Any) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


def header_with(at: int | None = None, size: int | None = None) -> Any:
    def damage(data: bytes) -> bytes:
        head = bytearray(data)
        if at is not None:
            head[1:5] = at.to_bytes(4, "big")
        if size is not None:
            head[5:9] = size.to_bytes(4, "big")
        return bytes(head)

    return damage


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("DROP TRIGGER search_messages_linked; DELETE FROM search_messages", "missing"),
        (header_with(at=1_000_000), "past its end"),
        (header_with(size=1_000_000), "not the 1000000 bytes it says"),
        ("UPDATE search_messages SET text = text || 'x'", "not its own"),
        (lambda data: data[:7], "a linked message row"),
    ],
)
async def test_a_damaged_link_is_a_store_error_naming_the_file(
    db_path: Path, damage: Any, says: str
) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [user("a message long enough to be linked to its row")])
    assert linked(db_path) == [0]
    if isinstance(damage, str):
        with closing(sqlite3.connect(db_path)) as conn, conn:
            conn.executescript(damage)
    else:
        set_row(db_path, "UPDATE events SET data = ? WHERE seq = 0", damage(rows(db_path)[0]))
    async with await SqliteSessionStore.open(db_path) as store:
        for read in (
            store.read_events("s"),
            store.read_events_at("s", [0]),
            store.read_bodies_at("s", [0]),
        ):
            with pytest.raises(StoreError, match=str(db_path)) as caught:
                await read
            assert says in str(caught.value)


async def test_a_compaction_over_a_damaged_link_names_the_file_and_writes_nothing(
    db_path: Path,
) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [user("a message long enough to be linked to its row")])
    set_row(db_path, "UPDATE events SET data = ? WHERE seq = 0", rows(db_path)[0][:7])
    async with await SqliteSessionStore.open(db_path) as store:
        summary = user_message("summary", source=CHECKPOINT)
        with pytest.raises(StoreError, match=str(db_path)):
            await store.append("s", MSG, summary, surface_op=Replace(0, 0), source_event_seqs=[0])
    assert list(rows(db_path)) == [0] and search_rows(db_path) == [0]


def test_no_other_row_begins_with_the_link_byte() -> None:
    """JSON text begins with ``{`` and zlib streams with ``x``: the byte is the link's."""
    assert sqlite_store._stored_data("{" + '"a":"' + "b" * 500 + '"}')[:1] == b"x"
    assert sqlite_store._LINKED not in (b"{", b"x")


async def test_streamed_replies_read_back_with_their_runs_and_messages_linked(
    db_path: Path,
) -> None:
    """A reply's chunk runs point at its message (tests/stores/test_sqlite_reply_runs.py),
    whose row points at its search row: every read of the chunks finds the text."""
    ids, plan = workload(1, 3, seed=4)
    memory = MemorySessionStore()
    async with await SqliteSessionStore.open(db_path) as store:
        for s in (store, memory):
            await s.create_session(ids[0], created_at=1)
            for turn in plan[0]:
                await s.append_batch(ids[0], [turn.user])
                await s.append_batch(ids[0], [*turn.chunks, *turn.tail])
        assert linked(db_path)
        want = await everything(memory, ids[0])
        assert await everything(store, ids[0]) == want
        last = list(range(len(want[0]) - 50, len(want[0])))
        assert as_json(await store.read_events_at(ids[0], last)) == want[0][-50:]


async def test_a_search_row_a_message_links_to_cannot_be_deleted_first(db_path: Path) -> None:
    """Its text is the message's only copy: the file refuses to drop it (a tool or a
    later dsh clearing the index would otherwise lose messages), and the store's own
    path (the row made whole first) still may."""
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [user("a message long enough to be linked to its row")])
        want = as_json(await store.read_events("s"))
    with pytest.raises(sqlite3.IntegrityError, match="links to this text"):
        set_row(db_path, "DELETE FROM search_messages")
    with closing(sqlite3.connect(db_path)) as conn, conn:
        sqlite_store._unlink_messages(conn, 1, [0])
        conn.execute("DELETE FROM search_messages")
    assert linked(db_path) == [] and search_rows(db_path) == []
    async with await SqliteSessionStore.open(db_path) as store:
        assert as_json(await store.read_events("s")) == want

"""The SessionStore contract (SPEC §2, §3), run against every store."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import uuid
from typing import Any

import pytest

from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError, StoreError
from core.log import Event, NewEvent, Replace, SessionHeader, SurfaceOp, SurfaceRow, now_ms
from core.surface import fold_surface
from core.surrogates import merge_surrogate_pairs
from core.timestamps import MAX_EPOCH_MS
from stores import MemorySessionStore, SessionStore, SqliteSessionStore

MSG = "user/message"
ASSISTANT = "assistant/message"
TITLE = "session/title"
CHUNK = "assistant/chunk"


async def add(store: SessionStore, sid: str, n: int = 1, *, type: str = MSG) -> list[Event]:
    """Append ``n`` plain events (surface appends for surface types)."""
    op: SurfaceOp | None = "append" if type in (MSG, ASSISTANT) else None
    return [await store.append(sid, type, {"n": i}, surface_op=op) for i in range(n)]


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]


# --------------------------------------------------------------------------- sessions


def test_every_store_satisfies_the_protocol() -> None:
    from stores.postgres import PostgresSessionStore

    assert isinstance(MemorySessionStore(), SessionStore)
    assert issubclass(SqliteSessionStore, SessionStore)
    assert issubclass(PostgresSessionStore, SessionStore)


async def test_create_session_defaults(store: SessionStore) -> None:
    before = now_ms()
    header = await store.create_session()
    after = now_ms()
    assert str(uuid.UUID(header.id)) == header.id
    assert uuid.UUID(header.id).version == 4
    assert before <= header.created_at <= after
    assert header.cwd is None
    assert await store.read_header(header.id) == header
    assert await store.read_events(header.id) == []


async def test_create_session_explicit(store: SessionStore) -> None:
    header = await store.create_session("s1", cwd="/tmp/x", created_at=5)
    assert (header.id, header.cwd, header.created_at) == ("s1", "/tmp/x", 5)
    assert await store.list_headers() == [header]


async def test_duplicate_session_id_rejected(store: SessionStore) -> None:
    first = await store.create_session("dup", created_at=1)
    with pytest.raises(SessionExistsError) as info:
        await store.create_session("dup", created_at=2, cwd="/other")
    assert info.value.session_id == "dup"
    assert await store.list_headers() == [first]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": 1},
        {"session_id": b"bytes"},
        {"cwd": b"/bytes"},
        {"cwd": 3},
        {"created_at": True},
        {"created_at": 1.5},
        {"created_at": "1"},
        {"created_at": 2**63},
        {"created_at": -(2**63) - 1},
        {"created_at": 2**63 - 1},  # pinned on top of every list forever
        {"created_at": -1},
        {"created_at": MAX_EPOCH_MS + 1},
    ],
)
async def test_create_session_validates_types(store: SessionStore, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidEventError):
        await store.create_session(**kwargs)
    assert await store.list_headers() == []


async def test_created_at_accepts_1970_to_year_9999(store: SessionStore) -> None:
    # issue 31: a clock that ran ahead loses nothing (the time is shown as its date)
    low = await store.create_session("low", created_at=0)
    ahead = await store.create_session("ahead", created_at=now_ms() + 400 * 86_400_000)
    high = await store.create_session("high", created_at=MAX_EPOCH_MS)
    assert await store.list_headers() == [high, ahead, low]
    later = await store.append("ahead", "x", {}, time=now_ms() + 3 * 86_400_000)
    last = await store.append_batch("low", [NewEvent("x", {}, time=MAX_EPOCH_MS)])
    assert (later.seq, last[0].time) == (0, MAX_EPOCH_MS)


async def test_list_order_newest_first_ties_by_code_point(store: SessionStore) -> None:
    # Code-point order: "\ud7ff" < "\ude00\ud83d" (two lone surrogates) < "\ue000" < "\uffff"
    # < "😀".
    tied = ["\U0001f600", "\ude00\ud83d", "b", "\uffff", "a", "\ue000", "\ud7ff", "", "\x00"]
    for sid in tied:
        await store.create_session(sid, created_at=100)
    await store.create_session("new", created_at=200)
    await store.create_session("old", created_at=0)
    ids = [h.id for h in await store.list_headers()]
    assert ids == ["new", *sorted(tied), "old"]
    assert sorted(tied)[-4:] == ["\ude00\ud83d", "\ue000", "\uffff", "\U0001f600"]


async def test_delete_session(store: SessionStore) -> None:
    a = await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await add(store, "a", 3)
    await add(store, "b", 2)
    await store.append("b", TITLE, {"title": "B"})
    await store.delete_session("b")
    assert await store.list_headers() == [a]
    assert await store.read_titles() == {}
    with pytest.raises(SessionNotFoundError):
        await store.read_events("b")
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("b")
    assert seqs(await store.read_events("a")) == [0, 1, 2]
    # The id is free again and its log starts over.
    await store.create_session("b", created_at=3)
    assert seqs(await add(store, "b", 1)) == [0]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.append("nope", "x", {}),
        lambda s: s.append_batch("nope", [NewEvent("x", {})]),
        lambda s: s.append_batch("nope", []),
        lambda s: s.read_header("nope"),
        lambda s: s.read_events("nope"),
        lambda s: s.read_surface_events("nope"),
        lambda s: s.delete_session("nope"),
    ],
)
async def test_unknown_session(store: SessionStore, call: Any) -> None:
    await store.create_session("other")
    with pytest.raises(SessionNotFoundError) as info:
        await call(store)
    assert info.value.session_id == "nope"
    assert await store.read_events("other") == []


async def test_unknown_session_is_checked_before_event_rules(store: SessionStore) -> None:
    # The session is looked up first for a valid event; an invalid event is invalid anyway.
    with pytest.raises(SessionNotFoundError):
        await store.append("nope", MSG, {}, surface_op="append")


@pytest.mark.parametrize("bad", [1, None, b"id", ["id"]])
async def test_non_str_session_ids_in_lookups(store: SessionStore, bad: Any) -> None:
    with pytest.raises(TypeError):
        await store.read_events(bad)
    with pytest.raises(TypeError):
        await store.append(bad, "x", {})
    with pytest.raises(TypeError):
        await store.read_titles([bad])


async def test_read_titles_rejects_a_bare_string(store: SessionStore) -> None:
    with pytest.raises(TypeError):
        await store.read_titles("abc")


# --------------------------------------------------------------------------- appends


async def test_seqs_are_contiguous_from_zero(store: SessionStore) -> None:
    await store.create_session("s")
    other = await store.create_session("t")
    out = await add(store, "s", 3)
    out += await store.append_batch(
        "s", [NewEvent(CHUNK, {"i": i}) for i in range(4)] + [NewEvent(MSG, {}, "append")]
    )
    out += await add(store, other.id, 2)
    out += await add(store, "s", 1, type=TITLE)
    assert seqs(out) == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 8]
    log = await store.read_events("s")
    assert seqs(log) == list(range(9))
    assert log == out[:8] + out[10:]


async def test_append_returns_what_is_stored(store: SessionStore) -> None:
    await store.create_session("s")
    appended = await store.append(
        "s", MSG, {"a": [1, 2.5, {"b": None}], "c": True}, surface_op="append", time=42
    )
    assert appended == Event(0, MSG, 42, {"a": [1, 2.5, {"b": None}], "c": True}, "append")
    replaced = await store.append(
        "s", ASSISTANT, {}, surface_op=Replace(0, 0), source_event_seqs=[0], time=43
    )
    assert replaced.source_event_seqs == (0,)
    assert replaced.surface_op == Replace(0, 0)
    assert await store.read_events("s") == [appended, replaced]


async def test_time_defaults_to_now(store: SessionStore) -> None:
    await store.create_session("s")
    before = now_ms()
    event = await store.append("s", "x", {})
    assert before <= event.time <= now_ms()


async def test_empty_batch(store: SessionStore) -> None:
    await store.create_session("s")
    assert await store.append_batch("s", []) == []
    assert await store.read_events("s") == []
    assert seqs(await add(store, "s", 1)) == [0]


async def test_batch_may_replace_its_own_events(store: SessionStore) -> None:
    await store.create_session("s")
    await add(store, "s", 2)
    out = await store.append_batch(
        "s",
        [
            NewEvent(MSG, {"i": 2}, "append"),
            NewEvent(CHUNK, {}),
            NewEvent(ASSISTANT, {}, Replace(1, 2), [1, 2]),
            NewEvent(ASSISTANT, {}, Replace(0, 4), [0, 4, 1, 2]),
        ],
    )
    assert seqs(out) == [2, 3, 4, 5]
    _, last, surface = await store.read_surface_events("s")
    assert last == 5
    assert seqs(surface) == [0, 1, 2, 4, 5]


# Each case: the setup log (as NewEvents), then the invalid event.
_S = NewEvent(MSG, {}, "append")
INVALID_EVENTS: list[tuple[str, list[NewEvent], NewEvent]] = [
    ("surface type without op", [], NewEvent(MSG, {})),
    ("assistant without op", [], NewEvent(ASSISTANT, {})),
    ("op on log-only type", [], NewEvent(CHUNK, {}, "append")),
    ("op on title", [], NewEvent(TITLE, {"title": "x"}, "append")),
    ("source seqs on log-only", [_S], NewEvent(CHUNK, {}, None, [0])),
    ("unknown op string", [], NewEvent(MSG, {}, "prepend")),  # type: ignore[arg-type]
    ("op as dict", [], NewEvent(MSG, {}, {"op": "replace"})),  # type: ignore[arg-type]
    ("replace of absent seq", [_S], NewEvent(ASSISTANT, {}, Replace(0, 1), [0, 1])),
    (
        "replace of log-only seq",
        [NewEvent(CHUNK, {}), _S],
        NewEvent(MSG, {}, Replace(0, 1), [0, 1]),
    ),
    ("replace start after end", [_S, _S], NewEvent(MSG, {}, Replace(1, 0), [0, 1])),
    ("replace without provenance", [_S], NewEvent(MSG, {}, Replace(0, 0))),
    ("replace missing one shadowed seq", [_S, _S, _S], NewEvent(MSG, {}, Replace(0, 2), [0, 2])),
    (
        "replace of a shadowed seq",
        [_S, _S, NewEvent(MSG, {}, Replace(0, 0), [0])],
        NewEvent(MSG, {}, Replace(0, 1), [0, 1]),
    ),
    ("source seq equal to own seq", [_S], NewEvent(MSG, {}, "append", [1])),
    ("source seq above own seq", [_S], NewEvent(MSG, {}, "append", [0, 7])),
    ("duplicate source seqs", [_S], NewEvent(MSG, {}, Replace(0, 0), [0, 0])),
    ("bool source seq", [_S], NewEvent(MSG, {}, Replace(0, 0), [True])),
    ("negative source seq", [_S], NewEvent(MSG, {}, "append", [-1])),
    ("str source seqs", [_S], NewEvent(MSG, {}, "append", "0")),  # type: ignore[arg-type]
    ("float source seq", [_S], NewEvent(MSG, {}, Replace(0, 0), [0.0])),  # type: ignore[list-item]
    ("bool replace bounds", [_S], NewEvent(MSG, {}, Replace(False, False), [0])),
    ("empty type", [], NewEvent("", {})),
    ("non-str type", [], NewEvent(7, {})),  # type: ignore[arg-type]
    ("data not an object", [], NewEvent("x", [1, 2])),  # type: ignore[arg-type]
    ("data NaN", [], NewEvent("x", {"v": math.nan})),
    ("data infinity", [], NewEvent("x", {"v": [-math.inf]})),
    ("data object()", [], NewEvent("x", {"v": object()})),
    ("data non-str key", [], NewEvent("x", {"v": {1: "one"}})),
    ("data bytes", [], NewEvent("x", {"v": b"raw"})),
    ("bool time", [], NewEvent("x", {}, time=True)),
    ("float time", [], NewEvent("x", {}, time=1.0)),  # type: ignore[arg-type]
    ("time beyond int64", [], NewEvent("x", {}, time=2**63)),
    ("negative time", [], NewEvent("x", {}, time=-1)),
    ("time past year 9999", [], NewEvent("x", {}, time=MAX_EPOCH_MS + 1)),
]


@pytest.mark.parametrize(
    ("setup", "bad"), [c[1:] for c in INVALID_EVENTS], ids=[c[0] for c in INVALID_EVENTS]
)
async def test_invalid_event_is_rejected_and_nothing_written(
    store: SessionStore, setup: list[NewEvent], bad: NewEvent
) -> None:
    await store.create_session("s")
    await store.append_batch("s", setup)
    before = await store.read_events("s")
    with pytest.raises(InvalidEventError):
        await store.append(
            "s",
            bad.type,
            bad.data,
            surface_op=bad.surface_op,
            source_event_seqs=bad.source_event_seqs,
            time=bad.time,
        )
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", [bad])
    assert await store.read_events("s") == before
    assert seqs(await add(store, "s", 1, type=CHUNK)) == [len(before)]


@pytest.mark.parametrize(
    "bad",
    [c[2] for c in INVALID_EVENTS if not c[1]],
    ids=[c[0] for c in INVALID_EVENTS if not c[1]],
)
async def test_invalid_third_event_voids_the_whole_batch(
    store: SessionStore, bad: NewEvent
) -> None:
    await store.create_session("s")
    await add(store, "s", 2)
    await store.append("s", TITLE, {"title": "kept"})
    before = await store.read_events("s")
    batch = [NewEvent(MSG, {"a": 1}, "append"), NewEvent(TITLE, {"title": "lost"}), bad]
    batch.append(NewEvent(MSG, {}, "append"))
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", batch)
    assert await store.read_events("s") == before
    assert (await store.read_titles())["s"].title == "kept"
    assert seqs(await add(store, "s", 1)) == [3]
    assert seqs(await store.read_events("s")) == [0, 1, 2, 3]


async def test_replace_failure_late_in_batch_keeps_the_surface_intact(store: SessionStore) -> None:
    await store.create_session("s")
    await add(store, "s", 3)
    batch = [
        NewEvent(ASSISTANT, {}, Replace(0, 1), [0, 1]),  # valid on its own: would be seq 3
        NewEvent(ASSISTANT, {}, Replace(0, 0), [0]),  # 0 is shadowed by then
    ]
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", batch)
    # The first replace was not applied anywhere: it is still valid now.
    out = await store.append("s", ASSISTANT, {}, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    assert out.seq == 3
    _, _, surface = await store.read_surface_events("s")
    assert seqs(fold_surface(surface)) == [3, 2]


@pytest.mark.parametrize("bad", [None, "x", {"type": "x"}, ("x", {})])
async def test_batch_items_must_be_new_events(store: SessionStore, bad: Any) -> None:
    await store.create_session("s")
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", [NewEvent("x", {}), bad])
    assert await store.read_events("s") == []


async def test_extra_earlier_source_seqs_are_allowed(store: SessionStore) -> None:
    await store.create_session("s")
    await add(store, "s", 3)
    event = await store.append(
        "s", ASSISTANT, {}, surface_op=Replace(2, 2), source_event_seqs=[2, 0, 1]
    )
    assert event.source_event_seqs == (2, 0, 1)
    plain = await store.append("s", MSG, {}, surface_op="append", source_event_seqs=[0])
    assert plain.source_event_seqs == (0,)


async def test_concurrent_appends_on_one_store(store: SessionStore) -> None:
    await store.create_session("s")
    results = await asyncio.gather(
        *(store.append("s", MSG, {"i": i}, surface_op="append") for i in range(40)),
        *(store.append_batch("s", [NewEvent(CHUNK, {}), NewEvent(CHUNK, {})]) for _ in range(10)),
    )
    assert len(results) == 50
    log = await store.read_events("s")
    assert seqs(log) == list(range(60))


# --------------------------------------------------------------------------- reads


async def test_read_surface_events(store: SessionStore) -> None:
    header = await store.create_session("s", cwd="/w", created_at=7)
    assert await store.read_surface_events("s") == (header, None, [])
    await store.append("s", CHUNK, {})
    assert await store.read_surface_events("s") == (header, 0, [])
    await add(store, "s", 3)
    await store.append("s", ASSISTANT, {}, surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    await store.append("s", TITLE, {"title": "t"})
    await store.append("s", CHUNK, {})
    got_header, last, surface = await store.read_surface_events("s")
    assert got_header == header
    assert last == 6  # log-only events count
    assert seqs(surface) == [1, 2, 3, 4]  # every surface event, in seq order (not folded)
    log = await store.read_events("s")
    assert surface == [e for e in log if e.surface_op is not None]


async def test_read_surface_rows_are_the_surface_events_without_data(store: SessionStore) -> None:
    header = await store.create_session("s", cwd="/w", created_at=7)
    assert await store.read_surface_rows("s") == (header, None, [])
    await store.append("s", CHUNK, {})
    await add(store, "s", 3)
    await store.append("s", ASSISTANT, {}, surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    await store.append("s", CHUNK, {})
    got_header, last, rows = await store.read_surface_rows("s")
    _, last_full, surface = await store.read_surface_events("s")
    assert (got_header, last) == (header, last_full) == (header, 5)
    assert rows == [SurfaceRow(e.seq, e.surface_op, e.source_event_seqs) for e in surface]  # type: ignore[arg-type]
    assert rows[-1] == SurfaceRow(4, Replace(1, 2), (1, 2))
    assert [r.seq for r in fold_surface(rows)] == [e.seq for e in fold_surface(surface)] == [4, 3]
    with pytest.raises(SessionNotFoundError):
        await store.read_surface_rows("nope")


async def test_read_events_at_returns_the_seqs_asked_for_in_that_order(
    store: SessionStore,
) -> None:
    await store.create_session("s", created_at=1)
    await store.create_session("other", created_at=2)
    await add(store, "other", 9)
    await store.append("s", CHUNK, {"n": 0})
    await add(store, "s", 4)
    log = await store.read_events("s")
    assert await store.read_events_at("s", []) == []
    assert await store.read_events_at("s", [3, 0, 3, 4]) == [log[3], log[0], log[3], log[4]]
    assert await store.read_events_at("s", range(5)) == log
    with pytest.raises(InvalidEventError, match="no event with seq 5"):
        await store.read_events_at("s", [1, 5])
    with pytest.raises(InvalidEventError):
        await store.read_events_at("s", [-1])
    with pytest.raises(InvalidEventError):
        await store.read_events_at("s", [True])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await store.read_events_at("s", "01")
    with pytest.raises(SessionNotFoundError):
        await store.read_events_at("nope", [0])


async def test_read_events_at_many_seqs(store: SessionStore) -> None:
    """More seqs than one SQL statement binds: chunked, still in the order asked for."""
    await store.create_session("s", created_at=1)
    await store.append_batch("s", [NewEvent(MSG, {"i": i}, "append") for i in range(1_234)])
    wanted = [i * 7 % 1_234 for i in range(1_234)]
    got = await store.read_events_at("s", wanted)
    assert [e.seq for e in got] == wanted
    assert [e.data["i"] for e in got] == wanted


async def test_read_bodies_at_are_the_types_and_data_of_read_events_at(
    store: SessionStore,
) -> None:
    """``read_bodies_at`` is ``read_events_at`` reduced to ``(type, data)``: surface and
    log-only events (streamed chunks, which SQLite packs), a replace with many source
    seqs, hostile strings, duplicates, any order, more seqs than one statement binds."""
    await store.create_session("s", created_at=1)
    await store.create_session("other", created_at=2)
    await add(store, "other", 3)
    hostile = ["\ud800", "\x00\x1f", "中文 <b>", '"q" \\', "😀", "x" * 5000]
    for i in range(40):
        text = hostile[i % len(hostile)]
        await store.append_batch(
            "s",
            [
                NewEvent(MSG, {"i": i, "text": text}, "append"),
                *[NewEvent(CHUNK, {"i": i, "k": k, "text": text[:3]}) for k in range(20)],
                NewEvent(ASSISTANT, {"i": i, "message": {"text": text}}, "append"),
            ],
        )
    surface = [e.seq for e in await store.read_events("s") if e.surface_op is not None]
    await store.append(
        "s",
        MSG,
        {"summary": "\udfff"},
        surface_op=Replace(surface[0], surface[-1]),
        source_event_seqs=surface,
    )
    log = await store.read_events("s")
    assert log[-1].source_event_seqs == tuple(surface)
    every = list(range(len(log)))
    for wanted in (
        [],
        every,
        every[::-1],
        [len(log) - 1, 0, 0, 5, 5, len(log) - 1],
        [i * 7 % len(log) for i in range(len(log))],
        list(range(3, len(log), 11)),
    ):
        assert await store.read_bodies_at("s", wanted) == [
            (log[i].type, log[i].data) for i in wanted
        ]
    with pytest.raises(InvalidEventError, match=f"no event with seq {len(log)}"):
        await store.read_bodies_at("s", [1, len(log)])
    with pytest.raises(InvalidEventError):
        await store.read_bodies_at("s", [-1])
    with pytest.raises(InvalidEventError):
        await store.read_bodies_at("s", [True])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await store.read_bodies_at("s", "01")
    with pytest.raises(SessionNotFoundError):
        await store.read_bodies_at("nope", [0])


async def test_titles_latest_by_seq_in_the_raw_log(store: SessionStore) -> None:
    await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await store.create_session("untitled", created_at=3)
    await store.append("a", TITLE, {"title": "first", "source": {"kind": "fallback"}}, time=10)
    await add(store, "a", 2)
    await store.append("a", TITLE, {"title": "second", "source": {"kind": "user"}}, time=5)
    await store.append("a", TITLE, {"title": None, "source": {"kind": "user"}}, time=20)
    await store.append("a", TITLE, {"title": ["not", "str"]}, time=21)
    await store.append("a", TITLE, {"source": {"kind": "user"}}, time=22)
    await add(store, "a", 1)
    await store.append("b", TITLE, {"title": "\ud800 b", "extra": 1}, time=3)
    titles = await store.read_titles()
    assert set(titles) == {"a", "b"}
    a = titles["a"]
    assert (a.title, a.event_seq, a.updated_at) == ("second", 3, 5)
    assert a.source == {"kind": "user"}
    b = titles["b"]
    assert (b.title, b.event_seq, b.updated_at, b.source) == ("\ud800 b", 0, 3, {})
    assert await store.read_titles(["b", "untitled", "missing", "b"]) == {"b": b}
    assert await store.read_titles([]) == {}
    with pytest.raises(TypeError):
        a.source["kind"] = "x"  # type: ignore[index]


async def test_read_titles_of_many_sessions(store: SessionStore) -> None:
    ids = [f"s{i:04d}" for i in range(1100)]
    for sid in ids:
        await store.create_session(sid, created_at=0)
    for i, sid in enumerate(ids):
        if i % 3:
            await store.append(sid, TITLE, {"title": f"t{i}"}, time=i)
    titles = await store.read_titles(ids)
    assert len(titles) == sum(1 for i in range(1100) if i % 3)
    assert titles["s1099"].title == "t1099"
    assert titles["s0001"].updated_at == 1
    assert "s0000" not in titles
    assert await store.read_titles() == titles


async def test_last_event_times_are_the_time_of_the_highest_seq(store: SessionStore) -> None:
    await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await store.create_session("empty", created_at=3)
    await store.create_session("\ud800 odd", created_at=4)
    assert await store.read_last_event_times() == {}
    await store.append("a", MSG, {"n": 0}, surface_op="append", time=50)
    # Times need not grow with seq (imported logs): the last event counts, not the latest time.
    await store.append("a", CHUNK, {"n": 1}, time=20)
    await store.append_batch(
        "b", [NewEvent(MSG, {"n": i}, "append", None, 100 + i) for i in range(3)]
    )
    await store.append("\ud800 odd", TITLE, {"title": "t"}, time=7)
    assert await store.read_last_event_times() == {"a": 20, "b": 102, "\ud800 odd": 7}
    await store.append("a", MSG, {"n": 2}, surface_op="append", time=10**12)
    await store.delete_session("b")
    assert await store.read_last_event_times() == {"a": 10**12, "\ud800 odd": 7}


async def test_last_event_times_of_many_sessions(store: SessionStore) -> None:
    ids = [f"s{i:04d}" for i in range(600)]
    for sid in ids:
        await store.create_session(sid, created_at=0)
    for i, sid in enumerate(ids):
        if i % 4:
            await store.append_batch(
                sid, [NewEvent(CHUNK, {"n": n}, None, None, i * 10 + n) for n in range(i % 4)]
            )
    times = await store.read_last_event_times()
    assert times == {sid: i * 10 + i % 4 - 1 for i, sid in enumerate(ids) if i % 4}


# --------------------------------------------------------------------------- strings

HOSTILE = [
    "",
    "\x00",
    "nul\x00inside",
    "\x1b[31mred\x1b[0m\x07",
    "\x7f\x9b\r\n\t\x0b\x0c",
    "\ud800",
    "\udfff",
    "lone \udc00 low",
    "\ud83d\ude00",  # a surrogate pair in a Python str: the astral character (SPEC 4.1)
    "\ude00\ud83d",  # a low then a high: two lone surrogates
    "😀",
    "\ud83d😀\ude00",
    "\u202eevil\u202c \u2066isolate\u2069",
    "[bold]markup[/bold] [link=http://x]y[/link]",
    '"quotes" \\backslash\\ \\u0000 \\ud800',
    "\ufeffbom \ufffe \uffff \U0010ffff",
    "<referenced-sessions>",
]


@pytest.mark.parametrize("given", HOSTILE, ids=[ascii(t) for t in HOSTILE])
async def test_hostile_strings_round_trip(store: SessionStore, given: str) -> None:
    # Every str comes back as it went in, a surrogate pair as its character (SPEC 4.1).
    text = merge_surrogate_pairs(given)
    header = await store.create_session(given, cwd=given, created_at=1)
    assert header.id == header.cwd == text
    assert header == await store.read_header(text)
    data = {text: text, "list": [text, {text: [text]}], "title": text}
    given_data = {given: given, "list": [given, {given: [given]}], "title": given}
    events = await store.append_batch(
        given,
        [
            NewEvent(MSG, given_data, "append"),
            NewEvent(TITLE, {"title": given, "source": {"kind": given}}),
            NewEvent(given or "t", given_data),
        ],
    )
    (got,) = await store.list_headers()
    assert (got.id, got.cwd) == (text, text)
    assert type(got.id) is str
    log = await store.read_events(text)
    assert log == events
    assert log[0].data == data
    assert log[2].type == (text or "t")
    assert (await store.read_titles([text]))[text].title == text
    assert (await store.read_titles())[text].source == {"kind": text}
    # Exactly the same code points, not merely equal after normalisation or pairing.
    assert [ord(c) for c in log[0].data["list"][0]] == [ord(c) for c in text]
    await store.delete_session(text)
    assert await store.list_headers() == []


async def test_a_surrogate_pair_is_the_astral_char_session(store: SessionStore) -> None:
    # SPEC 4.1: a high surrogate followed by a low one is the character, however written.
    header = await store.create_session("mig-hé\ud83d\ude80", cwd="\ud83d\ude00", created_at=1)
    assert (header.id, header.cwd) == ("mig-hé🚀", "😀")
    with pytest.raises(SessionExistsError):
        await store.create_session("mig-hé🚀", created_at=1)
    await store.append("mig-hé\ud83d\ude80", TITLE, {"title": "pair \ud83d\ude80"})
    assert [(h.id, h.cwd) for h in await store.list_headers()] == [("mig-hé🚀", "😀")]
    titles = await store.read_titles(["mig-hé\ud83d\ude80"])
    assert list(titles) == ["mig-hé🚀"] and titles["mig-hé🚀"].title == "pair 🚀"
    (event,) = await store.read_events("mig-hé🚀")
    assert event.data["title"] == "pair 🚀"
    assert await store.read_events("mig-hé\ud83d\ude80") == [event]


def _cut(text: str, limit: int) -> str:
    """The longest head of ``text`` within ``limit`` UTF-8 bytes (``surrogatepass``)."""
    while len(text.encode("utf-8", "surrogatepass")) > limit:
        text = text[:-1]
    return text


async def test_megabyte_strings(store: SessionStore) -> None:
    """A megabyte message, and an id, cwd and title as long as core.limits allows, made of
    NULs, lone surrogates, astral and bidi characters, come back exactly."""
    big = ("a\x00\ud800😀\u202e" * 200_000)[:1_000_000]
    sid, cwd, title = _cut(big[:2000], 1024), _cut(big[:5000], 4096), _cut(big[:2000], 1024)
    assert len(sid.encode("utf-8", "surrogatepass")) > 1010
    await store.create_session(sid, cwd=cwd, created_at=1)
    await store.append(sid, TITLE, {"title": title})
    await store.append(
        sid, MSG, {"text": big, "content": [{"type": "text", "text": big}]}, surface_op="append"
    )
    (header,) = await store.list_headers()
    assert header.id == sid and header.cwd == cwd
    _, last, surface = await store.read_surface_events(sid)
    assert last == 1
    assert surface[0].data["text"] == big
    assert (await store.read_titles())[sid].title == title


# --------------------------------------------------------------------------- immutability


async def test_returned_data_is_frozen_and_detached(store: SessionStore) -> None:
    await store.create_session("s")
    data: dict[str, Any] = {"list": [1, {"x": [2]}], "obj": {"k": "v"}}
    returned = await store.append("s", MSG, data, surface_op="append")
    source_seqs = [0]
    replaced = await store.append(
        "s", ASSISTANT, {}, surface_op=Replace(0, 0), source_event_seqs=source_seqs
    )
    # Mutating the caller's input afterwards changes nothing stored or returned.
    data["list"].append(3)
    data["obj"]["k"] = "changed"
    data["new"] = 1
    source_seqs.append(99)
    assert replaced.source_event_seqs == (0,)
    for event in (returned, (await store.read_events("s"))[0]):
        assert event.data == {"list": [1, {"x": [2]}], "obj": {"k": "v"}}
        assert event.data is not data
        with pytest.raises(TypeError):
            event.data["new"] = 1  # type: ignore[index]
        with pytest.raises(TypeError):
            event.data["list"].append(4)
        with pytest.raises(TypeError):
            event.data["list"][1]["x"].append(5)
        with pytest.raises(TypeError):
            event.data["obj"]["k"] = "x"
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.seq = 5  # type: ignore[misc]
    # Reading twice gives equal results; nothing a caller does to one read leaks into another.
    first = await store.read_events("s")
    first.clear()
    assert len(await store.read_events("s")) == 2


# --------------------------------------------------------------------------- lifecycle


async def test_closed_store_refuses_work(store: SessionStore) -> None:
    await store.create_session("s")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError):
        await store.list_headers()
    with pytest.raises(StoreError):
        await store.append("s", "x", {})


async def test_cancelled_append_leaves_the_store_usable(store: SessionStore) -> None:
    await store.create_session("s")
    for _ in range(20):
        task = asyncio.ensure_future(
            store.append_batch("s", [NewEvent(CHUNK, {"i": i}) for i in range(50)])
        )
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # Each cancelled batch either landed whole or not at all, and the store still works.
    log = await store.read_events("s")
    assert len(log) % 50 == 0
    assert seqs(log) == list(range(len(log)))
    assert (await add(store, "s", 1))[0].seq == len(log)


# --------------------------------------------------------------------------- import


async def test_import_session_all_or_nothing(store: SessionStore) -> None:
    header = SessionHeader("imported\ud800", created_at=5, cwd="/c")
    log = [
        NewEvent(MSG, {"i": 0}, "append", None, 1),
        NewEvent(MSG, {"i": 1}, "append", None, 2),
        NewEvent(TITLE, {"title": "t"}, None, None, 3),
        NewEvent(ASSISTANT, {}, Replace(0, 1), [0, 1], 4),
    ]
    assert await store.import_session(header, log) == header
    assert await store.list_headers() == [header]
    events = await store.read_events(header.id)
    assert [(e.seq, e.time) for e in events] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(SessionExistsError):
        await store.import_session(header, [])
    bad = SessionHeader("other", created_at=6)
    with pytest.raises(InvalidEventError):
        await store.import_session(bad, [*log[:3], NewEvent(ASSISTANT, {}, Replace(0, 1), [0])])
    with pytest.raises(InvalidEventError):
        await store.import_session(SessionHeader("x", created_at=True), [])
    assert await store.list_headers() == [header]
    assert await store.import_session(SessionHeader("empty", 7), []) == SessionHeader("empty", 7)
    assert await store.read_events("empty") == []

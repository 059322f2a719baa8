"""The SessionStore contract (SPEC §2, §3) for appends, run against every store: contiguous
seqs, what is stored, batches all or nothing, invalid events rejected with nothing written."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from core.errors import InvalidEventError
from core.log import Event, NewEvent, Replace, now_ms
from core.surface import fold_surface
from core.timestamps import MAX_EPOCH_MS
from stores import SessionStore
from tests.stores.store_behaviour_helpers import ASSISTANT, CHUNK, MSG, TITLE, add, seqs

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

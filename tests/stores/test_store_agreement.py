"""Property test: the memory store and each durable store (SQLite, PostgreSQL) agree on
random operation sequences."""

from __future__ import annotations

import asyncio
import math
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from core.errors import SessionNotFoundError
from core.log import NewEvent, Replace, SurfaceOp
from core.surface import fold_surface
from stores import MemorySessionStore, SessionQuery, SessionStore, open_store
from stores.query import unknown_floor
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url

IDS = ["a", "\ude00\ud83d", "😀", ""]  # (a high then a low would be "😀": SPEC 4.1)
SURFACE_TYPES = ["user/message", "assistant/message", "tool/result", "steering/message"]
LOG_TYPES = ["assistant/chunk", "session/title", "turn/start", "\ud800/odd"]

# Hypothesis never draws surrogates by default; mix lone ones (and NUL, ESC) in.
alphabet = st.one_of(
    st.characters(), st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00", "\x00", "\x1b"])
)
texts = st.text(alphabet, max_size=6)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
valid_data = st.one_of(
    st.dictionaries(texts, json_values, max_size=3),
    st.builds(lambda t, s: {"title": t, "source": s}, texts | json_values, json_values),
)
bad_data: st.SearchStrategy[Any] = st.sampled_from(
    [{"bad": math.nan}, {"bad": [math.inf]}, {"bad": object()}, {1: "key"}]
)


SHAPES = ["append"] * 3 + ["log", "relative", "relative", "relative"]
SHAPES += ["absolute", "bad-data", "mismatch", "bad-seqs"]


@dataclass(frozen=True)
class RelativeReplace:
    """A replace of surface nodes counted back from the end of the session's surface as
    it is when the operation runs (so that generated replaces are often valid).
    ``provenance``: the exact run, the run plus seq 0 ("extra"), or without its end."""

    type: str
    data: dict[str, Any]
    back_start: int
    back_end: int
    time: int
    provenance: str


@st.composite
def new_events(draw: st.DrawFn) -> NewEvent | RelativeReplace:
    """Mostly well-formed events (so that logs grow and replaces apply), some broken ones."""
    shape = draw(st.sampled_from(SHAPES))
    time = draw(st.integers(0, 2**40))
    data = draw(valid_data)
    surface_type = draw(st.sampled_from(SURFACE_TYPES))
    log_type = draw(st.sampled_from(LOG_TYPES))
    if shape == "append":
        return NewEvent(surface_type, data, "append", None, time)
    if shape == "log":
        return NewEvent(log_type, data, None, None, time)
    if shape == "relative":
        back_start, back_end = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        provenance = draw(st.sampled_from(["exact"] * 4 + ["extra", "missing"]))
        return RelativeReplace(surface_type, data, back_start, back_end, time, provenance)
    if shape == "absolute":  # a replace with absolute seqs and provenance that may be off
        start, end = draw(st.integers(0, 4)), draw(st.integers(0, 4))
        seqs = draw(st.lists(st.integers(0, 6), max_size=4, unique=True))
        return NewEvent(surface_type, data, Replace(start, end), seqs, time)
    if shape == "bad-data":
        return NewEvent(
            draw(st.sampled_from([log_type, surface_type])), draw(bad_data), None, None, time
        )
    if shape == "mismatch":  # a surface op on a log-only type
        return NewEvent(log_type, data, "append", None, time)
    seqs = draw(st.lists(st.integers(0, 12), max_size=4))
    op: SurfaceOp | None = draw(st.sampled_from([None, "append"]))
    return NewEvent(surface_type if op else log_type, data, op, seqs, time)


@dataclass(frozen=True)
class Op:
    name: str
    session_id: str
    args: tuple[Any, ...] = ()


ids = st.sampled_from(IDS)
creates = st.builds(Op, st.just("create"), ids, st.tuples(st.none() | ids, st.integers(-2, 2)))
appends = st.builds(Op, st.just("append"), ids, st.tuples(new_events()))
batches = st.builds(Op, st.just("batch"), ids, st.tuples(st.lists(new_events(), max_size=5)))
others = {
    14: creates,
    15: creates,
    16: st.builds(Op, st.just("delete"), ids),
    17: st.builds(Op, st.just("surface"), ids),
    18: st.builds(Op, st.just("titles"), st.just("")),
    19: st.builds(Op, st.just("rows"), ids),
    20: st.builds(Op, st.just("window"), ids, st.tuples(st.integers(0, 6))),
    21: st.builds(Op, st.just("last_times"), st.just("")),
}


@st.composite
def operation(draw: st.DrawFn) -> Op:
    pick = draw(st.integers(0, 21))  # weighted towards appends and batches
    if pick <= 8:
        return draw(appends)
    if pick <= 13:
        return draw(batches)
    return draw(others[pick])


# Three sessions exist from the start; the fourth id only ever appears through `create`.
operations = st.builds(
    lambda created, tail: [Op("create", sid, (None, n)) for n, sid in enumerate(created)] + tail,
    st.permutations(IDS[:3]),
    st.lists(operation(), min_size=8, max_size=25),
)


def call(store: SessionStore, op: Op) -> Awaitable[Any]:
    sid = op.session_id
    actions: dict[str, Callable[[], Awaitable[Any]]] = {
        "create": lambda: store.create_session(sid, cwd=op.args[0], created_at=op.args[1]),
        "append": lambda: store.append(
            sid,
            op.args[0].type,
            op.args[0].data,
            surface_op=op.args[0].surface_op,
            source_event_seqs=op.args[0].source_event_seqs,
            time=op.args[0].time,
        ),
        "batch": lambda: store.append_batch(sid, op.args[0]),
        "delete": lambda: store.delete_session(sid),
        "surface": lambda: store.read_surface_events(sid),
        "rows": lambda: store.read_surface_rows(sid),
        "window": lambda: SessionQuery(store).read_surface_window(sid, op.args[0]),
        "titles": lambda: store.read_titles(),
        "last_times": lambda: store.read_last_event_times(),
    }
    return actions[op.name]()


async def outcome(awaitable: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return ("ok", await awaitable)
    except Exception as err:
        return ("error", type(err))


async def final_state(store: SessionStore) -> tuple[Any, ...]:
    headers = await store.list_headers()
    logs = {h.id: await store.read_events(h.id) for h in headers}
    return (
        headers,
        logs,
        await store.read_titles(),
        await store.read_titles(IDS),
        await store.read_last_event_times(),
    )


async def resolve(memory: MemorySessionStore, op: Op) -> Op:
    """Turn each ``RelativeReplace`` into a concrete ``NewEvent`` against the current log."""
    if op.name not in ("append", "batch"):
        return op
    try:
        _, last, surface_events = await memory.read_surface_events(op.session_id)
    except SessionNotFoundError:
        last, surface_events = None, []
    nodes = [e.seq for e in fold_surface(surface_events)]
    absent = (last or 0) + 100

    def concrete(item: NewEvent | RelativeReplace) -> NewEvent:
        if isinstance(item, NewEvent):
            return item
        if not nodes:
            return NewEvent(item.type, item.data, Replace(absent, absent), [0], item.time)
        i = max(0, len(nodes) - 1 - item.back_start)
        j = max(0, len(nodes) - 1 - item.back_end)
        start, end = nodes[i], nodes[j]
        run = nodes[i : j + 1]  # empty when start comes after end
        if item.provenance == "extra" and 0 not in run:
            run = [*run, 0]
        elif item.provenance == "missing":
            run = run[:-1]
        return NewEvent(item.type, item.data, Replace(start, end), run, item.time)

    if op.name == "append":
        return Op(op.name, op.session_id, (concrete(op.args[0]),))
    return Op(op.name, op.session_id, ([concrete(item) for item in op.args[0]],))


async def run(ops: list[Op], db: Path | str) -> None:
    async with MemorySessionStore() as memory, await open_store(db) as durable:
        for index, original in enumerate(ops):
            op = await resolve(memory, original)
            expected = await outcome(call(memory, op))
            got = await outcome(call(durable, op))
            assert got == expected, f"step {index}: {op}"
            if op.name == "window" and expected[0] == "ok":
                # The window is the newest part of exactly what a whole read folds to.
                window, whole = expected[1], await SessionQuery(memory).read_surface(op.session_id)
                assert window.seqs == tuple(e.seq for e in whole.events)
                newest = min(op.args[0], len(whole.events))
                assert window.events == whole.events[len(whole.events) - newest :]
                assert window.captured_through_seq == whole.captured_through_seq
                # Its floor is the newest replace among every surface row (as folded).
                _, _, rows = await memory.read_surface_rows(op.session_id)
                assert window.unknown_floor == unknown_floor(rows)
            label = f"{op.name} {expected[0]}"
            if op.name in ("append", "batch") and expected[0] == "ok":
                events = expected[1] if op.name == "batch" else [expected[1]]
                if any(isinstance(e.surface_op, Replace) for e in events):
                    label += " with a replace"
            if currently_in_test_context():
                event(label)
        assert await final_state(durable) == await final_state(memory)
    # And the database holds the same after a reopen.
    async with await open_store(db) as reopened:
        memory_again = MemorySessionStore()
        for op in ops:
            await outcome(call(memory_again, await resolve(memory_again, op)))
        assert await final_state(reopened) == await final_state(memory_again)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(operations)
def test_memory_and_sqlite_stores_agree(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(ops, Path(tmp) / "dsh.sqlite3"))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(operations)
def test_memory_and_postgres_stores_agree(pg_cluster: Cluster, ops: list[Op]) -> None:
    with pg_schema_url(pg_cluster, migrated=True) as url:
        asyncio.run(run(ops, url))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_agreement_covers_valid_replaces(kind: str, request: pytest.FixtureRequest) -> None:
    """A fixed sequence that is valid throughout, so the property test is not vacuous."""
    ops = [
        Op("create", "a", (None, 1)),
        Op(
            "batch",
            "a",
            ([NewEvent("user/message", {"i": i}, "append", None, 5) for i in range(3)],),
        ),
        Op("append", "a", (NewEvent("assistant/message", {}, Replace(0, 1), [0, 1], 6),)),
        Op("append", "a", (NewEvent("session/title", {"title": "t"}, None, None, 7),)),
        Op("surface", "a"),
        Op("titles", ""),
        Op("last_times", ""),
    ]
    if kind == "postgres":
        with pg_schema_url(request.getfixturevalue("pg_cluster")) as url:
            asyncio.run(run(ops, url))
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(ops, Path(tmp) / "dsh.sqlite3"))

"""``prepare`` reads only what retention keeps (the outline, then the newest bodies), and
its output is byte for byte that of the full algorithm (read, project, retain everything).

The full algorithm runs through a query without ``read_surface_outline``, which the
service then cannot use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.jsoncodec import dumps_js
from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    assistant_message,
    user_message,
)
from core.query import SurfaceSnapshot, message_tail
from core.references import (
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
)
from core.references.projection import project_surface
from core.references.prompt import render_reference_prompt
from core.surface import fold_surface
from stores import MemorySessionStore, SessionQuery, SqliteSessionStore
from stores.base import SessionStore
from tests.references.plain_retention import plain_retain_source


class FullOnly:
    """A query with only ``read_surface``: the service reads every surface event."""

    def __init__(self, query: SessionQuery) -> None:
        self._query = query

    async def list_sessions(self) -> list[SessionHeader]:
        return await self._query.list_sessions()

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        return await self._query.read_surface(session_id)

    async def read_title(self, session_id: str) -> Any:
        return await self._query.read_title(session_id)

    async def read_titles(self, session_ids: Sequence[str] | None = None) -> Any:
        return await self._query.read_titles(session_ids)


class EventsTail(FullOnly):
    """The message tail and ``read_events_at``, without ``read_bodies_at`` (a query of a
    host that predates it): the kept bodies are read as whole events."""

    async def read_message_tail(self, session_id: str, budget: int) -> Any:
        return await self._query.read_message_tail(session_id, budget)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        return await self._query.read_events_at(session_id, seqs)


class Counting(SessionQuery):
    def __init__(self, store: SessionStore) -> None:
        super().__init__(store)
        self.bodies = 0

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        self.bodies += len(seqs)
        return await super().read_events_at(session_id, seqs)

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        self.bodies += len(seqs)
        return await super().read_bodies_at(session_id, seqs)


WORDS = ["a", "é", "<b>", "中文", "\ud800", "\U0001f600", "x" * 40, '"q"', "\\", "\n"]
text = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join)
step = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("assistant"), text),
    st.tuples(st.just("steer"), text),
    st.tuples(st.just("tool"), text),
    st.tuples(st.just("chunk"), text),
    st.tuples(st.just("huge"), st.integers(1_000, 20_000)),
    st.tuples(st.just("compact"), st.tuples(text, st.integers(0, 50), st.integers(0, 50))),
    st.tuples(st.just("replace"), st.tuples(text, st.integers(0, 50), st.integers(0, 50))),
    st.tuples(st.just("batch"), st.tuples(text, st.integers(0, 50), st.integers(0, 50))),
)


async def write(store: SessionStore, sid: str, steps: list[tuple[str, Any]]) -> None:
    await store.create_session(sid, cwd="/src", created_at=1)
    surface: list[int] = []  # node order, as the store folds it
    seq = 0
    for kind, arg in steps:
        ev: NewEvent
        op: Any = "append"
        if kind == "user":
            ev = NewEvent("user/message", user_message(arg), "append")
        elif kind == "assistant":
            data = {"turn": 1, "message": assistant_message(arg, provider="p", model="m")}
            ev = NewEvent("assistant/message", data, "append")
        elif kind == "steer":
            ev = NewEvent("steering/message", {"turn": 1, "message": user_message(arg)}, "append")
        elif kind == "tool":
            message = user_message(arg, source={"kind": "tool", "callId": "c"})
            ev = NewEvent("tool/result", {"turn": 1, "message": message}, "append")
        elif kind == "chunk":
            ev = NewEvent("assistant/chunk", {"turn": 1, "chunk": {"text": arg}})
        elif kind == "huge":
            ev = NewEvent("user/message", user_message("h<" * arg), "append")
        elif kind == "batch":
            # One batch: two appends, then a compaction of a range ending at the second
            # (so a replace meets nodes appended in its own batch).
            body, a, _ = arg
            first = NewEvent("user/message", user_message(body + " 1"), "append")
            reply = assistant_message(body, provider="p", model="m")
            second = NewEvent("assistant/message", {"turn": 1, "message": reply}, "append")
            nodes = [*surface, seq, seq + 1]
            lo = a % len(nodes)
            shadowed = nodes[lo:]
            compact = NewEvent(
                "user/message",
                user_message("batch summary", source=COMPACT_CHECKPOINT_SOURCE),
                Replace(shadowed[0], shadowed[-1]),
                list(shadowed),
            )
            await store.append_batch(sid, [first, second, compact])
            surface[:] = [*nodes[:lo], seq + 2]
            seq += 3
            continue
        else:
            body, a, b = arg
            if not surface:
                continue
            lo, hi = sorted((a % len(surface), b % len(surface)))
            shadowed = surface[lo : hi + 1]
            source = COMPACT_CHECKPOINT_SOURCE if kind == "compact" else None
            op = Replace(shadowed[0], shadowed[-1])
            ev = NewEvent(
                "user/message", user_message(body or "s", source=source), op, list(shadowed)
            )
        await store.append_batch(sid, [ev])
        if ev.surface_op is not None:
            if op == "append":
                surface.append(seq)
            else:
                lo = surface.index(op.start)
                hi = surface.index(op.end)
                surface[lo : hi + 1] = [seq]
        seq += 1


async def tails_agree(store: SessionStore, budgets: Sequence[int]) -> None:
    """The store's ``read_message_tail`` (from the nodes and sums it keeps) is exactly
    ``message_tail`` of the folded outline, at each budget."""
    _, last, rows = await store.read_surface_outline("src")
    nodes = [(row.seq, row.projection) for row in fold_surface(rows) if row.projection >= 0]
    for budget in budgets:
        header, last_seq, tail = await store.read_message_tail("src", budget)
        assert (header.id, last_seq) == ("src", last)
        assert tail == message_tail(nodes, budget), budget


async def both(store: SessionStore, budget: int) -> tuple[str, str, int]:
    target = await store.create_session("target", cwd="/t", created_at=2)
    config = SessionReferenceConfig(max_reference_bytes=budget)
    refs = [SessionReferenceInput("src", "Source <1>")]
    outs: list[str] = []
    texts: list[str] = []
    counting = Counting(store)
    for query in (counting, FullOnly(SessionQuery(store)), EventsTail(SessionQuery(store))):
        service = SessionReferenceService(query, config)  # type: ignore[arg-type]
        try:
            prepared = await service.prepare(target, "hi", refs)
            context = dict(prepared.additional_context or {})
            context.pop("id")  # a new message id each time
            outs.append(dumps_js(context))
            texts.append(context["content"][0]["text"])
        except SessionReferenceError as err:
            outs.append(f"error {err.code}: {err}")
    assert outs[2] == outs[0]  # bodies read as events or as (type, data): the same
    # The plain algorithm, with texts as str all along (projection, retain_source,
    # render_reference_prompt), as prepare's texts in UTF-8 must give it.
    snapshot = await SessionQuery(store).read_surface("src")
    try:
        plain = plain_retain_source(
            session_id="src",
            label=refs[0].label or "",
            cwd=snapshot.session.cwd,
            captured_through_seq=snapshot.captured_through_seq,
            messages=project_surface(snapshot.events),
            max_bytes=budget,
        )
    except SessionReferenceError as err:
        assert outs[0] == f"error {err.code}: {err}"
    else:
        assert texts[0] == render_reference_prompt([plain.source])
    return outs[0], outs[1], counting.bodies


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=40), budget=st.integers(150, 2_500))
def test_bounded_prepare_is_byte_identical_to_the_full_algorithm(
    steps: list[tuple[str, Any]], budget: int
) -> None:
    async def run() -> None:
        store = MemorySessionStore()
        await write(store, "src", steps)
        bounded, full, _ = await both(store, budget)
        assert bounded == full

    asyncio.run(run())


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), budget=st.integers(150, 2_500))
def test_bounded_prepare_on_sqlite_is_byte_identical(
    tmp_path_factory: Any, steps: list[tuple[str, Any]], budget: int
) -> None:
    path: Path = tmp_path_factory.mktemp("bounded") / "dsh.sqlite3"

    async def run() -> None:
        async with await SqliteSessionStore.open(path) as store:
            await write(store, "src", steps)
            await tails_agree(store, [0, 1, 40, budget, 10**6])
            bounded, full, _ = await both(store, budget)
            assert bounded == full

    asyncio.run(run())


async def test_prepare_reads_only_the_bodies_it_keeps() -> None:
    store = MemorySessionStore()
    steps: list[tuple[str, Any]] = [("user", "x" * 300), ("assistant", "y" * 300)] * 500
    steps.insert(10, ("compact", ("summary", 0, 5)))
    await write(store, "src", steps)
    bounded, full, bodies = await both(store, 4_000)
    assert bounded == full
    # About 4,000 bytes of 300-byte messages, plus the checkpoint and the one that
    # did not fit: far fewer than the 995 messages on the surface.
    assert 10 <= bodies <= 20


async def test_every_budget_cuts_exactly_where_the_full_algorithm_does() -> None:
    """Short messages of varied sizes, each budget a different cut: any slack in the
    bound (a message skipped that the full algorithm would keep) shows as a difference."""
    words = ["a", "<", "中", "\ud800", "bb", "\n"]
    steps: list[tuple[str, Any]] = [
        ("user" if i % 2 else "assistant", " ".join(words[: i % 7]) + str(i)) for i in range(120)
    ]
    steps.insert(30, ("compact", ("kept summary <x>", 3, 9)))
    for budget in range(250, 5_000, 61):
        store = MemorySessionStore()
        await write(store, "src", steps)
        bounded, full, _ = await both(store, budget)
        assert bounded == full, budget
        await store.delete_session("target")  # both() makes it afresh


async def test_bounded_prepare_is_byte_identical_on_every_store(store: SessionStore) -> None:
    """Memory, SQLite and PostgreSQL (the ``store`` fixture): a log with every kind of
    step, cut at a sweep of budgets, prepares exactly as the full algorithm does."""
    steps: list[tuple[str, Any]] = []
    for i in range(12):
        steps += [("user", f"question {i} 问题"), ("chunk", "x"), ("assistant", f"answer {i}")]
        if i % 4 == 1:
            steps += [("steer", f"steer {i}"), ("tool", f"tool output {i}")]
        if i == 5:
            steps.append(("compact", ("summary of the first half", 0, 12)))
        if i == 8:
            steps.append(("huge", 9_000))
    await write(store, "src", steps)
    await tails_agree(store, [0, 10, 100, 500, 3_000, 20_000])
    for budget in (150, 400, 900, 2_000, 5_000, 12_000, 40_000):
        bounded, full, _ = await both(store, budget)
        assert bounded == full, budget
        await store.delete_session("target")  # both() makes it afresh


class TailOnly(Counting):
    """The real query, whose whole-surface reads fail: prepare must not need them."""

    async def read_surface_outline(self, session_id: str) -> Any:
        raise AssertionError("prepare read the whole outline")

    async def read_surface(self, session_id: str) -> Any:
        raise AssertionError("prepare read the whole surface")


async def test_prepare_reads_the_message_tail_not_the_whole_surface(store: SessionStore) -> None:
    """On every store, a long source with a compaction and an edit is prepared from its
    message tail (the newest messages, the older checkpoint, two sums) and the kept
    bodies: exactly what the full algorithm gives, without a whole-surface read."""
    steps: list[tuple[str, Any]] = [("user", "x" * 300), ("assistant", "y" * 300)] * 300
    steps.insert(40, ("compact", ("summary", 0, 30)))
    steps.insert(500, ("replace", ("edit", 400, 401)))
    await write(store, "src", steps)
    await store.create_session("target", cwd="/t", created_at=2)
    target = await store.read_header("target")
    config = SessionReferenceConfig(max_reference_bytes=4_000)
    refs = [SessionReferenceInput("src", "Source")]
    query = TailOnly(store)
    prepared = await SessionReferenceService(query, config).prepare(target, "hi", refs)  # type: ignore[arg-type]
    full = await SessionReferenceService(FullOnly(SessionQuery(store)), config).prepare(  # type: ignore[arg-type]
        target, "hi", refs
    )
    assert prepared.additional_context is not None and full.additional_context is not None
    ours = dict(prepared.additional_context)
    theirs = dict(full.additional_context)
    ours.pop("id")
    theirs.pop("id")
    assert dumps_js(ours) == dumps_js(theirs)
    assert 10 <= query.bodies <= 20


def test_bodies_are_read_in_small_batches_each_checkpoint_alone() -> None:
    from core.references.service import _BODIES_PER_READ, _TEXT_BYTES_PER_READ, _batches

    message = 100 * 4  # a user message of 100 bytes
    checkpoint = 10 * 4 + 2
    huge = (_TEXT_BYTES_PER_READ + 1) * 4 + 1
    codes = [checkpoint, checkpoint, message, message, checkpoint, huge, message]
    assert _batches(codes) == [
        range(0, 1),
        range(1, 2),
        range(2, 4),
        range(4, 5),
        range(5, 6),
        range(6, 7),
    ]
    many = [message] * (2 * _BODIES_PER_READ + 1)
    n = _BODIES_PER_READ
    assert _batches(many) == [range(0, n), range(n, 2 * n), range(2 * n, 2 * n + 1)]
    by_bytes = [(_TEXT_BYTES_PER_READ // 3) * 4] * 7
    assert _batches(by_bytes) == [range(0, 3), range(3, 6), range(6, 7)]
    assert _batches([]) == []

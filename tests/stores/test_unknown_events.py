"""``read_unknown_events`` on every store kind: the events of types dsh does not know
(kept verbatim, log-only) in a seq range, whether stored alone, compressed or inside a
packed run of small log events (SQLite), with every other event left out."""

from __future__ import annotations

from typing import Any

import pytest

from core.log import (
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    NewEvent,
    Replace,
    assistant_message,
    is_known_event_type,
    user_message,
)
from stores import SessionQuery, SessionStore

HOSTILE = "[bold red]PWNED[/] \x1b[2J\x07 \u202eevil [link=x]y[/link]"


def user(text: str) -> NewEvent:
    return NewEvent("user/message", user_message(text), "append")


def assistant(text: str) -> NewEvent:
    message = assistant_message(text, provider="offline", model="echo-1")
    return NewEvent(ASSISTANT_MESSAGE, {"turn": 1, "step": 0, "message": message}, "append")


def odd(type_: str, **data: Any) -> NewEvent:
    return NewEvent(type_, data)


async def build(store: SessionStore, sid: str = "s") -> None:
    """Turns with unknown events between their items, a compaction of the first turns
    (unknown events before it and while it ran: not shown), more turns after it."""
    await store.create_session(sid, created_at=1_700_000_000_000)
    await store.append_batch(sid, [odd("session/opened", note="before everything")])
    surface: list[int] = []
    for i in range(6):
        done = await store.append_batch(
            sid,
            [
                user(f"early {i}"),
                odd("step/start", turn=i),
                assistant(f"early answer {i}"),
                NewEvent("assistant/chunk", {"turn": i, "chunk": {"text": "x"}}),
            ],
        )
        surface += [done[0].seq, done[2].seq]
    shadowed = surface[:8]  # the first four turns
    await store.append_batch(
        sid,
        [
            NewEvent("compact/start", {"turn": 7}),
            odd("agent/inbox/spliced", text="while compacting"),
            NewEvent(
                "user/message",
                user_message("summary", source=COMPACT_CHECKPOINT_SOURCE),
                Replace(shadowed[0], shadowed[-1]),
                shadowed,
            ),
            NewEvent("compact/end", {"turn": 7}),
            odd("request/header", reason="after the compaction", blob="b" * 500),
        ],
    )
    for i in range(7):
        await store.append_batch(
            sid,
            [
                user(f"late {i}"),
                odd("step/start", turn=10 + i, hostile=HOSTILE),
                assistant(f"late answer {i}"),
                odd("approval/asked", tool="sh") if i % 2 else odd("step/end", turn=10 + i),
            ],
        )


def _chunk(text: str) -> NewEvent:
    return NewEvent(
        "assistant/chunk",
        {"turn": 1, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        time=1_700_000_000_000,
    )


def _odd(type_: str, data: Any) -> NewEvent:
    return NewEvent(type_, data, time=1_700_000_000_001)


async def _build(store: SessionStore) -> list[NewEvent]:
    await store.create_session("s", created_at=1_700_000_000_000)
    batches: list[list[NewEvent]] = [
        [NewEvent("user/message", user_message("hi"), surface_op="append")],
        # A run of small log events: one pack on SQLite, unknown types inside it.
        [_chunk("a"), _odd("step/start", {"step": 1}), _chunk("b"), _chunk("c")],
        [_odd("agent/inbox/spliced", {"text": "\x1b[31m[bold]red[/bold]\x00", "n": 1})],
        # Large: a row of its own, stored compressed.
        [_odd("request/header", {"blob": "x" * 10_000})],
        [NewEvent("session/title", {"title": "t", "source": {"kind": "user"}})],
        [_chunk(str(i)) for i in range(40)],  # a pack of known types only
        [_odd("approval/asked", {"tool": "sh"}), _chunk("z")],
        [NewEvent("turn/end", {"turn": 1})],
    ]
    for batch in batches:
        await store.append_batch("s", batch)
    return [e for b in batches for e in b]


async def test_unknown_events_in_any_range(store: SessionStore) -> None:
    await _build(store)
    events = await store.read_events("s")
    unknown = [e for e in events if not is_known_event_type(e.type)]
    assert [e.type for e in unknown] == [
        "step/start",
        "agent/inbox/spliced",
        "request/header",
        "approval/asked",
    ]
    assert await store.read_unknown_events("s") == unknown
    last = events[-1].seq
    for after in range(-1, last + 1):
        for through in [*range(after, last + 2), None]:
            expected = [
                e for e in unknown if e.seq > after and (through is None or e.seq <= through)
            ]
            got = await store.read_unknown_events("s", after, through)
            assert got == expected, (after, through)


async def test_a_session_without_unknown_events_reads_none(store: SessionStore) -> None:
    await store.create_session("plain")
    await store.append("plain", "user/message", user_message("q"), surface_op="append")
    await store.append_batch("plain", [_chunk("x") for _ in range(5)])
    assert await store.read_unknown_events("plain") == []


async def test_bad_ranges_and_unknown_sessions(store: SessionStore) -> None:
    from core.errors import SessionNotFoundError

    await store.create_session("s")
    with pytest.raises(ValueError):
        await store.read_unknown_events("s", -2)
    with pytest.raises(ValueError):
        await store.read_unknown_events("s", 0, -2)
    with pytest.raises(SessionNotFoundError):
        await store.read_unknown_events("nope")


async def test_windows_show_the_unknown_events_of_their_range(store: SessionStore) -> None:
    """``read_surface_window`` and ``read_surface_page`` read the unknown events after
    the newest replace (the checkpoint) and after their first event, as the whole read."""
    await build(store, "w")
    query = SessionQuery(store)
    snapshot, unknown = await query.read_surface_with_unknown("w")
    surface = snapshot.events
    floor = max(e.seq for e in surface if e.surface_op not in (None, "append"))
    everything = await store.read_events("w")
    assert list(unknown) == [
        e for e in everything if not is_known_event_type(e.type) and e.seq > floor
    ]
    for newest in (0, 1, 2, 5, 9, 40):
        window = await query.read_surface_window("w", newest)
        page = await query.read_surface_page("w", newest)
        shown = surface[len(surface) - min(newest, len(surface)) :]
        low = max(floor, shown[0].seq) if 0 < len(shown) < len(surface) else floor
        expected = tuple(e for e in unknown if e.seq > low)
        assert window.events == page.events == shown
        assert window.unknown == expected, newest
        assert window.unknown_floor == floor
        assert page.unknown == expected, newest
        # From the newest rows alone while they hold no replace (the checkpoint);
        # else folded from every row, as read_surface_window.
        after = sum(e.seq > floor for e in surface)
        assert page.complete == (newest == 0 or newest > after)
        if not page.complete:
            assert page.seqs == tuple(e.seq for e in shown)

"""``SessionReferenceService.discover`` and ``search_sessions`` (issue 18): the candidates of
SPEC §4.4 first, unchanged, then the sessions found by what was said in them."""

from __future__ import annotations

import asyncio

import pytest

from core.log import SessionHeader, assistant_message, user_message
from core.references import (
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SessionReferenceError,
    SessionReferenceService,
)
from stores import SessionQuery, SessionStore


async def make(
    store: SessionStore, sid: str, *texts: str, cwd: str | None = None, title: str | None = None
) -> SessionHeader:
    header = await store.create_session(sid, cwd=cwd, created_at=len(sid))
    for i, text in enumerate(texts):
        if i % 2 == 0:
            await store.append(sid, "user/message", user_message(text), surface_op="append")
        else:
            reply = {
                "turn": 1,
                "step": 0,
                "message": assistant_message(text, provider="p", model="m"),
            }
            await store.append(sid, "assistant/message", reply, surface_op="append")
    if title is not None:
        await store.append(sid, "session/title", {"title": title, "source": {"kind": "user"}})
    return header


async def test_candidates_come_first_then_body_matches_by_relevance(store: SessionStore) -> None:
    target = await make(store, "target", "retry retry retry", cwd="/w")
    await make(store, "titled", "hello", cwd="/w", title="Retry policy")
    await make(store, "cwd-match", "nothing", cwd="/srv/retry")
    filler = " ".join(["word"] * 40)
    await make(store, "long", f"we might retry {filler}", cwd="/w", title="Long one")
    await make(store, "short", "question", "retry twice, retry", cwd="/w")
    await make(store, "both", "retry here too", cwd="/w", title="retry in the title")
    await make(store, "none", "unrelated", cwd="/w")
    service = SessionReferenceService(SessionQuery(store))
    rows = await service.discover(target, "retry")
    candidates = await service.list_candidates(target, "retry")
    assert [r.candidate for r in rows[: len(candidates)]] == candidates
    assert all(r.hit is None for r in rows[: len(candidates)])
    # "both" matches by its title: listed once, as a candidate. The target never.
    assert [r.candidate.session_id for r in rows] == [
        "titled",
        "both",
        "cwd-match",
        "short",
        "long",
    ]
    short, long = rows[3], rows[4]
    assert short.hit is not None and long.hit is not None
    assert (short.hit.seq, short.hit.snippet) == (1, "retry twice, retry")
    assert short.candidate.label == "short" and long.candidate.label == "Long one"
    assert long.candidate.mention.startswith("@[Long one](dsh-session:")
    assert [short.hit.snippet[a:b] for a, b in short.hit.spans] == ["retry", "retry"]


async def test_body_matches_are_deduplicated_and_limited(store: SessionStore) -> None:
    target = await make(store, "t")
    for k in range(5):
        await make(store, f"s{k}", "sigma one", "sigma two", "sigma three")
    service = SessionReferenceService(SessionQuery(store))
    rows = await service.discover(target, "sigma", limit=3)
    assert len(rows) == 3
    assert len({r.candidate.session_id for r in rows}) == 3
    assert all(r.hit is not None for r in rows)
    found = await service.search_sessions("sigma", exclude=["s0", "s1"])
    assert sorted(r.candidate.session_id for r in found) == ["s2", "s3", "s4"]
    # No session is excluded unless asked (the sidebar lists the open one too).
    assert len(await service.search_sessions("sigma")) == 5


async def test_a_blank_query_adds_no_body_matches(store: SessionStore) -> None:
    target = await make(store, "t", "x")
    await make(store, "a", "alpha")
    service = SessionReferenceService(SessionQuery(store))
    rows = await service.discover(target, "")
    assert [(r.candidate.session_id, r.hit) for r in rows] == [("a", None)]
    assert await service.search_sessions("   ") == []


async def test_bad_arguments_and_cancel(store: SessionStore) -> None:
    target = await make(store, "t")
    service = SessionReferenceService(SessionQuery(store))
    for limit in (0, True, "3"):
        with pytest.raises(SessionReferenceError) as info:
            await service.discover(target, "x", limit)  # type: ignore[arg-type]
        assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    with pytest.raises(SessionReferenceError) as info:
        await service.search_sessions(3)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        await service.discover(target, "x", cancel=cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED


async def test_a_query_without_search_lists_candidates_only(store: SessionStore) -> None:
    class Plain:
        """A query seam without ``search_messages`` (SPEC §4.4's minimum)."""

        def __init__(self, query: SessionQuery) -> None:
            self.list_sessions = query.list_sessions
            self.read_surface = query.read_surface
            self.read_title = query.read_title
            self.read_titles = query.read_titles

    target = await make(store, "t")
    await make(store, "a", "alpha")
    service = SessionReferenceService(Plain(SessionQuery(store)))
    assert await service.discover(target, "alpha") == []
    assert await service.search_sessions("alpha") == []

"""SPEC §4.4: candidates for the ``@`` picker, over the real store and query."""

from __future__ import annotations

import asyncio

import pytest

from core.errors import SessionNotFoundError
from core.log import SessionHeader
from core.references import (
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SessionReferenceCandidate,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    format_session_reference_mention,
)
from stores import SessionQuery, SessionStore
from tests.references.helpers import Log, ScriptedQuery, tasks_left_behind


async def seeded(store: SessionStore) -> tuple[SessionStore, SessionHeader]:
    """Sessions, newest first: t(target,/w) a(/w) b(None) c(/other) d(/w) e(None) f(/W)."""
    target = await store.create_session("t", cwd="/w", created_at=100)
    for sid, cwd, created in [
        ("a", "/w", 90),
        ("b", None, 80),
        ("c", "/other", 70),
        ("d", "/w", 60),
        ("e", None, 50),
        ("f", "/W", 40),
    ]:
        await store.create_session(sid, cwd=cwd, created_at=created)
    await Log(store, "a").title("Old name")
    await Log(store, "a").title("Straße planning")  # the latest title wins
    await Log(store, "c").title("Groceries")
    await Log(store, "d").title("")  # an empty title falls back to the id
    await Log(store, "e").user("body text mentions groceries")  # bodies are not searched
    return store, target


def ids(candidates: list[SessionReferenceCandidate]) -> list[str]:
    return [c.session_id for c in candidates]


async def test_groups_and_order(store: SessionStore) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    candidates = await service.list_candidates(target)
    # same cwd (a, d) → no cwd (b, e) → other cwd (c, f), list_sessions order inside each
    assert ids(candidates) == ["a", "d", "b", "e", "c", "f"]
    assert candidates[0] == SessionReferenceCandidate(
        "a",
        "Straße planning",
        "/w",
        90,
        format_session_reference_mention(SessionReferenceInput("a", "Straße planning")),
    )
    assert [c.label for c in candidates] == ["Straße planning", "d", "b", "e", "Groceries", "f"]
    assert candidates[2].mention == "@[b](dsh-session:ImIi)"


async def test_target_without_cwd_has_no_same_cwd_group(store: SessionStore) -> None:
    store, _ = await seeded(store)
    target = await store.create_session("u", cwd=None, created_at=1)
    service = SessionReferenceService(SessionQuery(store))
    assert ids(await service.list_candidates(target)) == ["b", "e", "t", "a", "c", "d", "f"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["a", "d", "b", "e", "c", "f"]),
        ("STRASSE", ["a"]),  # casefold: ß → ss, on the latest title
        ("old name", []),  # an older title does not match
        ("/W", ["a", "d", "f"]),  # cwd, case-insensitively
        ("/w", ["a", "d", "f"]),
        ("groceries", ["c"]),  # title yes, message body no
        ("E", ["a", "e", "c"]),  # title "Straße planning", id "e", cwd "/other"
        ("/other", ["c"]),
    ],
)
async def test_query_filter(store: SessionStore, query: str, expected: list[str]) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    assert ids(await service.list_candidates(target, query)) == expected


async def test_limits(store: SessionStore) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(
        SessionQuery(store), SessionReferenceConfig(candidate_limit=2)
    )
    assert ids(await service.list_candidates(target)) == ["a", "d"]
    assert ids(await service.list_candidates(target, limit=3)) == ["a", "d", "b"]
    assert ids(await service.list_candidates(target, limit=100)) == ["a", "d", "b", "e", "c", "f"]


@pytest.mark.parametrize("limit", [0, -1, True, False, 1.5, "3"])
async def test_invalid_limit(store: SessionStore, limit: object) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    with pytest.raises(SessionReferenceError) as info:
        await service.list_candidates(target, limit=limit)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


async def test_titles_come_from_one_query(store: SessionStore) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store))
    service = SessionReferenceService(query)
    await service.list_candidates(target, "x")
    assert query.calls["read_titles"] == 1
    assert query.calls["read_title"] == 0
    assert query.calls["list_sessions"] == 1
    assert query.calls["read_surface"] == 0


async def test_read_failure_is_chained(store: SessionStore) -> None:
    store, target = await seeded(store)
    cause = SessionNotFoundError("gone")
    query = ScriptedQuery(SessionQuery(store), fail={"list_sessions": cause})
    with pytest.raises(SessionReferenceError) as info:
        await SessionReferenceService(query).list_candidates(target)
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    assert info.value.__cause__ is cause


async def test_cancel_before_and_during(store: SessionStore) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store))
    service = SessionReferenceService(query)
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        await service.list_candidates(target, cancel=cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert query.calls["list_sessions"] == 0

    query.hang_lists = True
    cancel = asyncio.Event()
    task = asyncio.ensure_future(service.list_candidates(target, cancel=cancel))
    await query.started.wait()
    cancel.set()
    with pytest.raises(SessionReferenceError) as info:
        await asyncio.wait_for(task, 5)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert await tasks_left_behind() == []

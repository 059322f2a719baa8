"""``stores.migrate`` run twice at once into one target (issue 30): every session ends up
there exactly once and identical to the source, nothing is reported as a conflict, and a
session another process holds is reported *busy*, never extended behind its back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.log import Event, NewEvent, SessionHeader, user_message
from core.logfile import export_jsonl
from core.store import SessionStore
from stores import migrate, open_store
from stores.migrate import MigrationReport, migrate_sessions
from tests.storekinds import DURABLE_KINDS, durable_location

MSG = "user/message"
SESSIONS = 8


@pytest.fixture(params=DURABLE_KINDS)
def target_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty target (SQLite file or PostgreSQL schema) the tests open twice."""
    with durable_location(request, tmp_path / "target") as where:
        (tmp_path / "target").mkdir(exist_ok=True)
        yield where


@pytest.fixture
async def source(tmp_path: Path) -> AsyncIterator[SessionStore]:
    store = await open_store(tmp_path / "source.sqlite3")
    for n in range(SESSIONS):
        sid = f"s{n}"
        await store.create_session(sid, cwd=f"/w/{n}", created_at=n + 1)
        for turn in range(n + 2):
            await store.append(sid, MSG, user_message(f"{sid} turn {turn}"), surface_op="append")
        await store.append(sid, "session/title", {"title": f"title {n}"})
    yield store
    await store.close()


def _mine(header: SessionHeader) -> SessionHeader:
    """The header as the migrating user's own in the target (as ``migrate`` makes it)."""
    return replace(header, owner=None)


def _new(events: list[Event]) -> list[NewEvent]:
    return [NewEvent(e.type, e.data, e.surface_op, e.source_event_seqs, e.time) for e in events]


async def _exports(store: SessionStore) -> dict[str, list[str]]:
    """``dsh export --format json`` of every session, line by line."""
    return {
        h.id: list(export_jsonl(h, await store.read_events(h.id)))
        for h in await store.list_headers()
    }


async def _twice(source: SessionStore, target_at: str) -> tuple[MigrationReport, ...]:
    first, second = await open_store(target_at), await open_store(target_at)
    try:
        return tuple(
            await asyncio.gather(migrate_sessions(source, first), migrate_sessions(source, second))
        )
    finally:
        await first.close()
        await second.close()


async def _check_identical(source: SessionStore, target_at: str) -> None:
    async with await open_store(target_at) as target:
        assert await _exports(target) == await _exports(source)


async def test_two_migrations_into_an_empty_target(source: SessionStore, target_at: str) -> None:
    reports = await _twice(source, target_at)
    for report in reports:
        assert report.conflicts == []
        assert report.copied + report.extended + report.present == SESSIONS
    assert sum(r.copied for r in reports) == SESSIONS  # each imported by one of them
    await _check_identical(source, target_at)


async def test_two_migrations_completing_the_same_sessions(
    source: SessionStore, target_at: str
) -> None:
    """The target holds the first two events of every session: both migrations find the
    rest missing, and only one of them appends it."""
    async with await open_store(target_at) as target:
        for header in await source.list_headers():
            events = await source.read_events(header.id)
            await target.import_session(_mine(header), _new(events[:2]))
    reports = await _twice(source, target_at)
    for report in reports:
        assert report.conflicts == []
        assert report.extended + report.present == SESSIONS
    assert sum(r.extended for r in reports) == SESSIONS
    await _check_identical(source, target_at)


async def test_a_session_whose_lease_is_held_elsewhere_is_busy(
    source: SessionStore, target_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrate, "LEASE_WAITS_S", (0.01, 0.01))
    async with await open_store(target_at) as target:
        header = (await source.list_headers())[0]
        await target.import_session(_mine(header), _new((await source.read_events(header.id))[:1]))
        # a reply running in another process (of another machine: it cannot be judged dead)
        assert await target.take_reply_lease(header.id, "elsewhere:1:x", ttl_ms=60_000)
        report = await migrate_sessions(source, target)
        assert report.busy == [header.id] and report.conflicts == []
        assert report.copied == SESSIONS - 1
        assert len(await target.read_events(header.id)) == 1  # not extended behind its back
        await target.release_reply_lease(header.id, "elsewhere:1:x")
        again = await migrate_sessions(source, target)
        assert (again.extended, again.present, again.busy) == (1, SESSIONS - 1, [])
        # the migration gave its own lease back
        assert await target.read_reply_lease(header.id) is None
    await _check_identical(source, target_at)


async def test_a_lease_given_back_while_waiting_is_taken(
    source: SessionStore, target_at: str
) -> None:
    async with await open_store(target_at) as target:
        header = (await source.list_headers())[0]
        await target.import_session(_mine(header), _new((await source.read_events(header.id))[:1]))
        assert await target.take_reply_lease(header.id, "elsewhere:1:x", ttl_ms=60_000)

        async def give_back() -> None:
            await asyncio.sleep(0.15)
            await target.release_reply_lease(header.id, "elsewhere:1:x")

        report, _ = await asyncio.gather(migrate_sessions(source, target), give_back())
        assert (report.extended, report.copied, report.busy) == (1, SESSIONS - 1, [])
    await _check_identical(source, target_at)

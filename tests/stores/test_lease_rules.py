"""One rule for judging a reply lease on every store (``core.leases.lease_blocks``,
issue 30 point 9): a lease that runs out implausibly late (beyond ``MAX_LEASE_TTL_MS``
from now: a client whose clock ran ahead, or a hand-written row) blocks nobody, and a
lease may not be taken for longer than that."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from core.leases import MAX_LEASE_TTL_MS
from core.store import SessionStore
from stores import MemorySessionStore, open_store
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url

LATE = 10 * MAX_LEASE_TTL_MS
"""How far beyond its TTL the far-future lease is pushed (a clock 100 minutes ahead)."""

Push = Callable[[str, int], Awaitable[None]]
"""Moves a session's lease expiry ``by`` milliseconds, behind the store's back."""


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def kind(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, Push]]:
    """A fresh store of each kind, and a way to rewrite its lease rows directly."""
    if request.param == "memory":
        async with MemorySessionStore() as memory:

            async def push_memory(session_id: str, by: int) -> None:
                holder, expires_at = memory._leases[session_id]
                memory._leases[session_id] = (holder, expires_at + by)

            yield memory, push_memory
    elif request.param == "sqlite":
        path = tmp_path / "dsh.sqlite3"
        async with await open_store(path) as store:

            def push_sqlite(by: int) -> None:
                with sqlite3.connect(path) as raw:
                    raw.execute("UPDATE reply_leases SET expires_at = expires_at + ?", (by,))

            async def push_file(session_id: str, by: int) -> None:
                await asyncio.to_thread(push_sqlite, by)

            yield store, push_file
    else:
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        with pg_schema_url(cluster, migrated=True) as url:
            schema = url.rpartition("search_path=")[2]
            async with await open_store(url) as store:

                async def push_server(session_id: str, by: int) -> None:
                    await asyncio.to_thread(
                        cluster.psql,
                        f"UPDATE {schema}.dsh_reply_leases SET expires_at = expires_at + {by}",
                    )

                yield store, push_server


async def test_a_lease_running_out_implausibly_late_blocks_nobody(
    kind: tuple[SessionStore, Push], request: pytest.FixtureRequest
) -> None:
    store, push = kind
    session = await store.create_session("s")
    assert await store.take_reply_lease(session.id, "fast clock", ttl_ms=60_000)
    await push(session.id, LATE)
    lease = await store.read_reply_lease(session.id)
    assert lease is not None and lease.holder == "fast clock"
    assert lease.expires_in_ms > MAX_LEASE_TTL_MS and not lease.live
    assert await store.take_reply_lease(session.id, "next", ttl_ms=60_000)
    taken = await store.read_reply_lease(session.id)
    assert taken is not None and taken.holder == "next" and taken.live
    assert not await store.take_reply_lease(session.id, "fast clock", ttl_ms=60_000)


async def test_a_lease_of_the_longest_ttl_blocks(kind: tuple[SessionStore, Push]) -> None:
    store, _ = kind
    session = await store.create_session("s")
    assert await store.take_reply_lease(session.id, "one", ttl_ms=MAX_LEASE_TTL_MS)
    assert not await store.take_reply_lease(session.id, "two", ttl_ms=60_000)


@pytest.mark.parametrize("ttl", [MAX_LEASE_TTL_MS + 1, LATE, -1, True, 1.5, "60000", None])
async def test_a_ttl_over_the_longest_is_refused(
    kind: tuple[SessionStore, Push], ttl: object, request: pytest.FixtureRequest
) -> None:
    store, _ = kind
    session = await store.create_session("s")
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.take_reply_lease(session.id, "one", ttl_ms=ttl)  # type: ignore[arg-type]
    assert await store.read_reply_lease(session.id) is None  # nothing was stored


async def test_a_renewal_keeps_only_a_lease_still_held(kind: tuple[SessionStore, Push]) -> None:
    """``renew_reply_lease`` extends its holder's lease (even one that ran out, if nobody
    took it) and never takes back one that was broken or taken: in one step, so no
    ``dsh unlock`` between a check and a take is undone."""
    store, push = kind
    session = await store.create_session("s")
    assert not await store.renew_reply_lease(session.id, "writer", ttl_ms=60_000)  # none yet
    assert await store.take_reply_lease(session.id, "writer", ttl_ms=1_000)
    await push(session.id, -5_000)  # ran out, nobody took it
    assert await store.renew_reply_lease(session.id, "writer", ttl_ms=60_000)
    lease = await store.read_reply_lease(session.id)
    assert lease is not None and lease.live and lease.expires_in_ms > 50_000
    assert not await store.renew_reply_lease(session.id, "someone else", ttl_ms=60_000)
    assert await store.break_reply_lease(session.id)
    assert not await store.renew_reply_lease(session.id, "writer", ttl_ms=60_000)
    assert await store.read_reply_lease(session.id) is None
    assert await store.take_reply_lease(session.id, "next", ttl_ms=60_000)
    assert not await store.renew_reply_lease(session.id, "writer", ttl_ms=60_000)
    with pytest.raises(ValueError):
        await store.renew_reply_lease(session.id, "next", ttl_ms=MAX_LEASE_TTL_MS + 1)

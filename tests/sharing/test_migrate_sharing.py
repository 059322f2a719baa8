"""``dsh migrate`` (stores.migrate) carries owners and grants (issue 17): SQLite to a team
PostgreSQL and back."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import SessionNotFoundError, SessionReadOnlyError
from core.log import user_message
from core.sharing import Share
from stores import SqliteSessionStore, open_store
from stores.migrate import migrate_sessions
from tests.pgcluster import ALICE, BOB, Cluster

MSG = "user/message"


async def test_migrate_carries_owners_and_shares_both_ways(
    tmp_path: Path, pg_cluster: Cluster
) -> None:
    path = tmp_path / "mine.sqlite3"
    async with await SqliteSessionStore.open(path, user="alice-os") as src:
        for n, sid in enumerate(("a1", "a2"), 1):
            await src.create_session(sid, created_at=n)
            await src.append(sid, MSG, user_message(f"text of {sid}"), surface_op="append")
        await src.share("a1", BOB)
        await src.share("a1", "ghost")  # no such role on the server
    async with await SqliteSessionStore.open(path, user="carol") as carol:
        await carol.create_session("c1", created_at=3)
        await carol.share("c1", "alice-os")
    schema = pg_cluster.team_schema()
    alice_url, bob_url = pg_cluster.team_url(ALICE, schema), pg_cluster.team_url(BOB, schema)

    async with (
        await SqliteSessionStore.open(path, user="alice-os") as src,
        await open_store(alice_url) as dst,
    ):
        report = await migrate_sessions(src, dst)
        assert (report.total, report.copied, report.foreign, report.shares) == (3, 2, ["c1"], 1)
        assert len(report.share_problems) == 1 and "ghost" in report.share_problems[0]
        assert [(h.id, h.owner) for h in await dst.list_headers()] == [
            ("a2", ALICE),
            ("a1", ALICE),
        ]
        assert await dst.list_shares() == [Share("a1", ALICE, BOB)]
        again = await migrate_sessions(src, dst)
        assert (again.present, again.shares, again.foreign) == (2, 0, ["c1"])

    async with await open_store(bob_url) as bob:
        assert [(h.id, h.owner) for h in await bob.list_headers()] == [("a1", ALICE)]
        with pytest.raises(SessionReadOnlyError):
            await bob.append("a1", MSG, user_message("no"), surface_op="append")
        with pytest.raises(SessionNotFoundError):
            await bob.read_events("a2")

    back = tmp_path / "back.sqlite3"
    async with (
        await open_store(alice_url) as src,
        await SqliteSessionStore.open(back, user="alice-home") as dst,
    ):
        report = await migrate_sessions(src, dst)
        assert (report.copied, report.shares) == (2, 1)
        assert {h.owner for h in await dst.list_headers()} == {"alice-home"}
        assert await dst.list_shares() == [Share("a1", "alice-home", BOB)]

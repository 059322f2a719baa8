"""A team database for the sharing tests (issue 17): a fresh schema on the suite's
throwaway cluster used by two plain login roles, ``alice`` and ``bob`` (members of the
group role ``dsh_users``; neither superuser nor BYPASSRLS). Alice opens it first, so her
migration creates the tables and she owns them: FORCE ROW LEVEL SECURITY must hold her
to the policies too."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from core.log import assistant_message, user_message
from stores import open_store
from stores.postgres import PostgresSessionStore
from tests.pgcluster import ALICE, BOB, TEAM_GROUP, Cluster

__all__ = ["ADMIN", "Team", "admin_schema", "admin_team", "plain_sql", "seed_team", "team"]


@dataclass(frozen=True)
class Team:
    cluster: Cluster
    schema: str
    alice_url: str
    bob_url: str
    private: str  # alice's, never shared
    shared: str  # alice's, shared with bob
    bobs: str  # bob's own


ADMIN = "dsh_admin"
"""The role that owns an admin-owned team schema's tables (the README's set-up)."""


def admin_schema(cluster: Cluster) -> str:
    """A new schema as the README sets a team database up: ``ADMIN`` owns it (and, once
    it opens dsh on it, the tables); the members may use it, not create in it."""
    name = "adm_" + uuid.uuid4().hex[:16]
    cluster.psql(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ADMIN}') "
        f"THEN CREATE ROLE {ADMIN} LOGIN NOSUPERUSER NOBYPASSRLS; END IF; END $$;"
        f"CREATE SCHEMA {name} AUTHORIZATION {ADMIN}; GRANT USAGE ON SCHEMA {name} TO {TEAM_GROUP}"
    )
    return name


async def seed_team(cluster: Cluster, *, admin: bool = False) -> Team:
    """Alice's private session, her session shared with bob, and bob's own; each with a
    title, a message and a reply; alice holds a reply lease on her private one. Alice
    migrates the schema (and owns the tables), or with ``admin`` the admin role does."""
    if admin:
        schema = admin_schema(cluster)
        async with await open_store(cluster.team_url(ADMIN, schema)):
            pass
    else:
        schema = cluster.team_schema()
    alice_url, bob_url = cluster.team_url(ALICE, schema), cluster.team_url(BOB, schema)
    alice = await open_store(alice_url)
    bob = await open_store(bob_url)
    try:
        assert isinstance(alice, PostgresSessionStore)
        for store, sid, title, cwd in (
            (alice, "alice-private", "Alice secret plans", "/work/a"),
            (alice, "alice-shared", "Alice shared notes", "/work/a"),
            (bob, "bob-own", "Bob own work", "/work/a"),
        ):
            await store.create_session(sid, cwd=cwd)
            await store.append(sid, "session/title", {"title": title, "source": {"kind": "user"}})
            await store.append(
                sid, "user/message", user_message(f"hello from {sid}"), surface_op="append"
            )
            await store.append(
                sid,
                "assistant/message",
                {
                    "turn": 0,
                    "step": 0,
                    "message": assistant_message(
                        f"reply in {sid}", provider="offline", model="echo-1"
                    ),
                },
                surface_op="append",
            )
        assert await alice.take_reply_lease("alice-private", "alice-proc", ttl_ms=600_000)
        assert await alice.share("alice-shared", BOB)
    finally:
        await alice.close()
        await bob.close()
    return Team(cluster, schema, alice_url, bob_url, "alice-private", "alice-shared", "bob-own")


@pytest.fixture
async def team(pg_cluster: Cluster) -> AsyncIterator[Team]:
    yield await seed_team(pg_cluster)


@pytest.fixture
async def admin_team(pg_cluster: Cluster) -> AsyncIterator[Team]:
    """``team``, with the tables owned by the admin role (neither alice nor bob)."""
    yield await seed_team(pg_cluster, admin=True)


@contextlib.asynccontextmanager
async def plain_sql(url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection as a member (no dsh in between): what an attacker has."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()

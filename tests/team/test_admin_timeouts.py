"""Timeouts an admin set on the server (issue 34, point 2): ``ALTER ROLE … SET
statement_timeout`` or ``ALTER DATABASE … SET lock_timeout``. dsh's own limits (the
config's ``[postgres]``) bound every statement; an admin's stricter one wins over them
(an admin's looser one does not loosen them), and a statement it stops ends in one clear
line naming the limit and who set it."""

from __future__ import annotations

import time

import asyncpg
import pytest

from core.config import PostgresLimits
from core.errors import StoreError
from core.log import USER_MESSAGE, user_message
from stores.postgres import PostgresSessionStore
from tests.pgbouncer import pgbouncer_or_skip, running_pgbouncer
from tests.pgcluster import ALICE, BOB, Cluster
from tests.team.soundness import assert_store_sound

pytestmark = pytest.mark.timeout(60)


async def _append_while_locked(cluster: Cluster, store: PostgresSessionStore, schema: str) -> str:
    """Append while the superuser holds the sessions table: the error's words, and how
    long the append waited."""
    admin = await asyncpg.connect(cluster.url())
    try:
        async with admin.transaction():
            await admin.execute(f"LOCK TABLE {schema}.dsh_sessions IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError) as caught:
                await store.append("s", USER_MESSAGE, user_message("waits"), surface_op="append")
    finally:
        await admin.close()
    return str(caught.value)


async def test_an_admins_stricter_statement_timeout_wins_and_is_named(
    own_cluster: Cluster,
) -> None:
    schema = own_cluster.team_schema()
    own_cluster.psql(f"ALTER ROLE {ALICE} SET statement_timeout = '500ms'")
    try:
        store = await PostgresSessionStore.open(own_cluster.team_url(ALICE, schema))
        try:
            await store.create_session("s")
            started = time.monotonic()
            said = await _append_while_locked(own_cluster, store, schema)
            waited = time.monotonic() - started
            assert waited < 5  # the admin's 0.5 s, not dsh's 10 s lock_timeout
            assert "\n" not in said
            assert "statement_timeout" in said and "0.5 s" in said, said
            assert "administrator" in said, said
            assert await store.read_events("s") == []  # nothing stored
            await store.append("s", USER_MESSAGE, user_message("then"), surface_op="append")
            await assert_store_sound(store)
        finally:
            await store.close()
    finally:
        own_cluster.psql(f"ALTER ROLE {ALICE} RESET statement_timeout")


async def test_an_admins_looser_limit_does_not_loosen_dshs(own_cluster: Cluster) -> None:
    schema = own_cluster.team_schema()
    own_cluster.psql(f"ALTER ROLE {BOB} SET lock_timeout = '1h'")
    try:
        limits = PostgresLimits(lock_timeout=0.1)
        store = await PostgresSessionStore.open(own_cluster.team_url(BOB, schema), limits=limits)
        try:
            await store.create_session("s")
            started = time.monotonic()
            said = await _append_while_locked(own_cluster, store, schema)
            assert time.monotonic() - started < 5  # dsh's 0.1 s, not the admin's hour
            assert "lock_timeout" in said and "0.1 s" in said and "administrator" not in said
            await assert_store_sound(store)
        finally:
            await store.close()
    finally:
        own_cluster.psql(f"ALTER ROLE {BOB} RESET lock_timeout")


async def test_an_admins_database_lock_timeout_wins_and_is_named(own_cluster: Cluster) -> None:
    _, url = own_cluster.fresh_schema_url()
    schema = url.rpartition("search_path=")[2]
    own_cluster.psql("ALTER DATABASE dsh SET lock_timeout = '80ms'")
    try:
        store = await PostgresSessionStore.open(url)
        try:
            await store.create_session("s")
            started = time.monotonic()
            said = await _append_while_locked(own_cluster, store, schema)
            assert time.monotonic() - started < 5
            assert "\n" not in said
            assert "lock_timeout" in said and "0.08 s" in said and "administrator" in said, said
            await assert_store_sound(store)
        finally:
            await store.close()
    finally:
        own_cluster.psql("ALTER DATABASE dsh RESET lock_timeout")


async def test_behind_a_pooler_the_admins_stricter_limit_wins_too(own_cluster: Cluster) -> None:
    """Through PgBouncer (transaction pooling) the limits are set per transaction: the
    admin's stricter one is read once and set in each."""
    pgbouncer_or_skip()
    schema = own_cluster.team_schema()
    own_cluster.psql(f"ALTER ROLE {ALICE} SET statement_timeout = '500ms'")
    try:
        with running_pgbouncer(own_cluster, [ALICE]) as bouncer:
            store = await PostgresSessionStore.open(bouncer.team_url(ALICE, schema))
            try:
                assert store.pooled
                await store.create_session("s")
                started = time.monotonic()
                said = await _append_while_locked(own_cluster, store, schema)
                assert time.monotonic() - started < 5
                assert "\n" not in said
                assert "statement_timeout" in said and "0.5 s" in said, said
                assert "administrator" in said, said
                await assert_store_sound(store)
            finally:
                await store.close()
    finally:
        own_cluster.psql(f"ALTER ROLE {ALICE} RESET statement_timeout")

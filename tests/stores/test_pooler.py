"""The PostgreSQL store behind PgBouncer in transaction pooling mode (issue 34, point 1).

The store's shared tests run through PgBouncer too (the ``pgbouncer`` kind of
``tests/stores/conftest.py``); these are about what only a pooler changes: how it is found,
settings per transaction, statements that meet another server connection each time, and
following other writers by polling the ``dsh_changes`` counter instead of LISTEN.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.config import ConfigError, PostgresLimits, load_config
from core.errors import StoreError
from core.log import USER_MESSAGE, NewEvent
from stores import open_store
from stores.postgres import PostgresSessionStore
from stores.postgres.pooling import (
    POLL_SQL,
    ChangePoller,
    local_settings_sql,
    split_server_settings,
)
from tests.pgbouncer import Bouncer, running_pgbouncer
from tests.pgcluster import ALICE, BOB, SUPERUSER, Cluster

pytestmark = pytest.mark.timeout(120)


def user_message(text: str) -> dict[str, object]:
    return {"content": text}


@pytest.fixture
def schema(pg_cluster: Cluster) -> str:
    name, _url = pg_cluster.fresh_schema_url(migrated=True)
    return name


@pytest.fixture
async def pooled(pg_bouncer: Bouncer, schema: str) -> AsyncIterator[PostgresSessionStore]:
    store = await PostgresSessionStore.open(pg_bouncer.url(search_path=schema))
    try:
        yield store
    finally:
        await store.close()


async def test_a_pooler_is_found_without_a_setting_and_says_nothing(
    pooled: PostgresSessionStore, pg_cluster: Cluster, schema: str
) -> None:
    assert pooled.pooled
    assert not pooled.listening
    assert pooled.take_notice() is None
    async with await PostgresSessionStore.open(pg_cluster.url(search_path=schema)) as direct:
        assert not direct.pooled
        assert not direct.listening  # until something follows other writers
        await direct.change_token()
        assert direct.listening


@pytest.mark.parametrize("mode", ["transaction", "session"])
async def test_a_pooler_that_lets_dsh_settings_through_is_found_too(
    pg_cluster: Cluster, mode: str
) -> None:
    """An admin who added dsh's settings to ``ignore_startup_parameters`` (PgBouncer then
    accepts and drops them): the pooler is found by the process id it answers with, which
    is not the server's, and dsh works as behind it (in session mode too)."""
    schema, _url = pg_cluster.fresh_schema_url(migrated=True)
    ignored = [
        "extra_float_digits",
        "lock_timeout",
        "statement_timeout",
        "idle_in_transaction_session_timeout",
        "search_path",
    ]
    with running_pgbouncer(
        pg_cluster, [SUPERUSER], pool_mode=mode, ignore_startup_parameters=ignored
    ) as bouncer:
        limits = PostgresLimits(statement_timeout=7)
        url = bouncer.url(search_path=schema)
        async with await PostgresSessionStore.open(url, limits=limits) as store:
            assert store.pooled and not store.listening
            assert store.take_notice() is None

            async def shown(conn: asyncpg.Connection) -> tuple[str, str]:
                row = await conn.fetchrow(
                    "SELECT current_setting('statement_timeout'), current_setting('search_path')"
                )
                return row[0], row[1]

            assert await store._run(shown, write=False) == ("7s", schema)
            header = await store.create_session(cwd="/p")
            assert (await store.read_header(header.id)).cwd == "/p"


async def test_the_setting_works_on_a_direct_server_too(pg_cluster: Cluster, schema: str) -> None:
    limits = PostgresLimits(pooler=True)
    async with await PostgresSessionStore.open(
        pg_cluster.url(search_path=schema), limits=limits
    ) as store:
        assert store.pooled
        header = await store.create_session(cwd="/tmp")
        await store.append(
            header.id, USER_MESSAGE, user_message("pooled, direct"), surface_op="append"
        )
        assert [e.data for e in await store.read_events(header.id)] == [
            user_message("pooled, direct")
        ]


async def test_settings_hold_in_every_transaction(pg_bouncer: Bouncer, schema: str) -> None:
    """dsh's limits and the URL's search_path reach the server per transaction (PgBouncer
    refuses them as startup parameters), whichever server connection it gets; the URL
    does not override dsh's limits (as on a direct connection)."""
    limits = PostgresLimits(lock_timeout=3.5, statement_timeout=0.3)
    async with await PostgresSessionStore.open(
        pg_bouncer.url(search_path=schema, statement_timeout="1"), limits=limits
    ) as store:

        async def shown(conn: asyncpg.Connection) -> tuple[str, str, str]:
            row = await conn.fetchrow(
                "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), "
                "current_setting('search_path')"
            )
            return row[0], row[1], row[2]

        for _ in range(5):
            assert await store._run(shown, write=False) == ("3500ms", "300ms", schema)

        async def slow(conn: asyncpg.Connection) -> None:
            await conn.execute("SELECT pg_sleep(2)")

        with pytest.raises(StoreError, match=r"statement_timeout") as caught:
            await store._run(slow, write=False)
        assert "\n" not in str(caught.value)


async def test_many_clients_on_few_server_connections(pg_cluster: Cluster) -> None:
    """Eight stores share two server connections: each transaction lands on whichever is
    free, so a statement prepared on one and run on another would fail."""
    schema, _url = pg_cluster.fresh_schema_url(migrated=True)
    with running_pgbouncer(pg_cluster, [SUPERUSER], pool_size=2) as bouncer:
        stores = [await open_store(bouncer.url(search_path=schema)) for _ in range(8)]
        try:

            async def work(store: object, n: int) -> str:
                assert isinstance(store, PostgresSessionStore)
                header = await store.create_session(cwd=f"/w{n}")
                for i in range(15):
                    await store.append(
                        header.id,
                        USER_MESSAGE,
                        user_message(f"w{n} m{i} tangerine"),
                        surface_op="append",
                    )
                    await store.read_surface_events(header.id)
                    await store.search_messages("tangerine", limit=5)
                return header.id

            ids = await asyncio.gather(*(work(s, n) for n, s in enumerate(stores)))
            for sid in ids:
                events = await stores[0].read_events(sid)
                assert [e.seq for e in events] == list(range(15))
            servers = bouncer.show("servers")
            assert 1 <= len(servers) <= 2
        finally:
            for store in stores:
                await store.close()


async def test_pooled_stores_follow_each_other_and_direct_ones(
    pg_cluster: Cluster, pg_bouncer: Bouncer
) -> None:
    """Alice behind the pooler, Bob directly (listening): each sees the other's commits,
    nobody counts their own."""
    team = pg_cluster.team_schema()
    async with (
        await PostgresSessionStore.open(pg_bouncer.team_url(ALICE, team)) as alice,
        await PostgresSessionStore.open(pg_cluster.team_url(BOB, team)) as bob,
    ):
        assert alice.pooled and not bob.pooled
        a0, b0 = await alice.change_token(), await bob.change_token()
        mine = await alice.create_session(cwd="/a")
        await alice.append(mine.id, USER_MESSAGE, user_message("alice writes"), surface_op="append")
        assert await alice.change_token() == a0  # her own writes
        assert await _eventually(bob.change_token, b0)  # heard through NOTIFY
        a1 = await alice.change_token()
        theirs = await bob.create_session(cwd="/b")
        await bob.append(theirs.id, USER_MESSAGE, user_message("bob writes"), surface_op="append")
        assert await alice.change_token() != a1  # polled
        assert alice.take_notice() is None


async def _eventually(token: object, old: int) -> bool:
    for _ in range(200):
        if await token() != old:  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_bump_seen_before_its_commit_is_counted_again_once_it_commits(
    pooled: PostgresSessionStore, pg_cluster: Cluster, schema: str
) -> None:
    """A writer bumps ``dsh_changes`` before it commits: a poll in between sees the bump
    but not the rows. The poller counts that change again when the writer has ended, so a
    follower reading at each count never misses the rows."""
    writer = await asyncpg.connect(pg_cluster.url(search_path=schema))
    try:
        before = await pooled.change_token()
        tx = writer.transaction()
        await tx.start()
        await writer.execute("SELECT txid_current()")  # it has a transaction id, as a writer
        await writer.execute("SELECT nextval('dsh_changes')")
        seen = await pooled.change_token()
        assert seen == before + 1
        assert await pooled.change_token() == seen  # still running: nothing more to say
        await tx.commit()
        assert await pooled.change_token() == seen + 1
        assert await pooled.change_token() == seen + 1
    finally:
        await writer.close()


async def test_a_lost_pooler_is_said_once_and_its_return_too(pg_cluster: Cluster) -> None:
    schema, _url = pg_cluster.fresh_schema_url(migrated=True)
    name = f"bouncer-lost-{schema}"
    with running_pgbouncer(pg_cluster, [SUPERUSER], name=name) as bouncer:
        url = bouncer.url(search_path=schema)
        store = await open_store(url)
    try:
        assert isinstance(store, PostgresSessionStore)
        token = await _failing_token(store)
        notice = store.take_notice()
        assert notice is not None and notice[1] and "retrying" in notice[0]
        assert "\n" not in notice[0]
        await _failing_token(store)
        assert store.take_notice() is None  # once per outage
        with running_pgbouncer(pg_cluster, [SUPERUSER], name=name):
            assert await store.change_token() != token  # anything may have changed
            notice = store.take_notice()
            assert notice is not None and not notice[1] and "Reconnected" in notice[0]
            header = await store.create_session(cwd="/back")
            assert (await store.read_header(header.id)).cwd == "/back"
    finally:
        await store.close()


async def _failing_token(store: PostgresSessionStore) -> int:
    with pytest.raises(StoreError):
        await store.change_token()
    return store._poller.count


# ---------------------------------------------------------------------------- units


def test_server_settings_leave_the_url_and_are_set_per_transaction() -> None:
    dsn, found = split_server_settings(
        "postgresql://a@/db?host=%2Ftmp%2Fs&port=6432&search_path=t_1%2Cpublic&sslmode=disable"
    )
    assert found == {"search_path": "t_1,public"}
    assert "search_path" not in dsn and "host=%2Ftmp%2Fs" in dsn and "sslmode=disable" in dsn
    assert (
        local_settings_sql({"search_path": "it's"})
        == "SELECT set_config('search_path', 'it''s', true)"
    )
    assert local_settings_sql({}) == ""
    with pytest.raises(ValueError):
        local_settings_sql({"search_path": "a\x00b"})


def test_the_pooler_setting_in_the_config(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    path = tmp_path / "config.toml"
    path.write_text("[postgres]\npooler = true\n")
    assert load_config({}, config_path=path).postgres.pooler
    assert not load_config({"DSH_PG_POOLER": "0"}, config_path=path).postgres.pooler
    path.write_text("[postgres]\npooler = 'yes'\n")
    with pytest.raises(ConfigError, match="pooler must be true or false"):
        load_config({}, config_path=path)
    path.write_text("")
    assert load_config({"DSH_PG_POOLER": "1"}, config_path=path).postgres.pooler
    with pytest.raises(ConfigError, match="DSH_PG_POOLER"):
        load_config({"DSH_PG_POOLER": "maybe"}, config_path=path)


@dataclasses.dataclass
class _Server:
    """A model of what a poll sees of the server: transaction ids given out in order,
    the sequence (not transactional), and snapshots as PostgreSQL takes them: ``xmax``
    one past the newest ended transaction, ``xmin`` the oldest running one below it."""

    next_xid: int = 100
    latest_ended: int = 99
    value: int = 0
    running: dict[int, bool] = dataclasses.field(default_factory=dict)  # xid -> bumped
    committed: set[int] = dataclasses.field(default_factory=set)

    def begin(self) -> int:
        xid = self.next_xid
        self.next_xid += 1
        self.running[xid] = False
        return xid

    def end(self, xid: int) -> None:
        if self.running.pop(xid):
            self.committed.add(xid)
        self.latest_ended = max(self.latest_ended, xid)

    def xmin(self, own: int | None) -> int:
        xmax = self.latest_ended + 1
        return min((x for x in self.running if x < xmax and x != own), default=xmax)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["begin", "bump", "commit", "poll"]), max_size=60), st.randoms())
def test_a_follower_reading_at_each_count_misses_no_commit(steps: list[str], rnd: object) -> None:
    """Whatever the interleaving of writers' begin/bump/commit with polls, a follower that
    reads everything committed whenever the count moves has, after the writers end and
    one more poll, read every transaction that bumped."""
    import random

    assert isinstance(rnd, random.Random)
    server = _Server()
    poller = ChangePoller()
    read: set[int] = set()
    last = None

    def poll() -> None:
        nonlocal last
        value = server.value  # the counter first
        own = bound = None
        if poller.wants_bound(value, 0):
            own = bound = server.begin()  # pg_current_xact_id()
        count = poller.observe(value, bound, server.xmin(own), own=0)
        if own is not None:
            server.end(own)
        if count != last:
            read.update(server.committed)
            last = count

    poll()
    for step in steps:
        if step == "begin":
            server.begin()
        elif step == "bump" and server.running:
            xid = rnd.choice(sorted(server.running))
            server.running[xid] = True
            server.value += 1
        elif step == "commit" and server.running:
            server.end(rnd.choice(sorted(server.running)))
        elif step == "poll":
            poll()
    for xid in list(server.running):
        server.end(xid)
    poll()
    assert read == server.committed


def test_own_bumps_are_not_counted() -> None:
    poller = ChangePoller()
    assert poller.observe(10, 5, 5, own=0) == poller.count
    start = poller.count
    assert not poller.wants_bound(12, 2)
    assert poller.observe(12, None, 6, own=2) == start  # two of our own
    assert poller.wants_bound(13, 2)
    assert poller.observe(13, 7, 7, own=2) == start + 1  # one of someone else's


async def test_the_pooler_sets_nothing_before_each_transaction(pg_bouncer: Bouncer) -> None:
    """asyncpg names the encoding ``'utf-8'``, the server ``UTF8``: a pooler that compares
    the words would set it again before every transaction it hands over (a statement per
    transaction, seen under load). dsh names it as the server does."""
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    assert bindir is not None  # the pg_bouncer fixture's cluster needs them too
    with running_cluster(bindir, settings=("log_statement=all",)) as cluster:
        schema, _url = cluster.fresh_schema_url(migrated=True)
        with running_pgbouncer(cluster, [SUPERUSER]) as bouncer:
            store = await PostgresSessionStore.open(bouncer.url(search_path=schema))
            try:
                header = await store.create_session(cwd="/enc")
                for _ in range(10):
                    await store.read_header(header.id)
            finally:
                await store.close()
        log = (cluster.root / "log").read_text(errors="replace")
        assert "dsh_sessions" in log  # the statements are logged
        assert "client_encoding" not in log


async def test_a_write_bumps_the_counter_once(pooled: PostgresSessionStore) -> None:
    """An append that notifies and bumps in its own statement is not notified again by the
    transaction a pooler wraps it in (a second statement per reply write, and two counts)."""

    async def counter(conn: asyncpg.Connection) -> int:
        return int(await conn.fetchval(POLL_SQL))

    header = await pooled.create_session(cwd="/once")
    before = await pooled._run(counter, write=False)
    await pooled.append(header.id, USER_MESSAGE, user_message("once"), surface_op="append")
    assert await pooled._run(counter, write=False) == before + 1
    await pooled.append_batch(header.id, [NewEvent("chunk", {"t": "x"})] * 3)
    assert await pooled._run(counter, write=False) == before + 2

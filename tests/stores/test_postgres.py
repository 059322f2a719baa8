"""What only the PostgreSQL store has: its schema and versions, its change token over
LISTEN/NOTIFY, and a connection the server drops."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from core.errors import DiskFullError, StoreError
from core.log import NewEvent, user_message
from stores import MemorySessionStore, open_store
from stores.postgres import SCHEMA_VERSION, PostgresSessionStore
from tests.fulldisk import _mount, _unmount, tmpfs_mounts
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url
from tests.stores.pgdowngrade import downgrade_sql
from tui.shared.errors import describe_error

__all__ = ["tmpfs_mounts"]  # the fixture, for the full-disk test


@pytest.fixture
def url(pg_cluster: Cluster) -> Iterator[str]:
    with pg_schema_url(pg_cluster) as where:
        yield where


@pytest.fixture
async def pg(url: str) -> AsyncIterator[PostgresSessionStore]:
    store = await open_store(url)
    assert isinstance(store, PostgresSessionStore)
    try:
        yield store
    finally:
        await store.close()


def schema_of(url: str) -> str:
    return url.rpartition("search_path=")[2]


async def until(check: Callable[[], Awaitable[bool]], limit: float = 10.0) -> None:
    """Until ``check()`` holds (a generous bound: notifications arrive within moments)."""
    async with asyncio.timeout(limit):
        for _ in iter(int, 1):  # until it holds (bounded by the timeout)
            if await check():
                return
            await asyncio.sleep(0.01)


async def changed(store: PostgresSessionStore | object, since: int) -> bool:
    return await store.change_token() != since  # type: ignore[attr-defined, no-any-return]


async def not_listening(store: PostgresSessionStore) -> bool:
    return not store.listening


def _text(text: str) -> dict[str, object]:
    return {"id": "m", "role": "user", "content": [{"type": "text", "text": text}]}


async def test_schema_has_an_integer_session_key_and_a_version(
    pg: PostgresSessionStore, pg_cluster: Cluster, url: str
) -> None:
    schema = schema_of(url)
    await pg.create_session("s\x00\ud800", created_at=1)
    await pg.append("s\x00\ud800", "user/message", _text("hi"), surface_op="append")
    assert pg_cluster.psql(f"SELECT version FROM {schema}.dsh_schema") == str(SCHEMA_VERSION)
    columns = pg_cluster.psql(
        "SELECT table_name || '.' || column_name || ':' || data_type "
        f"FROM information_schema.columns WHERE table_schema = '{schema}' "
        "AND column_name IN ('key', 'session_key', 'id') ORDER BY 1"
    ).splitlines()
    assert columns == [
        "dsh_events.session_key:bigint",
        "dsh_reply_leases.session_key:bigint",
        "dsh_search.id:bigint",
        "dsh_search.session_key:bigint",  # read through the owner's function (issue 30)
        "dsh_sessions.id:bytea",
        "dsh_sessions.key:bigint",
        "dsh_shares.session_key:bigint",  # issue 17's grants
        "dsh_surface_nodes.session_key:bigint",
        "dsh_surface_sums.session_key:bigint",
    ]
    assert pg_cluster.psql(f"SELECT seq, kind, data FROM {schema}.dsh_events") == (
        '0|1|{"id":"m","role":"user","content":[{"type":"text","text":"hi"}]}'
    )


async def test_reopening_keeps_data_and_does_not_migrate_again(
    url: str, pg_cluster: Cluster
) -> None:
    async with await open_store(url) as first:
        await first.create_session("kept", created_at=1)
    async with await open_store(url) as again:
        assert [h.id for h in await again.list_headers()] == ["kept"]
    assert pg_cluster.psql(f"SELECT count(*) FROM {schema_of(url)}.dsh_schema") == "1"


async def test_a_newer_schema_is_refused(url: str, pg_cluster: Cluster) -> None:
    async with await open_store(url):
        pass
    pg_cluster.psql(f"UPDATE {schema_of(url)}.dsh_schema SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer than this dsh understands"):
        await open_store(url)


async def test_clients_opening_a_new_database_at_once_migrate_it_once(url: str) -> None:
    stores = await asyncio.gather(*(open_store(url) for _ in range(5)))
    try:
        await stores[0].create_session("s", created_at=1)
        for store in stores:
            assert [h.id for h in await store.list_headers()] == ["s"]
    finally:
        for store in stores:
            await store.close()


async def test_change_token_hears_other_clients_not_itself(url: str) -> None:
    async with await open_store(url) as mine, await open_store(url) as other:
        before = await mine.change_token()
        await mine.create_session("own", created_at=1)
        await mine.append("own", "x", {})
        assert await mine.change_token() == before  # its own writes: the caller knows them

        async def moved(since: int) -> int:
            await until(lambda: changed(mine, since))
            return await mine.change_token()

        await other.create_session("s")
        created = await moved(before)
        await other.append("s", "user/message", _text("hi"), surface_op="append")
        appended = await moved(created)
        await other.delete_session("s")
        await moved(appended)


async def terminate_dsh_connections(cluster: Cluster) -> None:
    """What a server restart or an administrator does to every dsh client connection."""
    await asyncio.to_thread(
        cluster.psql,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = 'dsh' OR (datname = 'dsh' AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend')",
        "postgres",
    )


async def test_a_store_listens_only_once_it_follows_other_writers(
    url: str, pg_cluster: Cluster
) -> None:
    """A one-shot command (``dsh send``, ``dsh show``) holds one connection to the server;
    the LISTEN connection opens at the first ``change_token``, which only a follower (the
    app) asks for."""

    def connections() -> int:
        return int(
            pg_cluster.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dsh' "
                "AND datname = 'dsh' AND pid <> pg_backend_pid()"
            )
        )

    before = connections()
    async with await open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        await store.create_session("s", created_at=1)
        assert [h.id for h in await store.list_headers()] == ["s"]
        assert connections() == before + 1 and not store.listening
        token = await store.change_token()
        assert connections() == before + 2 and store.listening
        async with await open_store(url) as other:
            await other.append("s", "x", {})
        await until(lambda: changed(store, token))
    assert connections() == before


async def test_a_dropped_connection_reconnects_and_says_so(url: str, pg_cluster: Cluster) -> None:
    async with await open_store(url) as mine, await open_store(url) as other:
        assert isinstance(mine, PostgresSessionStore)
        await other.create_session("s", created_at=1)
        token = await mine.change_token()
        assert mine.take_notice() is None

        await terminate_dsh_connections(pg_cluster)
        await until(lambda: not_listening(mine))
        # The next look reconnects; whatever happened meanwhile counts as a change.
        after = await mine.change_token()
        assert after != token
        notice = mine.take_notice()
        assert notice is not None and notice[0].startswith("Reconnected to postgresql://")
        assert notice[1] is False  # good news, not a warning
        assert mine.take_notice() is None  # said once
        # Reads carry on over fresh connections, and other writers are heard again.
        assert [h.id for h in await mine.list_headers()] == ["s"]
        await other.append("s", "x", {})
        await until(lambda: changed(mine, after))


async def test_cached_listings_see_other_clients_commits_at_once(url: str) -> None:
    """Listings are reused while nothing was committed, and never once something was."""
    async with await open_store(url) as mine, await open_store(url) as other:
        await mine.create_session("a", created_at=1)
        assert [h.id for h in await mine.list_headers()] == ["a"]
        assert await mine.read_titles() == {} and await mine.read_last_event_times() == {}
        first = await mine.list_headers()
        assert await mine.list_headers() == first  # unchanged: served from the cache
        await other.create_session("b", created_at=2)
        await other.append("a", "session/title", {"title": "Named elsewhere"}, time=7)
        # No waiting for a notification: the very next listing sees both commits.
        assert [h.id for h in await mine.list_headers()] == ["b", "a"]
        assert (await mine.read_titles())["a"].title == "Named elsewhere"
        assert await mine.read_last_event_times() == {"a": 7}
        await other.delete_session("a")
        assert [h.id for h in await mine.list_headers()] == ["b"]
        assert await mine.read_titles() == {} and await mine.read_last_event_times() == {}


async def test_a_read_only_server_opens_for_reading_and_refuses_writes(
    url: str, pg_cluster: Cluster
) -> None:
    role = "reader_" + schema_of(url)
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN")
    async with await open_store(url) as store:
        await store.create_session("kept", created_at=1)
        await store.share("kept", role)  # row security: else the reader sees nothing
    pg_cluster.psql(
        f"GRANT USAGE ON SCHEMA {schema_of(url)} TO {role}; "
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema_of(url)} TO {role}; "
        f"ALTER ROLE {role} SET default_transaction_read_only = on"
    )
    try:
        reader_url = url.replace("postgresql://dsh@", f"postgresql://{role}@")
        async with await open_store(reader_url) as reader:
            assert [h.id for h in await reader.list_headers()] == ["kept"]
            with pytest.raises(StoreError, match="the database is read-only") as info:
                await reader.create_session("new")
            assert "\n" not in str(info.value)
    finally:
        pg_cluster.psql(f"DROP OWNED BY {role}; DROP ROLE {role}")


async def test_a_server_that_stays_away_is_reported_once_then_the_return(
    url: str, pg_cluster: Cluster
) -> None:
    async with await open_store(url) as mine:
        assert isinstance(mine, PostgresSessionStore)
        await mine.change_token()  # following other writers, as the app does
        pg_cluster.psql("ALTER DATABASE dsh ALLOW_CONNECTIONS false", database="postgres")
        try:
            await terminate_dsh_connections(pg_cluster)
            await until(lambda: not_listening(mine))
            for _ in range(3):
                with pytest.raises(StoreError) as info:
                    await mine.change_token()
                assert "lost the connection" in str(info.value)
            notice = mine.take_notice()
            assert notice is not None and notice[1] is True
            assert notice[0].startswith("postgresql://dsh@/dsh?host=")
            assert notice[0].endswith("; retrying") and "\n" not in notice[0]
            with pytest.raises(StoreError):
                await mine.change_token()
            assert mine.take_notice() is None  # said once per outage
        finally:
            pg_cluster.psql("ALTER DATABASE dsh ALLOW_CONNECTIONS true", database="postgres")
        await mine.change_token()
        back = mine.take_notice()
        assert back is not None and back[0].startswith("Reconnected to ")
        assert await mine.list_headers() == []


async def test_a_full_server_disk_is_a_disk_full_error_and_stores_nothing(
    pg_cluster: Cluster, tmpfs_mounts: list[Path]
) -> None:
    """The session's tables live in a tablespace on a real 1 MiB tmpfs: when it fills, an
    append is ``DiskFullError`` (one line, "the server's disk is full"), the batch is not
    stored, and reading goes on."""
    mount = pg_cluster.root / f"full-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    problem = _mount(mount, 1 << 20)
    if problem is not None:
        message = f"cannot mount a tmpfs to fill the server's disk: {problem}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI must run this test)")
        pytest.skip(message)
    tmpfs_mounts.append(mount)
    owner = pg_cluster.root.stat()
    os.chown(mount, owner.st_uid, owner.st_gid)
    space = "ts_" + uuid.uuid4().hex[:12]
    pg_cluster.psql(f"CREATE TABLESPACE {space} LOCATION '{mount}'")
    name, url = pg_cluster.fresh_schema_url()
    url += f"&default_tablespace={space}"
    try:
        async with await open_store(url) as store:
            await store.create_session("s", created_at=1)
            await store.append("s", "user/message", _text("kept"), surface_op="append")
            big = _text(os.urandom(60_000).hex())  # incompressible, ~120 KB a row
            with pytest.raises(DiskFullError) as info:
                for _ in range(40):
                    await store.append_batch("s", [NewEvent("user/message", big, "append")] * 4)
            assert "the server's disk is full" in str(info.value)
            assert "\n" not in str(info.value)
            assert describe_error(info.value) == "the disk is full"
            events = await store.read_events("s")  # reading goes on; batches whole
            assert events[0].data["content"][0]["text"] == "kept"
            assert (len(events) - 1) % 4 == 0
    finally:
        pg_cluster.psql(f"DROP SCHEMA {name} CASCADE")
        pg_cluster.psql("CHECKPOINT")  # the dropped tables' files go at a checkpoint
        pg_cluster.psql(f"DROP TABLESPACE {space}")
        _unmount(mount)


async def test_the_outline_keeps_projections_and_computes_older_rows(
    url: str, pg_cluster: Cluster
) -> None:
    """Schema 2 keeps each surface event's projection code beside it (so prepare's outline
    read needs no event data); rows from before it (NULL) are computed when read. Either
    way the outline equals the memory store's."""
    from tests.references.test_prepare_bounded import write

    steps: list[tuple[str, object]] = [("user", "q 问"), ("assistant", "a"), ("tool", "t")] * 4
    steps += [("compact", ("summary", 0, 5)), ("steer", "s"), ("huge", 3_000), ("chunk", "x")]
    memory = MemorySessionStore()
    await write(memory, "src", steps)
    expected = (await memory.read_surface_outline("src"))[2]
    schema = schema_of(url)
    async with await open_store(url) as store:
        await write(store, "src", steps)
        assert (await store.read_surface_outline("src"))[2] == expected
        kept = pg_cluster.psql(
            f"SELECT count(*) FILTER (WHERE projection IS NULL), count(*) "
            f"FROM {schema}.dsh_events WHERE kind = 1"
        )
        assert kept == f"0|{len(expected)}"
        pg_cluster.psql(f"UPDATE {schema}.dsh_events SET projection = NULL")
        assert (await store.read_surface_outline("src"))[2] == expected


async def test_a_schema_1_database_gains_the_projection_column(pg_cluster: Cluster) -> None:
    from stores.postgres import MIGRATIONS

    name, url = pg_cluster.fresh_schema_url()
    pg_cluster.psql(
        f"SET search_path = {name};"
        + ";".join(MIGRATIONS[0])
        + ";CREATE TABLE dsh_schema (version integer NOT NULL);"
        + "INSERT INTO dsh_schema (version) VALUES (1)"
    )
    async with await open_store(url) as store:
        await store.create_session("s", created_at=1)
        await store.append("s", "user/message", user_message("hello"), surface_op="append")
        outline = (await store.read_surface_outline("s"))[2]
        assert [row.projection for row in outline] == [4 * len("hello")]
    assert pg_cluster.psql(f"SELECT version FROM {name}.dsh_schema") == str(SCHEMA_VERSION)


async def test_a_schema_2_database_gains_the_surface_nodes(
    pg_cluster: Cluster, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 3 keeps the current surface's nodes and sums (issue 15); a database from
    before gets them on open, folded from its events (a projection NULL since schema 1
    computed), reporting its progress when large, and then answers read_message_tail
    exactly as the memory store does."""
    import stores.postgres.surfaces as pg_module
    from tests.references.test_prepare_bounded import write

    monkeypatch.setattr(pg_module, "_BACKFILL_REPORT_MIN", 5)
    monkeypatch.setattr(pg_module, "_BACKFILL_BATCH", 4)

    steps: list[tuple[str, object]] = [("user", "q 问 " * 9), ("assistant", "a" * 50)] * 6
    steps += [("compact", ("summary", 0, 5)), ("tool", "t"), ("huge", 3_000)]
    steps += [("replace", ("edit", 3, 4)), ("user", "last"), ("chunk", "x")]
    memory = MemorySessionStore()
    await write(memory, "src", steps)
    schema = schema_of(url)
    async with await open_store(url) as store:
        await write(store, "src", steps)
    pg_cluster.psql(
        downgrade_sql(schema, 2) + "; UPDATE dsh_events SET projection = NULL WHERE seq % 2 = 0"
    )
    calls: list[tuple[int, int]] = []
    reopened = await PostgresSessionStore.open(url, fold_progress=lambda d, t: calls.append((d, t)))
    async with reopened as store:
        for budget in (0, 60, 200, 1_000, 10_000):
            want = (await memory.read_message_tail("src", budget))[2]
            assert (await store.read_message_tail("src", budget))[2] == want, budget
    surface_rows = len((await memory.read_surface_rows("src"))[2])
    assert len(calls) > 2
    assert calls[-1] == (surface_rows, surface_rows)
    assert pg_cluster.psql(f"SELECT version FROM {schema}.dsh_schema") == str(SCHEMA_VERSION)

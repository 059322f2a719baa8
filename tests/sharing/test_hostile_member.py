"""Issue 30: a team member (or anyone with a member's password) cannot break, freeze or spy
on the others. Each test is an attack found on a real server, by plain SQL as the member
(no dsh in between) or through dsh, and what must hold instead."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from core.config import PostgresLimits
from core.errors import SearchQueryError, StoreError
from core.log import user_message
from stores import open_store
from stores.postgres import PostgresSessionStore
from tests.cli.test_cli_postgres import run_dsh
from tests.pgcluster import ALICE, BOB, Cluster
from tests.sharing.team import ADMIN, Team, admin_schema, admin_team, plain_sql, team

__all__ = ["admin_team", "team"]

REPO = Path(__file__).resolve().parents[2]
_MIGRATION_LOCK = 0x64736873  # stores.postgres._MIGRATION_LOCK


@pytest.fixture
async def bob_sql(admin_team: Team) -> AsyncIterator[asyncpg.Connection]:
    async with plain_sql(admin_team.bob_url) as conn:
        yield conn


def _dsh(
    tmp_path: Path, url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``dsh`` on ``url`` in a child process."""
    return run_dsh(tmp_path, "--db", url, *args, env=env)


@contextlib.asynccontextmanager
async def _sessions_locked(team: Team) -> AsyncIterator[None]:
    """The admin (the tables' owner may lock them: no member may) holds ``dsh_sessions``
    in ACCESS EXCLUSIVE mode for the block."""
    holder = await asyncpg.connect(team.cluster.team_url(ADMIN, team.schema))
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE dsh_sessions IN ACCESS EXCLUSIVE MODE")
            yield
    finally:
        await holder.close()


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dsh: error: ")
    return lines[0]


def _key(team: Team, session_id: str) -> int:
    return int(
        team.cluster.psql(
            f"SELECT key FROM {team.schema}.dsh_sessions "
            f"WHERE id = convert_to('{session_id}', 'UTF8')"
        )
    )


# ---------------------------------------------------------------------- 1. keys


async def test_a_member_cannot_take_the_keys_others_will_be_given(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    """Bob inserted sessions with the keys the sequence hands out next, and every other
    member's `new`, `import`, `migrate` failed ("a session ... already exists")."""
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await bob_sql.execute(
            "INSERT INTO dsh_sessions (key, id, created_at, owner) OVERRIDING SYSTEM VALUE "
            "SELECT g, convert_to('squat' || g, 'UTF8'), 0, current_user "
            "FROM generate_series(1, 2000) AS g"
        )
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await bob_sql.execute(
            "INSERT INTO dsh_search (id, session_key, seq, text, session_owner) "
            "OVERRIDING SYSTEM VALUE SELECT g, $1, 0, 'x', current_user "
            "FROM generate_series(1, 2000) AS g",
            _key(admin_team, admin_team.bobs),
        )
    # What the sequence gives next is still free: alice creates and imports at will.
    async with await open_store(admin_team.alice_url) as alice:
        for _ in range(3):
            await alice.create_session()


async def test_a_duplicate_key_is_not_called_a_taken_id(pg_cluster: Cluster) -> None:
    """Only the id's own unique index means "a session with that id exists": a clash on
    any other key (the superuser may still write keys by hand) is a plain store error."""
    schema = admin_schema(pg_cluster)
    url = pg_cluster.url(search_path=schema)
    async with await open_store(url) as store:
        await store.create_session("first")
        next_key = int(pg_cluster.psql(f"SELECT max(key) + 1 FROM {schema}.dsh_sessions"))
        pg_cluster.psql(
            f"INSERT INTO {schema}.dsh_sessions (key, id, created_at) OVERRIDING SYSTEM VALUE "
            f"VALUES ({next_key}, convert_to('by hand', 'UTF8'), 0)"
        )
        with pytest.raises(StoreError, match="duplicate key") as caught:
            await store.create_session("second")
        assert "a session with id" not in str(caught.value)


# ---------------------------------------------------------------------- 2. hostile rows


def _as_before_the_limits(team: Team, constraint: str, table: str, sql: str) -> None:
    """Write ``sql`` as rows older than the tables' checks are (dropped for it, then made
    again for new rows only), as the superuser: what a member could write before."""
    definition = team.cluster.psql(
        f"SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = '{constraint}' "
        f"AND connamespace = '{team.schema}'::regnamespace"
    )
    assert definition, constraint
    team.cluster.psql(
        f"SET search_path = {team.schema};"
        f"ALTER TABLE {table} DROP CONSTRAINT {constraint};{sql};"
        f"ALTER TABLE {table} ADD CONSTRAINT {constraint} "
        + definition.replace(" NOT VALID", "")
        + " NOT VALID"
    )


async def _hostile_session(team: Team, session_id: str, cwd: str = "/w") -> int:
    """A session of bob's, shared with alice (sharing needs no consent)."""
    async with await open_store(team.bob_url) as bob:
        await bob.create_session(session_id, cwd=cwd)
        await bob.append(session_id, "user/message", user_message("hi"), surface_op="append")
        await bob.share(session_id, ALICE)
    return _key(team, session_id)


async def test_a_member_cannot_write_a_title_that_is_not_text_or_too_long(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    key = await _hostile_session(admin_team, "bob-titles")
    for data in ('{"title": 5}', "not json", '{"title": "' + "x" * 300_000 + '"}', "[1]"):
        with pytest.raises((asyncpg.CheckViolationError, asyncpg.InvalidTextRepresentationError)):
            await bob_sql.execute(
                "INSERT INTO dsh_events (session_key, seq, type, time, kind, data) "
                "VALUES ($1, 100, convert_to('session/title', 'UTF8'), 1, 2, $2)",
                key,
                data,
            )
    # The surface rows the index reads are JSON.
    with pytest.raises(asyncpg.InvalidTextRepresentationError):
        await bob_sql.execute(
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op) "
            "VALUES ($1, 101, convert_to('user/message', 'UTF8'), 1, 1, 'nope', "
            """'"append"')""",
            key,
        )


async def test_damaged_rows_of_a_shared_session_cost_one_line_each(
    admin_team: Team, bob_sql: asyncpg.Connection, tmp_path: Path
) -> None:
    """A title that is a number, a title that is not JSON (rows of before the checks), a
    cwd that is not UTF-8 and an id that is not either: alice's listings skip each and
    say so, and list everything else; nothing crashes."""
    number = await _hostile_session(admin_team, "bob-number-title")
    garbage = await _hostile_session(admin_team, "bob-garbage-title")
    await _hostile_session(admin_team, "bob-fine")
    for key, data in ((number, '{"title": 5}'), (garbage, "{not json")):
        _as_before_the_limits(
            admin_team,
            "dsh_events_title",
            "dsh_events",
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, session_owner) "
            f"VALUES ({key}, 5, convert_to('session/title', 'UTF8'), 1, 2, '{data}', 'bob')",
        )
    await bob_sql.execute(
        "INSERT INTO dsh_sessions (id, created_at, cwd, owner) "
        "VALUES (convert_to('bob-bad-cwd', 'UTF8'), 2, '\\xff'::bytea, current_user)"
    )
    await bob_sql.execute(
        "INSERT INTO dsh_sessions (id, created_at, owner) VALUES ('\\xffff'::bytea, 3, current_user)"
    )
    await bob_sql.execute(
        "INSERT INTO dsh_shares (session_key, owner, grantee) SELECT key, owner, $1 "
        "FROM dsh_sessions WHERE owner = current_user ON CONFLICT DO NOTHING",
        ALICE,
    )
    async with await open_store(admin_team.alice_url) as alice:
        ids = {h.id for h in await alice.list_headers()}
        titles = await alice.read_titles()
        damaged = alice.damaged_rows()
    assert {"bob-number-title", "bob-garbage-title", "bob-fine", admin_team.shared} <= ids
    assert "bob-bad-cwd" not in ids
    assert "bob-number-title" not in titles and "bob-garbage-title" not in titles
    reasons = {(row.what, row.session_id, row.reason) for row in damaged}
    assert ("session", "bob-bad-cwd", "its cwd is not valid UTF-8") in reasons
    assert ("session", None, "its id is not valid UTF-8") in reasons
    assert ("title", "bob-number-title", "its title is not text") in reasons
    assert ("title", "bob-garbage-title", "it is not JSON") in reasons
    assert all(row.owner == BOB for row in damaged)
    # The same through the real command line: every listing works, in one process each.
    for args in (("sessions",), ("sessions", "--json"), ("search", "hi"), ("shares",)):
        result = _dsh(tmp_path, admin_team.alice_url, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert "bob-fine" in result.stdout or args[0] != "sessions"
    # Showing the damaged session is one clear line.
    line = _one_error_line(_dsh(tmp_path, admin_team.alice_url, "show", "bob-bad-cwd"))
    assert "is damaged and not listed (its cwd is not valid UTF-8)" in line, line


async def test_a_huge_title_of_before_the_limits_costs_a_listing_nothing(
    admin_team: Team, tmp_path: Path
) -> None:
    """Bob's 300 MB title cost alice's listing 913 MB of memory: a listing now reads at
    most a title event's limit of each (the server cuts the rest off)."""
    key = await _hostile_session(admin_team, "bob-huge-title")

    def peak_kib() -> int:
        # The process's own peak (VmHWM: ru_maxrss would count the forked parent's).
        code = (
            "import sys\n"
            "from tui.cli.commands import main\n"
            f"rc = main(['--db', {admin_team.alice_url!r}, 'sessions'])\n"
            "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
            "print(peak.split()[1], file=sys.stderr)\n"
            "sys.exit(rc)\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**env, "XDG_CONFIG_HOME": str(tmp_path / "c"), "COLUMNS": "100"},
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return int(result.stderr.strip().splitlines()[-1])

    before = peak_kib()
    title_chars = 40_000_000
    _as_before_the_limits(
        admin_team,
        "dsh_events_title",
        "dsh_events",
        "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, session_owner) "
        f"VALUES ({key}, 5, convert_to('session/title', 'UTF8'), 1, 2, "
        f"'{{\"title\": \"' || repeat('t', {title_chars}) || '\"}}', 'bob')",
    )
    after = peak_kib()
    assert after - before < 20_000, (before, after)  # KiB: a 40 MB title read is 40,000+
    async with await open_store(admin_team.alice_url) as alice:
        assert "bob-huge-title" not in await alice.read_titles()
        assert any(
            row.session_id == "bob-huge-title"
            and "over the 8,192 a title event may hold" in row.reason
            for row in alice.damaged_rows()
        )


# ---------------------------------------------------------------------- 3. freezing


async def test_a_member_cannot_lock_a_table_against_the_others(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    """`LOCK TABLE dsh_sessions IN ACCESS EXCLUSIVE MODE` (allowed by the grants of before)
    left every other member's `dsh sessions` hanging. Members now hold no privilege that
    allows a lock beyond ACCESS SHARE (which only an upgrade waits for)."""
    tables = [
        row[0]
        for row in await bob_sql.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace "
            "AND relkind = 'r' AND relname LIKE 'dsh\\_%'",
            admin_team.schema,
        )
    ]
    assert "dsh_sessions" in tables and "dsh_shares" in tables
    for table in tables:
        for mode in (
            "ACCESS EXCLUSIVE",
            "EXCLUSIVE",
            "SHARE ROW EXCLUSIVE",
            "SHARE",
            "SHARE UPDATE EXCLUSIVE",
            "ROW EXCLUSIVE",
            "ROW SHARE",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                async with bob_sql.transaction():
                    await bob_sql.execute(f"LOCK TABLE {table} IN {mode} MODE")
        for what in ("DELETE FROM", "TRUNCATE"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await bob_sql.execute(f"{what} {table}")


async def test_waiting_on_another_roles_lock_ends_in_one_line_naming_it(
    admin_team: Team, tmp_path: Path
) -> None:
    """The admin (the tables' owner may lock them) holds dsh_sessions: alice's listing
    waits lock_timeout, then says who holds it, in one line."""
    async with _sessions_locked(admin_team):
        started = time.monotonic()
        result = await asyncio.to_thread(
            _dsh,
            tmp_path,
            admin_team.alice_url,
            "sessions",
            env={"DSH_PG_LOCK_TIMEOUT": "2"},
        )
        waited = time.monotonic() - started
    line = _one_error_line(result)
    assert f"held by role {ADMIN}" in line and "lock_timeout" in line, line
    assert waited < 30, waited


async def test_a_host_hears_that_it_waits_for_a_lock_while_it_waits(admin_team: Team) -> None:
    """The TUI's notice line (``take_notice``) says who dsh waits for, while it waits."""
    async with await open_store(admin_team.alice_url) as alice:
        async with _sessions_locked(admin_team):
            reading = asyncio.ensure_future(alice.list_headers())
            notice = None
            deadline = time.monotonic() + 8
            while notice is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                notice = alice.take_notice()
            assert notice is not None and not reading.done()
            assert notice == (
                f"Waiting for a lock held by role {ADMIN} on {alice.location}…",
                True,
            )
        assert [h.id for h in await reading] == [admin_team.shared, admin_team.private]


async def test_a_statement_running_too_long_ends_in_one_line(
    admin_team: Team, tmp_path: Path
) -> None:
    async with _sessions_locked(admin_team):
        result = await asyncio.to_thread(
            _dsh,
            tmp_path,
            admin_team.alice_url,
            "sessions",
            env={"DSH_PG_LOCK_TIMEOUT": "60", "DSH_PG_STATEMENT_TIMEOUT": "1.5"},
        )
    line = _one_error_line(result)
    assert "longer than 1.5 s" in line and "statement_timeout" in line, line


async def test_holding_the_upgrade_lock_does_not_hang_the_admin(pg_cluster: Cluster) -> None:
    """Bob held the migration's advisory lock: the admin's first run hung with no word."""
    schema = admin_schema(pg_cluster)
    bob = await asyncpg.connect(pg_cluster.url(user=BOB))
    try:
        await bob.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
        with pytest.raises(StoreError) as caught:
            await PostgresSessionStore.open(pg_cluster.team_url(ADMIN, schema), limits=_limits(1))
    finally:
        await bob.close()
    message = str(caught.value)
    assert f"held by role {BOB}" in message and "lock_timeout" in message, message
    assert "\n" not in message
    # Once bob lets go, the admin's run makes the tables.
    async with await open_store(pg_cluster.team_url(ADMIN, schema)) as admin:
        assert await admin.list_headers() == []


def _limits(lock: float, statement: float = 120.0) -> PostgresLimits:
    return PostgresLimits(lock_timeout=lock, statement_timeout=statement)


async def _waiting(cluster: Cluster, role: str) -> list[int]:
    rows = cluster.psql(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'dsh' "
        f"AND usename = '{role}' AND wait_event_type = 'Lock'"
    )
    return [int(pid) for pid in rows.split()]


async def test_a_killed_client_does_not_leave_its_query_waiting(
    admin_team: Team, tmp_path: Path
) -> None:
    """A dsh killed while its statement waits (or runs) leaves nothing behind in the server:
    the server checks that the client is still there every 2 s."""
    async with _sessions_locked(admin_team):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
        child = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tui.cli", "--db", admin_team.alice_url, "sessions"),
            cwd=REPO,
            env={**env, "DSH_PG_LOCK_TIMEOUT": "120", "XDG_CONFIG_HOME": str(tmp_path)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while not await _waiting(admin_team.cluster, ALICE):
                assert time.monotonic() < deadline, "the child never waited"
                await asyncio.sleep(0.1)
        finally:
            child.send_signal(signal.SIGKILL)
            await child.wait()
        deadline = time.monotonic() + 10
        while await _waiting(admin_team.cluster, ALICE):
            assert time.monotonic() < deadline, "the killed client's query still waits"
            await asyncio.sleep(0.2)


async def test_a_cancelled_read_cancels_its_statement(admin_team: Team) -> None:
    async with await open_store(admin_team.alice_url) as alice:
        async with _sessions_locked(admin_team):
            reading = asyncio.ensure_future(alice.read_header(admin_team.private))
            deadline = time.monotonic() + 30
            while not await _waiting(admin_team.cluster, ALICE):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            deadline = time.monotonic() + 5
            while await _waiting(admin_team.cluster, ALICE):
                assert time.monotonic() < deadline, "the statement still waits"
                await asyncio.sleep(0.05)
        # The store goes on as before.
        assert (await alice.read_header(admin_team.private)).id == admin_team.private


# ---------------------------------------------------------------------- 4. sizes


async def test_oversized_headers_are_refused_by_the_tables(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    for column, size in (("id", 1025), ("cwd", 4097)):
        values = {"id": "convert_to('ok-' || gen_random_uuid(), 'UTF8')", "cwd": "NULL"}
        values[column] = f"convert_to(repeat('x', {size}), 'UTF8')"
        with pytest.raises(asyncpg.CheckViolationError):
            await bob_sql.execute(
                "INSERT INTO dsh_sessions (id, created_at, cwd, owner) "
                f"VALUES ({values['id']}, 1, {values['cwd']}, current_user)"
            )
    # At the limits exactly, they are fine.
    await bob_sql.execute(
        "INSERT INTO dsh_sessions (id, created_at, cwd, owner) VALUES "
        "(convert_to(repeat('i', 1024), 'UTF8'), 1, convert_to(repeat('c', 4096), 'UTF8'), "
        "current_user)"
    )


# ---------------------------------------------------------------------- 5-7. search


async def test_a_long_search_term_is_one_clear_error(admin_team: Team, tmp_path: Path) -> None:
    """A 50,000-character term took 18.7 s of the server's time (a 1,000,000-character one
    ran on after the client was gone): terms are at most 256 characters."""
    async with await open_store(admin_team.alice_url) as alice:
        started = time.monotonic()
        with pytest.raises(SearchQueryError, match="at most 256 characters"):
            await alice.search_messages("x" * 50_000)
        assert time.monotonic() - started < 5
        assert await alice.search_messages("y" * 256) == []
    line = _one_error_line(_dsh(tmp_path, admin_team.alice_url, "search", "z" * 1_000))
    assert "at most 256 characters (one has 1,000)" in line


async def test_a_members_search_uses_the_trigram_index_and_the_access_rule(
    admin_team: Team,
) -> None:
    """Under row security the planner never used the trigram index for a member (ILIKE is
    not leakproof): every member's search scanned every member's messages. The owner's
    function applies the access rule itself and the index is used: its plan, as bob runs
    it, shows the index scan (auto_explain of the nested statement)."""
    async with await open_store(admin_team.alice_url) as alice:
        for sid in (admin_team.private, admin_team.shared):
            await alice.append(
                sid, "user/message", user_message(f"zebra crossing in {sid}"), surface_op="append"
            )
    # So many of bob's own messages that reading them all would cost more than the index
    # (written into the index directly: the plan is what is looked at).
    admin_team.cluster.psql(
        f"SET search_path = {admin_team.schema};"
        "INSERT INTO dsh_search (session_key, seq, text, session_owner) "
        f"SELECT {_key(admin_team, admin_team.bobs)}, 1000 + g, "
        "'filler message number ' || g || ' of many', 'bob' FROM generate_series(1, 50000) AS g;"
        "ANALYZE"
    )
    async with await open_store(admin_team.bob_url) as bob:
        found = {hit.session_id for hit in await bob.search_messages("zebra")}
    assert found == {admin_team.shared}
    conn = await asyncpg.connect(admin_team.cluster.url(search_path=admin_team.schema))
    notices: list[str] = []
    conn.add_log_listener(lambda _conn, message: notices.append(message.message))
    try:
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
            "SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice"
        )
        await conn.execute(f"SET SESSION AUTHORIZATION {BOB}")
        rows = await conn.fetch(
            "SELECT session_key FROM dsh_search_find($1, $2, 1000)", ["%zebra%"], [False]
        )
        await asyncio.sleep(0.1)
    finally:
        await conn.close()
    assert len(rows) == 1
    plan = next(n for n in notices if "FROM dsh_search AS m" in n)
    assert "Bitmap Index Scan on dsh_search_trgm" in plan, plan
    assert "Seq Scan on dsh_search" not in plan, plan


async def test_a_member_cannot_forge_search_rows(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    """Bob inserted search rows (any text, seqs that do not exist) into a session he
    shares with alice: they ranked first in her `dsh search`, pointing at nothing. Search
    rows are the server's now: made from the events, never written by a member."""
    key = _key(admin_team, admin_team.bobs)
    for sql, args in (
        ("INSERT INTO dsh_search (session_key, seq, text) VALUES ($1, 999, 'forged')", (key,)),
        ("UPDATE dsh_search SET text = 'forged' WHERE session_key = $1", (key,)),
        ("DELETE FROM dsh_search WHERE session_key = $1", (key,)),
        ("SELECT count(*) FROM dsh_search", ()),
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await bob_sql.execute(sql, *args)
    # Nor can he drop alice's rows through the function members may call.
    alice_key = _key(admin_team, admin_team.shared)
    await bob_sql.execute("SELECT dsh_unindex($1, ARRAY[0, 1, 2, 3]::bigint[])", alice_key)
    async with await open_store(admin_team.alice_url) as alice:
        assert [h.seq for h in await alice.search_messages("alice-shared")]


async def test_search_rows_forged_before_the_upgrade_are_gone_after_it(
    pg_cluster: Cluster,
) -> None:
    from tests.sharing.team import seed_team
    from tests.stores.pgdowngrade import downgrade_sql

    team = await seed_team(pg_cluster, admin=True)
    pg_cluster.psql(downgrade_sql(team.schema, 6))
    bob = await asyncpg.connect(team.bob_url)
    try:  # schema 6 let him
        await bob.execute(
            "INSERT INTO dsh_search (session_key, seq, text) SELECT key, 999, 'forged words' "
            "FROM dsh_sessions WHERE owner = current_user"
        )
        await bob.execute(
            "INSERT INTO dsh_shares (session_key, owner, grantee) SELECT key, owner, $1 "
            "FROM dsh_sessions WHERE owner = current_user",
            ALICE,
        )
    finally:
        await bob.close()
    async with await open_store(pg_cluster.team_url(ADMIN, team.schema)):
        pass  # the upgrade
    async with await open_store(team.alice_url) as alice:
        assert await alice.search_messages("forged") == []
        assert {h.session_id for h in await alice.search_messages("hello")} == {
            team.private,
            team.shared,
            team.bobs,
        }


# ---------------------------------------------------------------------- 8-9. leases


async def test_a_sharee_reads_no_lease_row(admin_team: Team, bob_sql: asyncpg.Connection) -> None:
    """A lease names a host and a process: bob read alice's, on the session she shares."""
    async with await open_store(admin_team.alice_url) as alice:
        assert await alice.take_reply_lease(admin_team.shared, "alicehost:ns:42:n", ttl_ms=60_000)
        lease = await alice.read_reply_lease(admin_team.shared)
        assert lease is not None and lease.holder == "alicehost:ns:42:n"
    assert await bob_sql.fetchval("SELECT count(*) FROM dsh_reply_leases") == 0
    async with await open_store(admin_team.bob_url) as bob:
        await bob.take_reply_lease(admin_team.bobs, "bobhost:ns:7:n", ttl_ms=60_000)
        assert await bob_sql.fetchval("SELECT count(*) FROM dsh_reply_leases") == 1


async def test_a_fast_client_clock_does_not_make_a_lease_outlive_its_ttl(
    admin_team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leases are judged by the server's clock: a client a day ahead wrote an expiry a day
    away, and blocked `send` and `compact` until then."""
    day_ns = 86_400 * 1_000_000_000
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + day_ns)
    async with await open_store(admin_team.alice_url) as alice:
        assert await alice.take_reply_lease(admin_team.shared, "fast", ttl_ms=2_000)
    monkeypatch.setattr(time, "time_ns", real)
    left = int(
        admin_team.cluster.psql(
            f"SELECT expires_at - (extract(epoch FROM clock_timestamp()) * 1000)::bigint "
            f"FROM {admin_team.schema}.dsh_reply_leases WHERE session_key = "
            f"{_key(admin_team, admin_team.shared)}"
        )
    )
    assert 0 < left <= 2_000, left
    async with await open_store(admin_team.alice_url) as alice:
        assert not await alice.take_reply_lease(admin_team.shared, "next", ttl_ms=60_000)
        await asyncio.sleep(2.2)
        assert await alice.take_reply_lease(admin_team.shared, "next", ttl_ms=60_000)


# ---------------------------------------------------------------------- 11. roles


async def test_a_role_outside_the_group_is_told_what_it_lacks(
    admin_team: Team, tmp_path: Path
) -> None:
    # A name of its own: roles are the cluster's, and other tests count on there being
    # no such user as "carol".
    outsider = "o" + uuid.uuid4().hex[:4]  # as short as "carol": the error line is cut
    admin_team.cluster.psql(
        f"CREATE ROLE {outsider} LOGIN; GRANT USAGE ON SCHEMA {admin_team.schema} TO {outsider}"
    )
    url = admin_team.cluster.team_url(outsider, admin_team.schema)
    with pytest.raises(StoreError) as caught:
        await open_store(url)
    message = str(caught.value)
    assert f"role '{outsider}'" in message and "member of dsh_users" in message, message
    assert "permission denied" not in message
    line = _one_error_line(_dsh(tmp_path, url, "sessions"))
    assert "member of dsh_users" in line and "Setting up a team database" in line


async def test_nothing_of_a_private_session_reaches_a_member_through_the_functions(
    admin_team: Team, bob_sql: asyncpg.Connection
) -> None:
    """The definer functions act for the role that logged in: bob cannot delete, unshare,
    shadow or unindex anything of alice's, nor find her private messages."""
    private, shared = _key(admin_team, admin_team.private), _key(admin_team, admin_team.shared)
    for key in (private, shared):
        assert await bob_sql.fetchval("SELECT dsh_delete_session($1)", key) is False
        assert await bob_sql.fetchval("SELECT dsh_unshare($1, $2)", key, BOB) is False
        assert await bob_sql.fetch("SELECT dsh_shadow_nodes($1, 0, 100)", key) == []
    found = await bob_sql.fetch(
        "SELECT session_key FROM dsh_search_find($1, $2, 100)", ["%hello%"], [False]
    )
    assert {row[0] for row in found} == {shared, _key(admin_team, admin_team.bobs)}
    async with await open_store(admin_team.alice_url) as alice:
        assert len(await alice.read_events(admin_team.private)) == 3
        assert [g.grantee for g in await alice.list_shares(admin_team.shared)] == [BOB]


async def test_a_read_stopped_by_a_stray_cancel_request_is_tried_again(admin_team: Team) -> None:
    """A cancel request is not tied to a statement: one meant for an earlier read that had
    already ended can stop the next statement of its connection. A read so stopped
    (``pg_cancel_backend`` stands in for the stray request) is tried once more."""
    async with await open_store(admin_team.alice_url) as alice:
        async with _sessions_locked(admin_team):
            reading = asyncio.ensure_future(alice.read_header(admin_team.private))
            deadline = time.monotonic() + 30
            while not (pids := await _waiting(admin_team.cluster, ALICE)):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            admin_team.cluster.psql(f"SELECT pg_cancel_backend({pids[0]})")
            await asyncio.sleep(0.5)
            assert not reading.done()  # waiting again, on a second try
        assert (await reading).id == admin_team.private

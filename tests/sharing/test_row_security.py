"""Issue 17, enforced by the database: plain SQL as another role (no dsh in between) sees
no row of a private session and cannot write into anyone else's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from core.errors import SessionNotFoundError
from stores import open_store
from stores.postgres import CHANGES_CHANNEL, SCHEMA_VERSION
from tests.pgcluster import ALICE, BOB, Cluster
from tests.sharing.team import Team, plain_sql, team

__all__ = ["team"]

# Ids are stored as bytea of their UTF-8.
_KEY = "(SELECT key FROM dsh_sessions WHERE id = convert_to($1, 'UTF8'))"


@pytest.fixture
async def bob_sql(team: Team) -> AsyncIterator[asyncpg.Connection]:
    async with plain_sql(team.bob_url) as conn:
        yield conn


@pytest.fixture
async def alice_sql(team: Team) -> AsyncIterator[asyncpg.Connection]:
    async with plain_sql(team.alice_url) as conn:
        yield conn


async def ids(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT convert_from(id, 'UTF8') FROM dsh_sessions")
    return {row[0] for row in rows}


async def test_the_roles_are_plain_and_alice_owns_the_tables(
    team: Team, bob_sql: asyncpg.Connection
) -> None:
    for role in (ALICE, BOB):
        row = await bob_sql.fetchrow(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1", role
        )
        assert tuple(row) == (False, False)
    owners = await bob_sql.fetch(
        "SELECT relname, pg_get_userbyid(relowner), relrowsecurity, relforcerowsecurity "
        "FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' "
        "AND relname LIKE 'dsh\\_%' ORDER BY relname",
        team.schema,
    )
    assert {row[0]: tuple(row[1:]) for row in owners} == {
        "dsh_events": (ALICE, True, True),
        "dsh_reply_leases": (ALICE, True, True),
        # Issue 18's index: no member may read or write it but through the owner's
        # functions, which apply the access rule themselves (issue 30).
        "dsh_search": (ALICE, False, False),
        "dsh_schema": (ALICE, False, False),
        "dsh_sessions": (ALICE, True, True),
        "dsh_shares": (ALICE, True, True),
        "dsh_surface_nodes": (ALICE, True, True),  # issue 15's
        "dsh_surface_sums": (ALICE, True, True),
    }


async def test_another_role_sees_no_row_of_a_private_session(
    team: Team, bob_sql: asyncpg.Connection
) -> None:
    assert await ids(bob_sql) == {team.shared, team.bobs}
    for table in ("dsh_events", "dsh_reply_leases", "dsh_shares"):
        count = await bob_sql.fetchval(
            f"SELECT count(*) FROM {table} WHERE session_key = {_KEY}", team.private
        )
        assert count == 0, table
    # Nor by key, guessed: every table holds rows of the private session.
    keys = {row[0] for row in await bob_sql.fetch("SELECT DISTINCT session_key FROM dsh_events")}
    assert len(keys) == 2
    assert await bob_sql.fetchval("SELECT count(*) FROM dsh_reply_leases") == 0
    # The grant bob holds is the only share row he sees.
    assert [tuple(r) for r in await bob_sql.fetch("SELECT owner, grantee FROM dsh_shares")] == [
        (ALICE, BOB)
    ]


async def test_the_table_owner_is_held_to_the_policies_too(
    team: Team, alice_sql: asyncpg.Connection
) -> None:
    """FORCE ROW LEVEL SECURITY: alice owns the tables and still sees none of bob's rows."""
    assert await ids(alice_sql) == {team.private, team.shared}
    count = await alice_sql.fetchval(
        "SELECT count(*) FROM dsh_events AS e JOIN dsh_sessions AS s ON s.key = e.session_key "
        "WHERE s.owner <> current_user"
    )
    assert count == 0


async def private_key(team: Team) -> int:
    return int(
        team.cluster.psql(
            f"SELECT key FROM {team.schema}.dsh_sessions WHERE id = convert_to('{team.private}', 'UTF8')"
        )
    )


@pytest.mark.parametrize("which", ["private", "shared"])
async def test_another_role_cannot_write_into_a_session_it_does_not_own(
    team: Team, bob_sql: asyncpg.Connection, which: str
) -> None:
    sid = team.private if which == "private" else team.shared
    key = int(
        team.cluster.psql(
            f"SELECT key FROM {team.schema}.dsh_sessions WHERE id = convert_to('{sid}', 'UTF8')"
        )
    )
    before = team.cluster.psql(
        f"SELECT (SELECT count(*) FROM {team.schema}.dsh_events), "
        f"(SELECT count(*) FROM {team.schema}.dsh_reply_leases), "
        f"(SELECT count(*) FROM {team.schema}.dsh_shares), "
        f"(SELECT string_agg(next_seq::text || owner, ',' ORDER BY key) FROM {team.schema}.dsh_sessions)"
    )
    inserts = [
        (
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data) "
            "VALUES ($1, 99, convert_to('x', 'UTF8'), 0, 0, '{}')",
            (key,),
        ),
        # Seq 0 exists: the policy must refuse before the primary key would say so.
        (
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data) "
            "VALUES ($1, 0, convert_to('x', 'UTF8'), 0, 0, '{}')",
            (key,),
        ),
        # Naming the real owner in the row's owner column.
        (
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, session_owner) "
            "VALUES ($1, 98, convert_to('x', 'UTF8'), 0, 0, '{}', $2)",
            (key, ALICE),
        ),
        (
            "INSERT INTO dsh_search (session_key, seq, text) VALUES ($1, 99, 'forged')",
            (key,),
        ),
        (
            "INSERT INTO dsh_reply_leases (session_key, owner, expires_at) "
            "VALUES ($1, convert_to('bob', 'UTF8'), 0)",
            (key,),
        ),
        # A forged grant, naming the real owner or bob himself.
        (
            "INSERT INTO dsh_shares (session_key, owner, grantee) VALUES ($1, $2, $3)",
            (key, ALICE, BOB),
        ),
        (
            "INSERT INTO dsh_shares (session_key, owner, grantee) VALUES ($1, $2, $3)",
            (key, BOB, BOB),
        ),
        # A session in alice's name.
        (
            "INSERT INTO dsh_sessions (id, created_at, owner) VALUES (convert_to('x', 'UTF8'), 0, $1)",
            (ALICE,),
        ),
    ]
    for sql, args in inserts:
        with pytest.raises((asyncpg.InsufficientPrivilegeError, asyncpg.ForeignKeyViolationError)):
            await bob_sql.execute(sql, *args)
    # Moving one of bob's own rows into alice's session, onto a seq it holds.
    for sql in (
        "UPDATE dsh_events SET session_key = $1 WHERE seq = 0 AND session_owner = current_user",
        "UPDATE dsh_events SET session_key = $1, session_owner = 'alice' "
        "WHERE seq = 0 AND session_owner = current_user",
    ):
        with pytest.raises((asyncpg.InsufficientPrivilegeError, asyncpg.ForeignKeyViolationError)):
            await bob_sql.execute(sql, key)
    for sql in (
        "UPDATE dsh_sessions SET next_seq = next_seq + 1 WHERE key = $1",
        "UPDATE dsh_sessions SET owner = 'bob' WHERE key = $1",
        "DELETE FROM dsh_sessions WHERE key = $1",
        "DELETE FROM dsh_events WHERE session_key = $1",
        "DELETE FROM dsh_reply_leases WHERE session_key = $1",
        "DELETE FROM dsh_shares WHERE session_key = $1",
        "UPDATE dsh_events SET data = '{}' WHERE session_key = $1",
    ):
        # Row security finds no row, or (issue 30) the member has no such privilege at all.
        with contextlib.suppress(asyncpg.InsufficientPrivilegeError):
            assert await bob_sql.execute(sql, key) in ("UPDATE 0", "DELETE 0"), sql
    after = team.cluster.psql(
        f"SELECT (SELECT count(*) FROM {team.schema}.dsh_events), "
        f"(SELECT count(*) FROM {team.schema}.dsh_reply_leases), "
        f"(SELECT count(*) FROM {team.schema}.dsh_shares), "
        f"(SELECT string_agg(next_seq::text || owner, ',' ORDER BY key) FROM {team.schema}.dsh_sessions)"
    )
    assert after == before


@pytest.mark.parametrize(
    "table", ["dsh_events", "dsh_surface_nodes", "dsh_surface_sums", "dsh_search"]
)
async def test_reading_a_session_keyed_table_consults_no_other_table_per_row(
    team: Team, alice_sql: asyncpg.Connection, table: str
) -> None:
    """The policies' cost: a read of one session's rows checks each row's own owner
    column, and reads the grants at most once per statement (a hashed subplan), never
    ``dsh_sessions`` per row (which made a 20,000-event read ~3x slower: see
    tests/benchmarks/bench_rls.py)."""
    key = await alice_sql.fetchval(_KEY, team.private)
    plan = "\n".join(
        row[0]
        for row in await alice_sql.fetch(
            f"EXPLAIN (COSTS OFF) SELECT * FROM {table} WHERE session_key = $1", key
        )
    )
    assert "dsh_sessions" not in plan, plan
    assert "SubPlan" not in plan or "hashed SubPlan" in plan, plan


async def test_an_older_database_gives_its_sessions_to_the_role_that_upgrades_it(
    pg_cluster: Cluster,
) -> None:
    from stores.postgres import MIGRATIONS

    schema = pg_cluster.team_schema()
    pg_cluster.psql(
        f"SET ROLE {ALICE}; SET search_path = {schema};"
        + ";".join(s for step in MIGRATIONS[:2] for s in step)
        + ";CREATE TABLE dsh_schema (version integer NOT NULL);"
        + "INSERT INTO dsh_schema (version) VALUES (2);"
        + "INSERT INTO dsh_sessions (id, created_at, next_seq) VALUES (convert_to('old', 'UTF8'), 1, 1);"
        + "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op) "
        + "SELECT key, 0, convert_to('user_message', 'UTF8'), 1, 1, "
        + """'{"content":[{"type":"text","text":"hi"}]}', '"append"' FROM dsh_sessions"""
    )
    async with await open_store(pg_cluster.team_url(ALICE, schema)) as alice:
        assert [(h.id, h.owner) for h in await alice.list_headers()] == [("old", ALICE)]
        # Its rows went to alice too: she reads and writes them.
        assert [e.seq for e in await alice.read_events("old")] == [0]
        await alice.append("old", "session/title", {"title": "kept"})
        assert [e.seq for e in await alice.read_events("old")] == [0, 1]
    async with await open_store(pg_cluster.team_url(BOB, schema)) as bob:
        assert await bob.list_headers() == []
        with pytest.raises(SessionNotFoundError):
            await bob.read_events("old")
    assert pg_cluster.psql(f"SELECT version FROM {schema}.dsh_schema") == str(SCHEMA_VERSION)


async def test_the_readme_team_setup_works(pg_cluster: Cluster) -> None:
    """The README's recipe, verbatim in spirit: an admin role owns the tables, members of
    dsh_users use them, each sees only their own and what is shared with them."""
    pg_cluster.psql(  # (other tests' admin-owned schemas may have made it already)
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dsh_admin') "
        "THEN CREATE ROLE dsh_admin LOGIN; END IF; END $$",
        database="postgres",
    )
    pg_cluster.psql(
        "CREATE DATABASE readme_team OWNER dsh_admin LOCALE 'C.UTF-8' TEMPLATE template0",
        database="postgres",
    )
    pg_cluster.psql(
        "GRANT USAGE ON SCHEMA public TO dsh_users; CREATE EXTENSION pg_trgm SCHEMA public",
        database="readme_team",
    )
    # In a UTF-8 locale the trigram index holds CJK text too (none of it under C).
    assert pg_cluster.psql("SELECT show_trgm('数据库')", database="readme_team") != "{}"
    admin_url = pg_cluster.url("readme_team", user="dsh_admin")
    async with await open_store(admin_url) as admin:
        assert await admin.list_headers() == []
    alice_url = pg_cluster.url("readme_team", user=ALICE)
    bob_url = pg_cluster.url("readme_team", user=BOB)
    async with await open_store(alice_url) as alice, await open_store(bob_url) as bob:
        await alice.create_session("a")
        await bob.create_session("b")
        assert [h.id for h in await alice.list_headers()] == ["a"]
        assert [h.id for h in await bob.list_headers()] == ["b"]
        await alice.share("a", BOB)
        assert {h.id for h in await bob.list_headers()} == {"a", "b"}
    async with await open_store(admin_url) as admin:  # the tables' owner, held by FORCE
        assert await admin.list_headers() == []


async def test_notifications_name_no_session(team: Team, bob_sql: asyncpg.Connection) -> None:
    """LISTEN/NOTIFY (how every dsh follows other writers) tells a listener that something
    changed, never what: the payload is the writing store's random token."""
    heard: list[str] = []
    got = asyncio.Event()

    def on_notify(conn: object, pid: int, channel: str, payload: str) -> None:
        heard.append(payload)
        got.set()

    await bob_sql.add_listener(CHANGES_CHANNEL, on_notify)
    async with await open_store(team.alice_url) as alice:
        await alice.create_session("alice-hidden-name")
        await alice.append(team.private, "session/title", {"title": "hidden title"})
        async with asyncio.timeout(10):
            while len(heard) < 2:
                got.clear()
                await got.wait()
    assert heard and all(
        "alice" not in p and "hidden" not in p and team.private not in p for p in heard
    )
    assert await ids(bob_sql) == {team.shared, team.bobs}


async def test_an_admin_giving_a_session_away_gives_all_its_rows(team: Team) -> None:
    """Each session-keyed row names its session's owner; the foreign key keeps that in
    step when an admin (a superuser) hands a session to another role: the new owner
    reads and writes all of it, the old one nothing."""
    team.cluster.psql(
        f"UPDATE {team.schema}.dsh_sessions SET owner = '{BOB}' "
        f"WHERE id = convert_to('{team.private}', 'UTF8')"
    )
    stale = team.cluster.psql(
        f"SELECT count(*) FROM {team.schema}.dsh_events AS e "
        f"JOIN {team.schema}.dsh_sessions AS s ON s.key = e.session_key "
        "WHERE e.session_owner <> s.owner"
    )
    assert stale == "0"
    async with await open_store(team.bob_url) as bob:
        assert len(await bob.read_events(team.private)) == 3
        await bob.append(team.private, "session/title", {"title": "now bob's"})
        assert (await bob.read_header(team.private)).owner == BOB
    async with await open_store(team.alice_url) as alice:
        with pytest.raises(SessionNotFoundError):
            await alice.read_events(team.private)


async def test_a_superuser_importing_a_members_session_stores_it_as_theirs(
    team: Team,
) -> None:
    """What `dsh migrate` does as an admin: the session and every row of it are the
    member's (the rows' owner column follows the session, not the role writing)."""
    from core.log import NewEvent, SessionHeader

    async with await open_store(team.cluster.url(search_path=team.schema)) as admin:
        await admin.import_session(
            SessionHeader("imported", 1_700_000_000_000, "/w", owner=ALICE),
            [NewEvent("user/message", {"content": "hi"}, "append", None, 1)],
        )
    async with await open_store(team.alice_url) as alice:
        assert [e.seq for e in await alice.read_events("imported")] == [0]
        await alice.append("imported", "session/title", {"title": "mine"})
    async with await open_store(team.bob_url) as bob:
        with pytest.raises(SessionNotFoundError):
            await bob.read_events("imported")


def readme_grants() -> str:
    """The README's "grant it later" statements (SQL)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index("If no `dsh_users` role exists when the tables are made")
    begin = readme.index("```sql", start) + len("```sql")
    return readme[begin : readme.index("```", begin)]


_GROUP_ACL = """
SELECT 'table ' || c.relname, a.privilege_type FROM pg_class AS c,
    aclexplode(c.relacl) AS a WHERE c.relnamespace = $1::regnamespace
    AND a.grantee = 'dsh_users'::regrole
UNION ALL
SELECT 'column ' || c.relname || '.' || t.attname, a.privilege_type
    FROM pg_class AS c JOIN pg_attribute AS t ON t.attrelid = c.oid,
    aclexplode(t.attacl) AS a WHERE c.relnamespace = $1::regnamespace
    AND a.grantee = 'dsh_users'::regrole
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text, a.privilege_type FROM pg_proc AS p,
    aclexplode(p.proacl) AS a WHERE p.pronamespace = $1::regnamespace
    AND a.grantee = 'dsh_users'::regrole
"""


async def test_the_readme_grants_are_what_the_migrations_grant(
    team: Team, alice_sql: asyncpg.Connection
) -> None:
    """An admin who creates dsh_users after the tables grants what the README lists:
    exactly what the migrations grant when the group exists (so nothing is missing and
    nothing more is given, e.g. no write on dsh_schema, no DELETE anywhere). Alice owns
    the tables: she takes every grant back, runs the README's statements, and the
    group's privileges (tables, columns, functions) are the same as before."""

    async def acl() -> set[tuple[str, str]]:
        return {tuple(row) for row in await alice_sql.fetch(_GROUP_ACL, team.schema)}

    made = await acl()
    assert ("table dsh_sessions", "SELECT") in made
    assert ("column dsh_sessions.next_seq", "UPDATE") in made
    assert not any(privilege in ("DELETE", "TRUNCATE") for _, privilege in made)
    # The change counter: bumped and read by every member, set back by none.
    assert {p for what, p in made if what == "table dsh_changes"} == {"USAGE", "SELECT"}
    await alice_sql.execute(
        "REVOKE ALL ON ALL TABLES IN SCHEMA " + team.schema + " FROM dsh_users;"
        "REVOKE ALL ON ALL SEQUENCES IN SCHEMA " + team.schema + " FROM dsh_users;"
        "REVOKE ALL ON ALL FUNCTIONS IN SCHEMA " + team.schema + " FROM dsh_users"
    )
    assert await acl() == set()
    await alice_sql.execute(readme_grants())
    assert await acl() == made

"""The search index on disk: an existing database is indexed when it is upgraded (with
progress), and the SQLite FTS5 index stays consistent with its rows."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from core.errors import SearchQueryError, StoreError
from core.jsoncodec import dumps_js
from core.log import Replace, user_message
from core.search import MAX_TERM_CHARS, SearchHit, rank_hits, unindexed_notice
from core.surrogates import merge_surrogate_pairs
from stores import MemorySessionStore, SqliteSessionStore, open_store
from stores.sqlite import _FTS_PHRASE_MAX, SCHEMA_VERSION, _fts_query, _like_superset
from tests.pgcluster import SECRET_PASSWORD, SECRET_ROLE, Cluster
from tests.stores.fixtures.make_v2_fixture import IDS
from tests.stores.fixtures.make_v6_fixture import DB as V6_DB
from tests.stores.fixtures.make_v6_fixture import EXPECTED as V6_EXPECTED
from tests.stores.fixtures.make_v6_fixture import QUERIES as V6_QUERIES
from tests.stores.fixtures.make_v6_fixture import USERS as V6_USERS
from tests.stores.test_sqlite_migration import copy_fixture, merged_hex

MSG = "user/message"


def search_step(migrations: tuple[tuple[str, ...], ...], table: str) -> int:
    """The index of the migration step that creates ``table`` (the search index)."""
    return next(i for i, step in enumerate(migrations) if any(table in s for s in step))


def fts_integrity(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_an_old_sqlite_database_is_indexed_when_it_is_upgraded(tmp_path: Path) -> None:
    path = copy_fixture(tmp_path)  # schema 2, written by an old release
    seen: list[tuple[int, int]] = []
    async with await SqliteSessionStore.open(path, progress=lambda *p: seen.append(p)) as store:
        hits = await store.search_messages("question 3")
        # (a surrogate pair in an id is its character: SPEC 4.1, the v10 upgrade)
        assert sorted(h.session_id for h in hits) == sorted(map(merge_surrogate_pairs, IDS))
        assert {h.seq for h in hits} == {86}
        assert {h.snippet for h in hits} == {"question 3 中文 \ufffd"}
        # Messages the fixture's checkpoint replaced are not indexed; the checkpoint is.
        assert await store.search_messages("question 1") == []
        assert await store.search_messages("question 2") == []
        assert sorted(h.session_id for h in await store.search_messages("summary")) == sorted(
            map(merge_surrogate_pairs, IDS)
        )
    assert seen and seen[-1] == (len(IDS), len(IDS))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
    fts_integrity(path)
    # Opening again indexes nothing more.
    seen.clear()
    async with await SqliteSessionStore.open(path, progress=lambda *p: seen.append(p)):
        pass
    assert seen == []


async def test_many_sessions_are_indexed_a_few_per_transaction(tmp_path: Path) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for k in range(45):
            await store.create_session(f"s{k}", created_at=k)
            await store.append(f"s{k}", MSG, user_message(f"omicron {k}"), surface_op="append")
    # Back to what the upgrade step leaves: no rows, every session pending.
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM search_messages")
        conn.execute("INSERT INTO search_pending (session) SELECT key FROM sessions")
    seen: list[tuple[int, int]] = []
    async with await open_store(path, progress=lambda *p: seen.append(p)) as store:
        assert len(await store.search_messages("omicron", limit=100)) == 45
    assert seen == [(20, 45), (40, 45), (45, 45)]
    fts_integrity(path)


async def test_the_fts_index_follows_deletes_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for sid in ("a", "b"):
            await store.create_session(sid, created_at=1)
            for word in ("pi", "rho", "sigma"):
                await store.append(sid, MSG, user_message(f"{word} words"), surface_op="append")
        await store.append(
            "a", MSG, user_message("tau"), surface_op=Replace(0, 1), source_event_seqs=[0, 1]
        )
        await store.delete_session("b")
        # New rows after a delete (row ids may be reused) find only themselves.
        await store.create_session("c", created_at=1)
        await store.append("c", MSG, user_message("upsilon"), surface_op="append")
        assert [h.session_id for h in await store.search_messages("sigma")] == ["a"]
        assert [h.session_id for h in await store.search_messages("upsilon")] == ["c"]
        assert await store.search_messages("rho") == []
    fts_integrity(path)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT seq, text FROM search_messages ORDER BY id").fetchall()
    assert rows == [(2, "sigma words"), (3, "tau"), (0, "upsilon")]


async def test_an_old_postgres_database_is_indexed_when_it_is_upgraded(
    pg_cluster: Cluster,
) -> None:
    from stores.postgres import MIGRATIONS
    from stores.postgres import SCHEMA_VERSION as PG_VERSION

    step = search_step(MIGRATIONS, "dsh_search")
    name, url = pg_cluster.fresh_schema_url()
    rows = []
    for k in range(25):
        data = dumps_js(user_message(f"phi {k}", id="m"))
        rows.append(
            f"INSERT INTO dsh_sessions (id, created_at, next_seq) VALUES ('p{k}'::bytea, {k}, 1);"
            "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op) "
            f"SELECT key, 0, 'user/message'::bytea, 1, 1, '{data}', '\"append\"' "
            f"FROM dsh_sessions WHERE created_at = {k};"
            # Its surface, as dsh keeps it since schema 3 (the index is made from it).
            "INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection) "
            f"SELECT key, 0, 0, {4 * len(f'phi {k}')} FROM dsh_sessions WHERE created_at = {k}"
        )
    pg_cluster.psql(
        f"SET search_path = {name};"
        + ";".join(s for migration in MIGRATIONS[:step] for s in migration)
        + ";CREATE TABLE dsh_schema (version integer NOT NULL);"
        + f"INSERT INTO dsh_schema (version) VALUES ({step});"
        + ";".join(rows)
    )
    seen: list[tuple[int, int]] = []
    async with await open_store(url, progress=lambda *p: seen.append(p)) as store:
        hits = await store.search_messages("phi", limit=100)
        assert len(hits) == 25
        assert {h.session_id for h in hits} == {f"p{k}" for k in range(25)}
        await store.append("p3", MSG, user_message("chi"), surface_op="append")
        assert [(h.session_id, h.seq) for h in await store.search_messages("chi")] == [("p3", 1)]
    assert seen == [(20, 25), (25, 25)]
    assert pg_cluster.psql(f"SELECT version FROM {name}.dsh_schema") == str(PG_VERSION)
    # Schema 7 indexes in the upgrade itself: no backlog table is left.
    assert pg_cluster.psql(f"SELECT to_regclass('{name}.dsh_search_pending')") == ""
    # The trigram index exists (pg_trgm is available on the test cluster).
    index = pg_cluster.psql(
        f"SELECT indexdef FROM pg_indexes WHERE schemaname = '{name}' "
        "AND indexname = 'dsh_search_trgm'"
    )
    assert "gin_trgm_ops" in index


def _team_database(pg_cluster: Cluster, *, may_create: bool) -> tuple[str, str]:
    """A new database for the (non-superuser) password role: it owns the database when
    ``may_create``; else it has only a schema of its own there (no CREATE on the
    database, so no extension). Its URL, and the schema dsh's tables go in."""
    database = "team_" + uuid.uuid4().hex[:12]
    if may_create:
        pg_cluster.psql(f"CREATE DATABASE {database} OWNER {SECRET_ROLE}", database="postgres")
        schema = "public"
    else:
        pg_cluster.psql(f"CREATE DATABASE {database}", database="postgres")
        schema = "dsh_team"
        pg_cluster.psql(
            f"REVOKE CREATE ON DATABASE {database} FROM PUBLIC;"
            f"CREATE SCHEMA {schema} AUTHORIZATION {SECRET_ROLE}",
            database=database,
        )
    url = pg_cluster.password_url(SECRET_PASSWORD, database) + f"&search_path={schema}"
    return url, schema


async def test_a_team_role_that_owns_its_database_gets_the_trigram_index(
    pg_cluster: Cluster,
) -> None:
    url, schema = _team_database(pg_cluster, may_create=True)
    assert pg_cluster.psql(f"SELECT rolsuper FROM pg_roles WHERE rolname = '{SECRET_ROLE}'") == "f"
    async with await open_store(url) as store:
        await store.create_session("s", created_at=1)
        await store.append("s", MSG, user_message("a trusted extension"), surface_op="append")
        assert [h.seq for h in await store.search_messages("trusted")] == [0]
    database = url.split("/")[3].split("?")[0]
    index = pg_cluster.psql(
        f"SELECT indexdef FROM pg_indexes WHERE schemaname = '{schema}' "
        "AND indexname = 'dsh_search_trgm'",
        database=database,
    )
    assert "gin_trgm_ops" in index


async def test_without_pg_trgm_search_scans_and_still_finds(pg_cluster: Cluster) -> None:
    url, schema = _team_database(pg_cluster, may_create=False)
    async with await open_store(url) as store:
        await store.create_session("s", created_at=1)
        await store.append("s", MSG, user_message("ILIKE still finds it"), surface_op="append")
        assert [h.snippet for h in await store.search_messages("finds")] == ["ILIKE still finds it"]
    database = url.split("/")[3].split("?")[0]
    assert (
        pg_cluster.psql(
            f"SELECT count(*) FROM pg_indexes WHERE schemaname = '{schema}' "
            "AND indexname = 'dsh_search_trgm'",
            database=database,
        )
        == "0"
    )
    assert (
        pg_cluster.psql(
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'", database=database
        )
        == "0"
    )


@pytest.mark.timeout(60)
async def test_a_long_term_is_looked_up_by_its_prefix_and_checked_whole(tmp_path: Path) -> None:
    # FTS5 matches a phrase in time that grows with its length times the occurrences of
    # its trigrams: a pasted 100,000 character term against one repetitive message held
    # the connection for minutes. The index is asked for a bounded prefix; the rows are
    # checked against the whole term (a message holding only the prefix is no hit).
    assert _fts_query("z" * 100_000) == '"zzz"'
    assert _fts_query("x" + "y" * 100_000) == '"xyy" AND "yyy"'
    assert _fts_query("abcd") == '"abc" AND "bcd"'
    assert _fts_query('a"b"') == '"a""b" AND """b"""'
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await store.create_session("big", created_at=1)
        await store.append("big", MSG, user_message("z" * 200_000), surface_op="append")
        await store.create_session("prefix", created_at=2)
        prefix_only = "y" * _FTS_PHRASE_MAX + " then something else"
        await store.append("prefix", MSG, user_message(prefix_only), surface_op="append")
        hits = await store.search_messages("z" * MAX_TERM_CHARS)
        assert [(h.session_id, h.seq) for h in hits] == [("big", 0)]
        # A pasted 100,000 characters is not a term (issue 30): refused before any query.
        with pytest.raises(SearchQueryError):
            await store.search_messages("z" * 100_000)
        assert await store.search_messages("y" * (_FTS_PHRASE_MAX + 1)) == []
        assert len(await store.search_messages("y" * _FTS_PHRASE_MAX)) == 1


async def test_a_read_only_postgres_server_opens_and_searches(pg_cluster: Cluster) -> None:
    # A standby, or a role whose transactions are read-only, opens an up-to-date database
    # for reading, search included. (Schema 7 indexes an older database's backlog in its
    # upgrade, which such a server cannot run: it refuses to open it, as any upgrade.)
    _, url = pg_cluster.fresh_schema_url()
    async with await open_store(url) as store:
        await store.create_session("s", created_at=1)
        await store.append("s", MSG, user_message("psi words"), surface_op="append")
    read_only = url + "&default_transaction_read_only=on"
    async with await open_store(read_only) as store:
        assert [h.id for h in await store.list_headers()] == ["s"]
        assert [h.session_id for h in await store.search_messages("psi")] == ["s"]
        with pytest.raises(StoreError, match="read-only"):
            await store.append("s", MSG, user_message("more"), surface_op="append")


async def test_other_store_calls_proceed_while_a_search_ranks(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ranking a common word over large messages takes seconds (BM25 counts and spans over
    # whole texts): SQLite ranked on its single connection, so every other call waited.
    # Here the ranking waits until another store call has completed meanwhile. (SQLite
    # ranks a few small candidates on the connection, in the query's call: the one here
    # is larger than that.)
    started, release = threading.Event(), threading.Event()

    def gated(
        found: list[tuple[str, int, str]], terms: Sequence[str], limit: int
    ) -> list[SearchHit]:
        started.set()
        release.wait(30)
        return rank_hits(found, terms, limit)

    monkeypatch.setattr("stores.search.rank_hits", gated)  # where every store ranks
    async with await open_store(location) as store:
        await store.create_session("s", created_at=1)
        big = "chi words" + " more" * 100_000
        await store.append("s", MSG, user_message(big), surface_op="append")
        search = asyncio.ensure_future(store.search_messages("chi"))
        try:
            assert await asyncio.to_thread(started.wait, 10)
            headers = await asyncio.wait_for(store.list_headers(), 10)
            assert [h.id for h in headers] == ["s"]
            assert not search.done()
        finally:
            release.set()
        assert [(h.session_id, h.seq) for h in await search] == [("s", 0)]


def unindex(path: Path) -> None:
    """Back to what the upgrade step leaves: no rows, every session pending."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM search_messages")
        conn.execute("INSERT INTO search_pending (session) SELECT key FROM sessions")


async def test_a_read_only_sqlite_database_says_how_many_sessions_search_misses(
    tmp_path: Path,
) -> None:
    # Opened read-only with an upgrade's backlog, search silently missed those sessions.
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for sid in ("a", "b"):
            await store.create_session(sid, created_at=1)
            await store.append(sid, MSG, user_message("omega words"), surface_op="append")
        assert await store.unindexed_sessions() == 0
    unindex(path)
    async with await SqliteSessionStore.open(path, read_only=True) as store:
        assert await store.search_messages("omega") == []
        assert await store.unindexed_sessions() == 2
    # Only sessions the user may read are counted.
    async with await SqliteSessionStore.open(path, read_only=True, user="mallory") as store:
        assert await store.unindexed_sessions() == 0
    async with await SqliteSessionStore.open(path) as store:
        assert await store.unindexed_sessions() == 0
        assert len(await store.search_messages("omega")) == 2
    assert unindexed_notice(0) is None
    assert unindexed_notice(1) == (
        "1 session is not indexed yet (the database is read-only); it is indexed the "
        "next time dsh opens it for writing"
    )
    assert unindexed_notice(2) == (
        "2 sessions are not indexed yet (the database is read-only); they are indexed the "
        "next time dsh opens it for writing"
    )


def hit_json(hit: SearchHit) -> list[Any]:
    # The id as its surrogatepass bytes: JSON would join the fixture's surrogate pair.
    sid = hit.session_id.encode("utf-8", "surrogatepass").hex()
    return [sid, hit.seq, hit.snippet, [list(s) for s in hit.spans], hit.score]


async def test_a_v6_database_gets_the_smaller_index_and_searches_the_same(tmp_path: Path) -> None:
    """A database written by c1863bd (schema v6: an index with positions) is upgraded to
    the index without them (its rows and their order kept; progress by sessions): every
    query finds what that store found, as each user (owner, grantee, stranger)."""
    path = tmp_path / "v6.sqlite3"
    shutil.copyfile(V6_DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (6,)
    want = {
        user: {q: [[merged_hex(h[0]), *h[1:]] for h in hits] for q, hits in found.items()}
        for user, found in json.loads(V6_EXPECTED.read_text(encoding="ascii")).items()
    }
    seen: list[tuple[int, int]] = []
    async with await SqliteSessionStore.open(
        path, user=V6_USERS[0], progress=lambda *p: seen.append(p)
    ) as store:
        # gamma, alpha, beta, shared: 4 sessions with rows (the deleted one has none).
        assert seen == [(4, 4)]
        assert {
            q: [hit_json(h) for h in await store.search_messages(q, limit=20)] for q in V6_QUERIES
        } == want[V6_USERS[0]]
    for user in V6_USERS[1:]:
        async with await SqliteSessionStore.open(path, user=user) as reader:
            got = {
                q: [hit_json(h) for h in await reader.search_messages(q, limit=20)]
                for q in V6_QUERIES
            }
            assert got == want[user], user
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'search_index'"
        ).fetchone()
    assert "detail = none" in sql
    fts_integrity(path)
    # It stays right through appends, replaces and deletes.
    async with await SqliteSessionStore.open(path, user=V6_USERS[0]) as store:
        await store.append("alpha", MSG, user_message("fresh omicron"), surface_op="append")
        last = await store.last_surface_seq("alpha")
        assert last is not None
        await store.append(
            "alpha",
            MSG,
            user_message("omicron edited"),
            surface_op=Replace(last, last),
            source_event_seqs=[last],
        )
        assert [h.snippet for h in await store.search_messages("omicron")] == ["omicron edited"]
        await store.delete_session("gamma")
        assert await store.search_messages("summary") == []
    fts_integrity(path)
    seen.clear()
    async with await SqliteSessionStore.open(path, progress=lambda *p: seen.append(p)):
        pass
    assert seen == []


def test_the_like_before_a_term_check_drops_no_true_match() -> None:
    # SQLite drops most lookalike candidates (the term's trigrams, not the term) by a LIKE
    # before the check in Python: it must let through every text that check keeps. Each
    # ASCII character is tried against every code point it matches under re.IGNORECASE.
    every = "".join(chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF)
    with sqlite3.connect(":memory:") as conn:
        for code in range(1, 0x80):
            ch = chr(code)
            pattern = _like_superset(ch * 3)
            assert pattern is not None
            for folded in set(re.findall(re.escape(ch), every, re.IGNORECASE)):
                (hit,) = conn.execute(
                    "SELECT ? LIKE ? ESCAPE '\\'", (f"<{folded * 3}>", pattern)
                ).fetchone()
                assert hit == 1, (ch, folded)
    assert _like_superset("检索") is None
    assert _like_superset("a" * 100) == "%" + "a" * _FTS_PHRASE_MAX + "%"
    assert _like_superset("100%_\\Kis") == "%100\\%\\_\\\\___%"


async def test_what_the_like_lets_through_is_checked_as_every_store_checks(
    tmp_path: Path,
) -> None:
    texts = ["ſtop the KELVIN ıt", "stop it", "st_p 100%", "sto p"]
    memory = MemorySessionStore()
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        for each in (memory, store):
            await each.create_session("s", created_at=1)
            for text in texts:
                await each.append("s", MSG, user_message(text), surface_op="append")
        # (Not a short term: those are found by LIKE, which folds ASCII letters only; nor
        # "istanbul": FTS5's trigrams do not fold İ, so it is no candidate, as before.)
        for query in ("STOP", "kelvin", "st_p", "100%", "sto", "top the", "KELVIN ıt"):
            assert await store.search_messages(query) == await memory.search_messages(query)
        assert {h.seq for h in await store.search_messages("STOP")} == {0, 1}

"""``read_latest_events`` on every store kind (issue 32): the latest ``session/profile``,
``session/fork`` or ``session/source`` (issue 33) event of many sessions in one query,
exactly as stored, whatever was appended around it (packed chunk runs on SQLite), for the
sessions the user may read."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.jsoncodec import dumps_js, utf8_len
from core.limits import MAX_MARK_EVENT_BYTES
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_FORK,
    SESSION_MARK_TYPES,
    SESSION_PROFILE,
    SESSION_SOURCE,
    NewEvent,
    SessionHeader,
    assistant_message,
    user_message,
)
from core.logfile import export_jsonl
from core.store import SessionStore
from stores import MemorySessionStore, SessionQuery, SqliteSessionStore, open_store
from stores.postgres import PostgresSessionStore
from stores.replay import LazyReplayStore, ReplayDatabase
from stores.sqlite import KIND_PACK, latest_events_sql
from tests.pgcluster import ALICE, BOB, Cluster
from tui.shared.replay import open_replay

MARKS = [SESSION_PROFILE, SESSION_FORK, SESSION_SOURCE]


def profile(name: str, model: str = "m1") -> NewEvent:
    return NewEvent(SESSION_PROFILE, {"profile": name, "provider": "offline", "model": model})


def fork(parent: str, seq: int) -> NewEvent:
    return NewEvent(SESSION_FORK, {"parent": {"id": parent, "seq": seq}})


def source(original_id: str, tool: str = "claude-code") -> NewEvent:
    """Where an imported session came from (``core.importers.foreign.source_event``)."""
    data = {"tool": tool, "file": f"/home/u/.claude/projects/p/{original_id}.jsonl"}
    return NewEvent(SESSION_SOURCE, {**data, "id": original_id})


def chunks(turn: int, count: int, start: int = 0) -> list[NewEvent]:
    """A streamed reply's text chunks (what SQLite packs, in runs)."""
    return [
        NewEvent(
            "assistant/chunk",
            {
                "turn": turn,
                "step": 0,
                "chunk": {"type": "text-delta", "index": i, "text": f"w{i} "},
            },
        )
        for i in range(start, start + count)
    ]


def reply(turn: int, count: int) -> NewEvent:
    """The reply the chunks of ``chunks(turn, count)`` stream (SQLite links their runs)."""
    text = "".join(f"w{i} " for i in range(count))
    message = assistant_message(text, provider="offline", model="m1")
    return NewEvent(ASSISTANT_MESSAGE, {"turn": turn, "step": 0, "message": message}, "append")


def user(text: str) -> NewEvent:
    return NewEvent("user/message", user_message(text), "append")


async def latest_in_log(store: SessionStore, sid: str, type_: str) -> Any:
    """The latest event of ``type_`` as ``read_events`` gives it (``None``: none)."""
    found = [e for e in await store.read_events(sid) if e.type == type_]
    return found[-1] if found else None


async def test_the_latest_of_several_profiles_wins(store: SessionStore) -> None:
    await store.create_session("s")
    first = await store.append_batch("s", [profile("fast"), user("hi"), *chunks(1, 3)])
    await store.append_batch("s", [reply(1, 3), profile("slow", "m2"), *chunks(2, 4)])
    last = (await store.append_batch("s", [user("again"), profile("deep", "m3")]))[-1]
    await store.append_batch("s", chunks(3, 5))
    found = await store.read_latest_events(SESSION_PROFILE)
    assert found == {"s": last}
    assert found["s"] == await latest_in_log(store, "s", SESSION_PROFILE)
    assert found["s"].data["profile"] == "deep" and first[0].seq == 0
    # A profile is log-only and of a type dsh's transcript does not know: the unknown
    # items show it, as they did before it had a name.
    unknown = await store.read_unknown_events("s")
    assert [e.seq for e in unknown if e.type == SESSION_PROFILE] == [0, 6, 12]
    assert await SessionQuery(store).read_latest_events(SESSION_PROFILE, ["s"]) == found


async def test_a_fork_is_seq_0_and_found_apart_from_the_profile(store: SessionStore) -> None:
    await store.create_session("parent")
    await store.append_batch("parent", [user("one"), *chunks(1, 2), reply(1, 2)])
    await store.create_session("child")
    made = await store.append_batch("child", [fork("parent", 3), *chunks(1, 40), profile("p")])
    assert (await store.read_latest_events(SESSION_FORK)) == {"child": made[0]}
    assert made[0].seq == 0 and made[0].data == {"parent": {"id": "parent", "seq": 3}}
    assert (await store.read_latest_events(SESSION_PROFILE)) == {"child": made[-1]}
    assert await store.read_latest_events(SESSION_FORK, ["parent"]) == {}
    assert await store.read_latest_events(SESSION_SOURCE) == {}


async def test_a_source_is_seq_0_and_found_apart_from_the_others(store: SessionStore) -> None:
    """Issue 33: an imported session starts with where it came from; the other marks and
    a session without one are found as before."""
    await store.create_session("native")
    await store.append_batch("native", [profile("p"), user("mine"), *chunks(1, 3)])
    header = SessionHeader("0b6e\u2028 \ud800", 1_700_000_000_000, "/w")
    log = [source("0b6e-\x1b[31m"), user("hi"), *chunks(1, 30), reply(1, 30), profile("q")]
    await store.import_session(header, [*log, NewEvent("claude-code/progress", {"n": 1})])
    events = await store.read_events(header.id)
    found = await store.read_latest_events(SESSION_SOURCE)
    assert found == {header.id: events[0]} and events[0].seq == 0
    assert found[header.id].data == {
        "tool": "claude-code",
        "file": "/home/u/.claude/projects/p/0b6e-\x1b[31m.jsonl",
        "id": "0b6e-\x1b[31m",
    }
    assert await store.read_latest_events(SESSION_SOURCE, ["native", header.id, "x"]) == found
    assert await store.read_latest_events(SESSION_SOURCE, ["native"]) == {}
    profiles = await store.read_latest_events(SESSION_PROFILE)
    assert set(profiles) == {"native", header.id} and profiles[header.id] == events[33]
    assert await store.read_latest_events(SESSION_FORK) == {}
    # Log-only and of a type the transcript does not know: shown among the unknown items.
    unknown = await store.read_unknown_events(header.id)
    assert [e.seq for e in unknown if e.type == SESSION_SOURCE] == [0]
    assert await SessionQuery(store).read_latest_events(SESSION_SOURCE, [header.id]) == found


@pytest.mark.parametrize("mark", MARKS)
async def test_each_mark_is_bounded_like_a_title(store: SessionStore, mark: str) -> None:
    """Every listing may read the latest of each for every session: one is at most
    ``MAX_MARK_EVENT_BYTES`` of JSON, appended or imported (a hostile source file's path
    or id cannot make it larger)."""
    from core.errors import InvalidEventError

    await store.create_session("s")
    big = {"tool": "codex", "file": "/" + "\x01" * 1_400, "id": "x"}  # escaped: 6 bytes each
    assert utf8_len(dumps_js(big)) > MAX_MARK_EVENT_BYTES
    with pytest.raises(InvalidEventError, match="at most 8,192 UTF-8 bytes"):
        await store.append("s", mark, big)
    with pytest.raises(InvalidEventError, match="at most 8,192 UTF-8 bytes"):
        await store.append_batch("s", [user("hi"), NewEvent(mark, big)])
    with pytest.raises(InvalidEventError, match="at most 8,192 UTF-8 bytes"):
        await store.import_session(SessionHeader("i", 1), [NewEvent(mark, big), user("hi")])
    assert await store.read_events("s") == []
    assert [h.id for h in await store.list_headers()] == ["s"]
    fits = await store.append("s", mark, {"file": "f" * 8_000})
    assert await store.read_latest_events(mark) == {"s": fits}


@pytest.mark.parametrize("mark", MARKS)
async def test_the_sessions_asked_for_and_only_those_that_have_one(
    store: SessionStore, mark: str
) -> None:
    events = {}
    for sid in ("a", "b", "c", "\udcff\x00", ""):
        await store.create_session(sid)
    for sid in ("a", "c", "\udcff\x00", ""):
        events[sid] = await store.append(sid, mark, {"profile": sid})
    await store.append_batch("b", [user("no mark here"), *chunks(1, 3)])
    assert await store.read_latest_events(mark) == events
    for other in MARKS:
        if other != mark:
            assert await store.read_latest_events(other) == {}
    asked = await store.read_latest_events(mark, ["c", "b", "nope", "c", ""])
    assert asked == {"c": events["c"], "": events[""]}
    assert await store.read_latest_events(mark, []) == {}
    assert await store.read_latest_events(mark, ("\udcff\x00",)) == {
        "\udcff\x00": events["\udcff\x00"]
    }
    # More ids than one statement binds (SQLite asks in chunks).
    many = [f"x{i}" for i in range(1_200)] + ["a"]
    assert await store.read_latest_events(mark, many) == {"a": events["a"]}
    await store.delete_session("a")
    assert "a" not in await store.read_latest_events(mark)
    assert await store.read_latest_events(mark, ["a"]) == {}


@pytest.mark.parametrize(
    "wrong",
    ["session/title", "assistant/chunk", "user/message", "", "SESSION/SOURCE", "session/", None, 3],
)
async def test_another_type_is_a_value_error(store: SessionStore, wrong: Any) -> None:
    await store.create_session("s")
    with pytest.raises(ValueError, match="session/profile, session/fork, session/source"):
        await store.read_latest_events(wrong)
    with pytest.raises(ValueError):
        await store.read_latest_events(wrong, ["s"])


async def test_ids_must_be_a_sequence_of_str(store: SessionStore) -> None:
    with pytest.raises(TypeError):
        await store.read_latest_events(SESSION_PROFILE, "s")
    with pytest.raises(TypeError):
        await store.read_latest_events(SESSION_PROFILE, [1])  # type: ignore[list-item]


async def test_kept_among_many_chunks_and_a_long_streamed_reply(store: SessionStore) -> None:
    """Marks appended before, inside and after long runs of chunks, one at a time (paced,
    as a reply streams: each append extends the open pack) and in batches."""
    await store.create_session("s")
    await store.append("s", SESSION_FORK, {"parent": {"id": "elsewhere", "seq": 7}})
    for i in range(300):
        await store.append_batch("s", chunks(1, 1, i))
    mid = await store.append_batch("s", [*chunks(1, 600, 300), profile("mid"), *chunks(1, 5, 900)])
    await store.append_batch("s", [reply(1, 905)])
    for i in range(50):
        await store.append_batch("s", chunks(2, 1, i))
    paced = await store.append("s", SESSION_SOURCE, source("re-read").data)
    for i in range(50, 60):
        await store.append_batch("s", chunks(2, 1, i))
    found = await store.read_latest_events(SESSION_PROFILE)
    assert found == {"s": mid[600]}
    assert found["s"] == await latest_in_log(store, "s", SESSION_PROFILE)
    assert (await store.read_latest_events(SESSION_FORK))["s"].seq == 0
    assert await store.read_latest_events(SESSION_SOURCE) == {"s": paced}
    assert paced == await latest_in_log(store, "s", SESSION_SOURCE)
    big = await store.append(
        "s", SESSION_PROFILE, {"profile": "big", "notes": "y" * 5_000, "lone": "\ud800"}
    )
    await store.append_batch("s", chunks(3, 700))
    assert await store.read_latest_events(SESSION_PROFILE) == {"s": big}
    assert big == await latest_in_log(store, "s", SESSION_PROFILE)


async def test_imported_logs_keep_theirs(store: SessionStore) -> None:
    header = SessionHeader("imported", 1_700_000_000_000, "/w")
    log = [fork("origin", 12), *chunks(1, 30), profile("a"), *chunks(1, 30, 30), reply(1, 60)]
    log += [profile("b"), *chunks(2, 10), source("later", "codex"), *chunks(2, 10, 10)]
    await store.import_session(header, log)
    events = await store.read_events("imported")
    assert await store.read_latest_events(SESSION_FORK) == {"imported": events[0]}
    assert await store.read_latest_events(SESSION_PROFILE) == {"imported": events[63]}
    assert events[63].data["profile"] == "b"
    assert await store.read_latest_events(SESSION_SOURCE) == {"imported": events[74]}
    assert events[74].data["tool"] == "codex"


async def test_kept_when_the_sqlite_store_is_closed_and_opened_again(tmp_path: Path) -> None:
    """SQLite: every mark is a single row (the partial index ``events_marks`` holds it),
    never inside a pack, and the store's tidying at close changes nothing."""
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session("s")
        await store.append_batch("s", [fork("p", 1), *chunks(1, 10)])
        for i in range(10, 20):
            await store.append_batch("s", chunks(1, 1, i))
        await store.append("s", SESSION_PROFILE, {"profile": "paced"})
        for i in range(20, 30):
            await store.append_batch("s", chunks(1, 1, i))
        await store.append_batch("s", [reply(1, 30), *chunks(2, 5), profile("x"), *chunks(2, 5)])
        await store.append_batch("s", [*chunks(2, 3, 5), source("s"), *chunks(2, 3, 8)])
        before = {t: await store.read_latest_events(t) for t in MARKS}
        events = await store.read_events("s")
    async with await SqliteSessionStore.open(path) as store:
        assert {t: await store.read_latest_events(t) for t in MARKS} == before
        assert await store.read_events("s") == events
    assert before[SESSION_PROFILE]["s"].data == {
        "profile": "x",
        "provider": "offline",
        "model": "m1",
    }
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT seq, n, kind, type FROM events ORDER BY seq").fetchall()
        marks = [row for row in rows if row[3].decode() in MARKS]
        assert [(seq, n, kind) for seq, n, kind, _ in marks] == [
            (0, 1, 0),
            (21, 1, 0),
            (38, 1, 0),
            (47, 1, 0),
        ]
        assert any(kind == KIND_PACK for _, _, kind, _ in rows)
        for type_ in MARKS:
            plan = conn.execute("EXPLAIN QUERY PLAN " + latest_events_sql(type_)).fetchall()
            assert any("USING INDEX events_marks" in row[3] for row in plan), plan


# Hypothesis never draws surrogates by default; mix lone ones (and NUL, ESC) in.
alphabet = st.one_of(
    st.characters(), st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00", "\x00", "\x1b"])
)
texts = st.text(alphabet, max_size=12)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
mark_data = st.one_of(
    st.builds(lambda p, v, m: {"profile": p, "provider": v, "model": m}, texts, texts, texts),
    st.builds(lambda i, s: {"parent": {"id": i, "seq": s}}, texts, st.integers(0, 2**40)),
    st.builds(lambda t, f, i: {"tool": t, "file": f, "id": i}, texts, texts, texts),
    st.dictionaries(texts, values, max_size=4),
    # Long enough to be stored compressed (SQLite: 128 characters), or alone (2,048).
    st.builds(lambda t, n: {"profile": t * n}, texts.filter(bool), st.integers(10, 400)),
).filter(lambda d: utf8_len(dumps_js(d)) <= MAX_MARK_EVENT_BYTES)  # bounded like titles


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    type_=st.sampled_from(MARKS),
    datas=st.lists(mark_data, min_size=1, max_size=3),
    before=st.integers(0, 3),
    time=st.integers(0, 2**45),
)
async def test_data_comes_back_exactly(
    store: SessionStore, type_: str, datas: list[dict[str, Any]], before: int, time: int
) -> None:
    """What was appended (as the append returned it: a surrogate pair is its character,
    SPEC 4.1; lone surrogates, NUL and every number stay as they are) is what is read."""
    sid = f"h-{uuid.uuid4()}\ud800"
    await store.create_session(sid)
    batch = [*chunks(1, before), *(NewEvent(type_, d, time=time + i) for i, d in enumerate(datas))]
    written = await store.append_batch(sid, [*batch, *chunks(1, 2, before)])
    found = (await store.read_latest_events(type_, [sid]))[sid]
    assert found == written[before + len(datas) - 1]
    assert found == await latest_in_log(store, sid, type_)
    assert (await store.read_latest_events(type_))[sid] == found


async def test_replays_find_them_as_the_stores_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dsh replay``'s stores: the log in memory, the app's lazy one before its check (from
    the lines) and after, and a large log streamed into SQLite."""
    monkeypatch.setattr("stores.replay._START_AT_LATEST_S", 3600.0)  # no check unasked
    memory = MemorySessionStore()
    header = await memory.create_session("replayed", created_at=1)
    await memory.append_batch(
        "replayed",
        [source("first"), fork("origin", 4), *chunks(1, 50), profile("a"), reply(1, 50)],
    )
    # The newest profile, then an event whose data looks like one (the lazy store
    # parses that line too, and reads on).
    await memory.append_batch(
        "replayed",
        [user("x"), profile("b", "m9"), source("second"), *chunks(2, 20)],
    )
    await memory.append_batch("replayed", [NewEvent("x/note", {"type": "x"})])
    await memory.append("replayed", "x/note", {"type": SESSION_PROFILE})
    await memory.append("replayed", "x/note", {"type": SESSION_SOURCE})
    want = {t: await memory.read_latest_events(t) for t in MARKS}
    assert want[SESSION_PROFILE]["replayed"].data["model"] == "m9"
    assert want[SESSION_SOURCE]["replayed"].data["id"] == "second"
    log = tmp_path / "log.jsonl"
    lines = export_jsonl(header, await memory.read_events("replayed"))
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    eager = await open_replay(str(log))
    lazy = await open_replay(str(log), lazy=True)
    assert isinstance(lazy, LazyReplayStore)
    for replay in (eager, lazy):
        assert {t: await replay.read_latest_events(t) for t in MARKS} == want
        assert (
            await replay.read_latest_events(SESSION_FORK, ["replayed", "no"]) == want[SESSION_FORK]
        )
        assert await replay.read_latest_events(SESSION_PROFILE, ["other"]) == {}
        with pytest.raises(ValueError):
            await replay.read_latest_events("session/title")
    assert not lazy.loaded  # found from the lines alone
    await lazy.wait_loaded()
    assert {t: await lazy.read_latest_events(t) for t in MARKS} == want
    await lazy.close()
    monkeypatch.setattr("tui.shared.replay.STREAM_ABOVE_BYTES", 1_000)
    streamed = await open_replay(str(log))
    assert isinstance(streamed, ReplayDatabase)
    try:
        assert {t: await streamed.read_latest_events(t) for t in MARKS} == want
    finally:
        await streamed.close()


# ---------------------------------------------------------------- who may read them


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """Alice's store and Bob's, on one database (PostgreSQL: two plain login roles,
    members of the team group, held to row security)."""
    if request.param == "memory":
        memory = MemorySessionStore(user=ALICE)
        yield memory, memory.as_user(BOB)
        return
    if request.param == "sqlite":
        path = tmp_path / "team.sqlite3"
        alice: SessionStore = await SqliteSessionStore.open(path, user=ALICE)
        bob: SessionStore = await SqliteSessionStore.open(path, user=BOB)
    else:
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        schema = cluster.team_schema()
        alice = await open_store(cluster.team_url(ALICE, schema))
        bob = await open_store(cluster.team_url(BOB, schema))
    try:
        yield alice, bob
    finally:
        await alice.close()
        await bob.close()


async def test_a_member_reads_only_the_sessions_they_may_read(
    pair: tuple[SessionStore, SessionStore],
) -> None:
    alice, bob = pair
    mine: dict[str, Any] = {}
    for store, sid in ((alice, "private"), (alice, "shared"), (bob, "bobs")):
        await store.create_session(sid)
        made = await store.append_batch(
            sid, [source(sid), fork("origin", 1), *chunks(1, 3), profile(f"{sid} profile")]
        )
        mine[sid] = made
    assert await alice.share("shared", BOB)
    for type_, index in ((SESSION_SOURCE, 0), (SESSION_FORK, 1), (SESSION_PROFILE, 5)):
        assert await alice.read_latest_events(type_) == {
            sid: mine[sid][index] for sid in ("private", "shared")
        }
        assert await bob.read_latest_events(type_) == {
            sid: mine[sid][index] for sid in ("shared", "bobs")
        }
        asked = await bob.read_latest_events(type_, ["private", "shared", "bobs"])
        assert asked == {sid: mine[sid][index] for sid in ("shared", "bobs")}
        assert await bob.read_latest_events(type_, ["private"]) == {}
    assert await alice.unshare("shared", BOB)
    for type_ in MARKS:
        assert set(await bob.read_latest_events(type_)) == {"bobs"}
        assert await bob.read_latest_events(type_, ["shared", "private"]) == {}


async def test_postgres_reads_them_through_their_index_under_row_security(
    pg_cluster: Cluster,
) -> None:
    """As a member, the planner proves the statement's type is one of the index's: one
    seek in ``dsh_events_marks`` per session (with statistics of a log of chunks)."""
    from stores.postgres.rows import latest_events_sql as pg_sql
    from tests.sharing.team import plain_sql

    schema = pg_cluster.team_schema()
    url = pg_cluster.team_url(ALICE, schema)
    async with await open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        for n in range(20):
            await store.create_session(f"s{n}")
            await store.append_batch(f"s{n}", [source(f"s{n}"), profile("p"), *chunks(1, 200)])
        for type_ in (SESSION_PROFILE, SESSION_SOURCE):
            assert len(await store.read_latest_events(type_)) == 20
    pg_cluster.psql(f"ANALYZE {schema}.dsh_events")
    async with plain_sql(url) as conn:
        for type_ in MARKS:
            plan = "\n".join(
                row[0] for row in await conn.fetch("EXPLAIN " + pg_sql(type_, "dsh_sessions"))
            )
            assert "dsh_events_marks" in plan, plan


async def test_the_type_list_is_what_the_indexes_cover() -> None:
    """A new mark type needs a schema step (its index, its packed events taken out)."""
    from stores import postgres, sqlite

    assert SESSION_MARK_TYPES == (SESSION_PROFILE, SESSION_FORK, SESSION_SOURCE)
    # (PostgreSQL's step 10, issue 34, is the change counter; SQLite's steps 13 and 14,
    # issue 36, the search index's upkeep and the short terms' index: no mark index.)
    assert sqlite.SCHEMA_VERSION == 14 and postgres.SCHEMA_VERSION == 11
    for type_ in SESSION_MARK_TYPES:
        assert type_.encode().hex() in sqlite.MIGRATIONS[11][-1]
        assert type_.encode().hex() in postgres.MIGRATIONS[9][-1]
    # Each type's packed events were taken out by the step that indexed it.
    assert set(SESSION_MARK_TYPES) == set().union(*sqlite._MARKS_OF_STEP.values())
    assert sqlite._MARKS_OF_STEP[sqlite.MIGRATIONS[11][1]] == {SESSION_SOURCE}


# ---------------------------------------------------------------- rows that cannot be read


@pytest.mark.parametrize("mark", MARKS)
async def test_a_damaged_sqlite_row_leaves_its_session_out(tmp_path: Path, mark: str) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for sid in ("bad", "fine"):
            await store.create_session(sid)
            await store.append_batch(sid, [NewEvent(mark, {"m": sid}), *chunks(1, 3)])
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET data = x'789c0000' WHERE type = ? AND session = "
            "(SELECT key FROM sessions WHERE id = CAST('bad' AS BLOB))",
            (mark.encode(),),
        )
    async with await SqliteSessionStore.open(path) as store:
        assert set(await store.read_latest_events(mark)) == {"fine"}
        assert await store.read_latest_events(mark, ["bad"]) == {}


async def test_another_members_hand_written_row_costs_the_listing_nothing(
    pg_cluster: Cluster,
) -> None:
    """Bob shares a session whose newest profile row he wrote by hand (not JSON): Alice's
    listing leaves that session out and reads the rest."""
    from tests.sharing.team import plain_sql

    schema = pg_cluster.team_schema()
    alice_url, bob_url = pg_cluster.team_url(ALICE, schema), pg_cluster.team_url(BOB, schema)
    async with await open_store(alice_url) as alice, await open_store(bob_url) as bob:
        mine = await alice.create_session("alices")
        made = await alice.append(mine.id, SESSION_PROFILE, {"profile": "a"})
        for sid in ("bob-bad", "bob-fine"):
            await bob.create_session(sid)
            await bob.append(sid, SESSION_PROFILE, {"profile": "b"})
            await bob.share(sid, ALICE)
        async with plain_sql(bob_url) as conn:
            await conn.execute(
                "INSERT INTO dsh_events (session_key, seq, type, time, kind, data) "
                "SELECT key, 100, convert_to($1, 'UTF8'), 1, 0, 'not json' "
                "FROM dsh_sessions WHERE id = convert_to('bob-bad', 'UTF8')",
                SESSION_PROFILE,
            )
        found = await alice.read_latest_events(SESSION_PROFILE)
        assert set(found) == {"alices", "bob-fine"} and found["alices"] == made
        assert await alice.read_latest_events(SESSION_PROFILE, ["bob-bad", "bob-fine"]) == {
            "bob-fine": found["bob-fine"]
        }

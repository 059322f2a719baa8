"""Workload ``team_search`` (issue 30, point 6): a member's message search in a team store of
1,000,000 messages over 20 members (``--quick``: 50,000).

The team database is made the README's way on a throwaway cluster (``tests/pgcluster.py``):
``pg_trgm`` in ``public`` (by the superuser), a database owned by ``dsh_admin``, who opens
dsh first (so schema 7's migration runs as it and it owns the tables), and 20 plain
members ``m00``..``m19`` in ``dsh_users``. Each member owns 50 sessions of equal size and
shares 3 of them with each of the next two members (so ``m03``, who searches, reads its
50 sessions and 6 of ``m01``'s and ``m02``'s: 5.6 % of the messages).

**Loading.** Through dsh's API 1M messages would take far too long, so the superuser
writes the rows in bulk: ``dsh_sessions`` and ``dsh_shares`` by ``INSERT``, the events by
``COPY`` in time order (every session's next message in turn, as a team writes them):
kind 1 ``user/message``/``assistant/message`` rows whose ``data`` is
``core.jsoncodec.dumps_js`` of ``core.log.user_message`` / ``assistant_message`` (as the
engine writes them), ``surface_op '"append"'``, ``projection`` and ``session_owner`` the
member. The tables' triggers stay on: ``dsh_index`` fills ``dsh_search`` (ids in time
order), the owner trigger and the foreign keys check every row. ``dsh_surface_nodes``
and ``dsh_surface_sums`` follow in SQL. A first row of the table compares that ``COPY``
with the triggers off and ``dsh_search`` filled by one ``INSERT … SELECT
dsh_search_text(type, data)``: the triggers cost 0-35 % more in our runs, not enough
to leave them out. The full run takes about 15 minutes on two busy cores, most of it
the load. Before the load, one session imported through the store by a member is
compared column by column with what the load writes for the same messages (events,
surface nodes, search rows). The texts are English-like sentences from a vocabulary of
3,000 words (Zipf), 5 % of the messages with a Chinese sentence; a rare word is put in
one message in 25,000 (about 40 in 1M).

**What grows.** The messages are loaded in three stages (each session a quarter, a half,
then all of its messages: 250k, 500k, 1M), ``VACUUM ANALYZE`` after each; the rare word
is measured at each stage, every query at the last.

**The paths compared**, for ``m03`` (not the tables' owner, not a superuser), interleaved,
medians (p90 in the notes):

* dsh: ``search_messages(q)`` through a store ``m03`` opened (``dsh_search_find``, then
  the ids under row security, then the ranking): the real path;
* old RLS: the query of the store before schema 7 (``SELECT s.id, m.seq, m.text FROM
  dsh_search AS m JOIN dsh_sessions AS s … ILIKE … ORDER BY m.id DESC LIMIT 1000``) as
  plain SQL by ``m03``. Members may no longer read ``dsh_search``, so it is emulated: the
  superuser keeps a copy, ``dsh_search_rls`` (same rows and ids, same primary key, same
  trigram index), with ``ENABLE`` and ``FORCE ROW LEVEL SECURITY``, the policy
  ``dsh_search`` had before schema 7 (``session_owner = current_user OR (session_key,
  session_owner) IN (SELECT session_key, owner FROM dsh_shares WHERE grantee =
  current_user)``) and ``SELECT`` granted to ``dsh_users``; the old query reads it;
* floor: the superuser's raw query on ``dsh_search`` (no row security, no access rule:
  every member's matches), planned for each pattern (``plan_cache_mode =
  force_custom_plan``): by default the prepared statement takes a generic plan after
  five runs, which reads the whole trigram index for a pattern without trigrams (a
  2-character or, in a C-locale database, a CJK term), 5-10x slower than a scan.
  ``dsh_search_find`` plans each call (``EXECUTE``); the old path, under row security,
  never uses the index whatever its plan.

The notes add ``dsh_search_find``'s statement alone (as ``m03``, no ranking) and one line
of each plan: the new path's from ``auto_explain`` (loaded by the superuser, which then
becomes ``m03`` with ``SET SESSION AUTHORIZATION`` and calls ``dsh_search_find``: the
function's inner statement is logged with ``ANALYZE`` and ``BUFFERS``), the old path's
and the floor's from ``EXPLAIN (ANALYZE, BUFFERS)`` as ``m03`` and as the superuser.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from core.jsoncodec import dumps_js
from core.log import (
    ASSISTANT_MESSAGE,
    USER_MESSAGE,
    NewEvent,
    SessionHeader,
    assistant_message,
    user_message,
)
from core.references.projection import message_code
from core.search import RANK_WINDOW, like_pattern
from core.store import SessionStore
from stores import open_store
from tests.benchmarks._common import Row, Settings, median

WORKLOAD = "team_search"
DATABASE = "dsh_team"
ADMIN = "dsh_admin"
GROUP = "dsh_users"
MEMBERS = tuple(f"m{i:02d}" for i in range(20))
SEARCHER = "m03"
SESSIONS_PER_MEMBER = 50
SHARED_SESSIONS = 3  # each member shares this many of its sessions …
SHARED_WITH = 2  # … with this many next members
BASE_TIME = 1_765_000_000_000
RARE_EVERY = 25_000  # one message in this many carries the rare word
SEARCH_TARGET = 0.020
"""A search's median (``bench_search``'s target, on SQLite): the rare word's at every size."""
FLOOR_SLACK = 0.005
"""What a store's search costs beyond its statement (a transaction, the ids, the ranking in
a thread): the floor's target allows this much over it when twice the floor is less."""
LOAD_PROBE = 20_000  # messages of the load-rate comparison
LOAD_PROBE_QUICK = 2_000

RARE = "retrypolicy"
ABSENT = "zyzzogeton"
QUERIES = (
    ("rare word", RARE),
    ("common word", "server"),
    ("two words", "index migration"),
    ("CJK substring", "数据库"),
    ("2-char term", "ui"),
    ("absent word", ABSENT),
)

OLD_SQL = (
    "SELECT s.id, m.seq, m.text FROM dsh_search_rls AS m "
    "JOIN dsh_sessions AS s ON s.key = m.session_key WHERE {likes} "
    f"ORDER BY m.id DESC LIMIT {RANK_WINDOW}"
)
FLOOR_SQL = (
    "SELECT m.session_key, m.seq, m.text FROM dsh_search AS m WHERE {likes} "
    f"ORDER BY m.id DESC LIMIT {RANK_WINDOW}"
)
FIND_SQL = "SELECT session_key, seq, text FROM dsh_search_find($1, $2, $3)"

OLD_TABLE = """
CREATE TABLE dsh_search_rls (
    session_key   bigint NOT NULL,
    seq           bigint NOT NULL,
    id            bigint NOT NULL,
    text          text   NOT NULL,
    session_owner text   NOT NULL,
    PRIMARY KEY (session_key, seq)
);
CREATE INDEX dsh_search_rls_trgm ON dsh_search_rls USING gin (text public.gin_trgm_ops);
ALTER TABLE dsh_search_rls ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh_search_rls FORCE ROW LEVEL SECURITY;
CREATE POLICY dsh_read ON dsh_search_rls FOR SELECT USING (session_owner = current_user
    OR (dsh_search_rls.session_key, session_owner) IN
       (SELECT session_key, owner FROM dsh_shares WHERE grantee = current_user));
GRANT SELECT ON dsh_search_rls TO dsh_users
"""

# ---------------------------------------------------------------- the texts


def _words(text: str) -> list[str]:
    return text.split()


_FUNCTION_WORDS = _words(
    "the to and a of is in it that we for this you on with be not can as are if but at "
    "from or have an will so do use by all just one when what should was more then there "
    "which our like need it's i they would also only now here how get has no some any "
    "your than into out up been make same each other"
)
_TOPIC_WORDS = _words(
    "file test run error server table query change code build function value request "
    "user config data version path release log update check session type branch index "
    "client response commit time call case list string issue result message package "
    "step field option output input default cache schema key migration service image "
    "container cluster node worker queue limit timeout retry token format parse column "
    "row store lock thread process memory disk network port host proxy route handler "
    "model prompt reply stream chunk event state screen widget layout style theme "
    "terminal command script shell variable module import class method object array "
    "loop async await future task job deploy rollback review merge rebase patch diff "
    "benchmark latency budget metric trace span alert dashboard backup restore replica "
    "primary database postgres sqlite trigger policy role grant owner member share "
    "search pattern match filter sort order group count sum average median percentile"
)
_SYLLABLES = _words(
    "con ver sta pro re de ex in ter com par tran pre sub for mer dis en mon lat "
    "tor ran cal vi na ri mo lu pe sa ta ko be li ga fo ne du mi ca ro bo"
)
_SUFFIXES = ("", "", "", "ing", "ed", "er", "ly", "ion", "al", "ic", "ous", "ure", "ity", "ant")
_CJK_WORDS = _words(
    "我们 需要 检查 数据库 的 索引 查询 性能 服务器 部署 测试 日志 错误 用户 配置 问题 "
    "优化 缓存 连接 事务 权限 迁移 版本 文件 会话 搜索 结果 这个 已经 可以"
)
VOCABULARY_SIZE = 3_000


def vocabulary(rng: random.Random) -> list[str]:
    """Real words at the top ranks (function words, then a chat about code's), made-up
    ones (syllables and a suffix) below: ``VOCABULARY_SIZE`` distinct words. None holds
    the rare or the absent word (a search is a substring match)."""
    words = list(dict.fromkeys(_FUNCTION_WORDS + _TOPIC_WORDS))
    seen = set(words)
    while len(words) < VOCABULARY_SIZE:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
        word += rng.choice(_SUFFIXES)
        if word not in seen:
            seen.add(word)
            words.append(word)
    assert not any(RARE in w or ABSENT in w for w in words)
    return words


def _zipf(count: int) -> list[float]:
    """Cumulative Zipf(1) weights of ``count`` ranks (for ``random.choices``)."""
    return list(itertools.accumulate(1 / (rank + 1) for rank in range(count)))


class Texts:
    """Message texts: sentences of 5-16 words drawn by Zipf's law, a user message 1-3 of
    them, an assistant's 2-6; 5 % end with a Chinese sentence; one in ``RARE_EVERY``
    carries the rare word."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng)
        self.weights = _zipf(len(self.words))
        self.cjk_weights = _zipf(len(_CJK_WORDS))

    def message(self, assistant: bool) -> str:
        rng = self.rng
        lengths = [
            rng.randint(5, 16) for _ in range(rng.randint(2, 6) if assistant else rng.randint(1, 3))
        ]
        drawn = rng.choices(self.words, cum_weights=self.weights, k=sum(lengths))
        if rng.random() < 1 / RARE_EVERY:
            drawn[rng.randrange(len(drawn))] = RARE
        sentences = []
        start = 0
        for n in lengths:
            words = drawn[start : start + n]
            start += n
            sentences.append(words[0].capitalize() + " " + " ".join(words[1:]) + ".")
        if rng.random() < 0.05:
            cjk = rng.choices(_CJK_WORDS, cum_weights=self.cjk_weights, k=rng.randint(4, 10))
            sentences.append("".join(cjk) + "。")
        return " ".join(sentences)

    def message_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


@dataclass(frozen=True)
class Message:
    """One surface event as the store writes it."""

    type: bytes
    data: str
    projection: int
    text: str


def message(texts: Texts, seq: int) -> Message:
    """The ``seq``-th message of a session: user and assistant in turn, as the engine
    writes them (``data`` is ``dumps_js`` of the event's data)."""
    assistant = seq % 2 == 1
    text = texts.message(assistant)
    if assistant:
        body = assistant_message(
            text, provider="deepseek", model="deepseek-chat", id=texts.message_id()
        )
        data = dumps_js({"turn": seq // 2 + 1, "step": 0, "message": body})
        kind = ASSISTANT_MESSAGE
    else:
        data = dumps_js(user_message(text, id=texts.message_id()))
        kind = USER_MESSAGE
    code = message_code("assistant" if assistant else "user", False, len(text.encode()))
    return Message(kind.encode(), data, code, text)


def event_time(slot: int, seq: int) -> int:
    """Every session gets a message a minute (its ``seq``-th in minute ``seq``), at its
    ``slot`` in that minute."""
    return BASE_TIME + seq * 60_000 + slot * 37


EVENT_COLUMNS = (
    "session_key",
    "seq",
    "type",
    "time",
    "kind",
    "data",
    "surface_op",
    "projection",
    "session_owner",
)


def event_records(
    texts: Texts, sessions: Sequence[tuple[int, str]], lo: int, hi: int
) -> Iterator[tuple[Any, ...]]:
    """``dsh_events`` rows (``EVENT_COLUMNS``) of seqs ``lo``..``hi - 1`` of each session,
    in time order: minute by minute, the sessions in a new random order each minute (so
    a member's messages are spread among the others', as when a team works at once)."""
    order = list(sessions)
    for seq in range(lo, hi):
        texts.rng.shuffle(order)
        for slot, (key, owner) in enumerate(order):
            m = message(texts, seq)
            yield (
                key,
                seq,
                m.type,
                event_time(slot, seq),
                1,
                m.data,
                '"append"',
                m.projection,
                owner,
            )


# ---------------------------------------------------------------- the database


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("bench team_search: no PostgreSQL binaries")
    with running_cluster(bindir) as cluster:
        yield cluster


def _setup_sql() -> str:
    """The README's "Setting up a team database", as the superuser (the group exists)."""
    roles = [f"CREATE ROLE {ADMIN} LOGIN"]
    roles += [f"CREATE ROLE {m} LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE {GROUP}" for m in MEMBERS]
    return ";".join(roles)


SEARCH_FILL = """
INSERT INTO dsh_search (session_key, seq, text, session_owner)
SELECT e.session_key, e.seq, t.text, e.session_owner FROM dsh_events AS e
CROSS JOIN LATERAL (SELECT dsh_search_text(e.type, e.data) AS text) AS t
WHERE e.session_key = $1 AND e.kind = 1 AND t.text IS NOT NULL
ORDER BY e.time, e.seq
"""


async def _load_stage(
    root: asyncpg.Connection, texts: Texts, sessions: Sequence[tuple[int, str]], lo: int, hi: int
) -> dict[str, float]:
    """Seqs ``lo``..``hi - 1`` of every session, in bulk (see the module doc); the seconds
    each step took."""
    spent: dict[str, float] = {}

    async def step(name: str, work: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        result = await work
        spent[name] = time.perf_counter() - started
        return result

    async with root.transaction():
        before = await root.fetchval("SELECT coalesce(max(id), 0) FROM dsh_search")
        records = event_records(texts, sessions, lo, hi)
        await step(
            "events and dsh_search",
            root.copy_records_to_table("dsh_events", records=records, columns=EVENT_COLUMNS),
        )
        await step(
            "surface nodes",
            root.execute(
                "INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection, session_owner) "
                "SELECT session_key, seq, seq, projection, session_owner FROM dsh_events "
                "WHERE kind = 1 AND seq >= $1 AND seq < $2",
                lo,
                hi,
            ),
        )
        await step(
            "old copy",
            root.execute(
                "INSERT INTO dsh_search_rls SELECT session_key, seq, id, text, session_owner "
                "FROM dsh_search WHERE id > $1",
                before,
            ),
        )
        await root.execute("UPDATE dsh_sessions SET next_seq = $1", hi)
        await root.execute("DELETE FROM dsh_surface_sums")
        await root.execute(
            "INSERT INTO dsh_surface_sums (session_key, messages, bytes, session_owner) "
            "SELECT session_key, count(*), sum(projection >> 2), min(session_owner) "
            "FROM dsh_surface_nodes WHERE projection >= 0 AND projection & 2 = 0 "
            "GROUP BY session_key"
        )
    await step(
        "vacuum",
        root.execute(
            "VACUUM ANALYZE dsh_sessions, dsh_shares, dsh_events, dsh_surface_nodes, "
            "dsh_surface_sums, dsh_search, dsh_search_rls"
        ),
    )
    return spent


async def _make_sessions(root: asyncpg.Connection) -> list[tuple[int, str]]:
    """Every member's sessions and shares; (key, owner) of each session."""
    owners = [m for m in MEMBERS for _ in range(SESSIONS_PER_MEMBER)]
    ids = [f"{m}-s{j:02d}".encode() for m in MEMBERS for j in range(SESSIONS_PER_MEMBER)]
    rows = await root.fetch(
        "INSERT INTO dsh_sessions (id, created_at, cwd, owner) "
        "SELECT u.id, $3 + (u.n - 1) * 37 - 1000, convert_to('/home/' || u.owner || '/dsh', "
        "'UTF8'), u.owner FROM unnest($1::bytea[], $2::text[]) WITH ORDINALITY AS u (id, owner, n) "
        "RETURNING key, owner",
        ids,
        owners,
        BASE_TIME,
    )
    sessions = [(row["key"], row["owner"]) for row in rows]
    shares = []
    for i, member in enumerate(MEMBERS):
        mine = [key for key, owner in sessions if owner == member][:SHARED_SESSIONS]
        for step in range(1, SHARED_WITH + 1):
            grantee = MEMBERS[(i + step) % len(MEMBERS)]
            shares += [(key, member, grantee) for key in mine]
    await root.copy_records_to_table(
        "dsh_shares", records=shares, columns=("session_key", "owner", "grantee")
    )
    return sessions


async def _load_rates(root: asyncpg.Connection, texts: Texts, count: int) -> tuple[float, float]:
    """Messages per second of a ``COPY`` of ``count`` messages into one session of
    ``SEARCHER``'s, as ``_load_stage`` does it (through the tables' triggers: ``dsh_index``
    fills ``dsh_search`` a row at a time, the owner trigger, the foreign keys' checks),
    and with the triggers off and ``dsh_search`` filled after by one ``INSERT … SELECT``
    (the other way the load could go). Each session is deleted after."""
    rates = []
    for name, triggers in (("load-triggers", True), ("load-bulk", False)):
        key = await root.fetchval(
            "INSERT INTO dsh_sessions (id, created_at, owner) VALUES ($1, $2, $3) RETURNING key",
            name.encode(),
            BASE_TIME,
            SEARCHER,
        )
        records = list(event_records(texts, [(key, SEARCHER)], 0, count))
        started = time.perf_counter()
        async with root.transaction():
            if not triggers:
                await root.execute("SET LOCAL session_replication_role = replica")
            await root.copy_records_to_table("dsh_events", records=records, columns=EVENT_COLUMNS)
            if not triggers:
                await root.execute(SEARCH_FILL, key)
        rates.append(count / (time.perf_counter() - started))
        indexed = await root.fetchval("SELECT count(*) FROM dsh_search WHERE session_key = $1", key)
        assert indexed == count, f"{name}: {indexed} of {count} messages indexed"
        await root.execute("DELETE FROM dsh_sessions WHERE key = $1", key)
    return rates[0], rates[1]


async def _check_bulk_rows(root: asyncpg.Connection, member: SessionStore) -> None:
    """A session imported through the store by a member holds exactly the rows the bulk
    load writes for the same messages (the search rows are the trigger's)."""
    count = 6
    header = SessionHeader("probe", BASE_TIME, "/home/probe")
    made = [message(Texts(7), seq) for seq in range(count)]
    await member.import_session(
        header,
        [
            NewEvent(m.type.decode(), json.loads(m.data), "append", None, event_time(0, seq))
            for seq, m in enumerate(made)
        ],
    )
    key = await root.fetchval("SELECT key FROM dsh_sessions WHERE id = 'probe'::bytea")
    events = await root.fetch(
        "SELECT seq, type, time, kind, data, surface_op, source_event_seqs, projection, "
        "session_owner FROM dsh_events WHERE session_key = $1 ORDER BY seq",
        key,
    )
    expected = [
        (seq, m.type, event_time(0, seq), 1, m.data, '"append"', None, m.projection, SEARCHER)
        for seq, m in enumerate(made)
    ]
    assert [tuple(r) for r in events] == expected, "bulk events differ from the store's"
    nodes = await root.fetch(
        "SELECT pos, seq, projection, session_owner FROM dsh_surface_nodes "
        "WHERE session_key = $1 ORDER BY pos",
        key,
    )
    assert [tuple(r) for r in nodes] == [(s, s, m.projection, SEARCHER) for s, m in enumerate(made)]
    indexed = await root.fetch(
        "SELECT seq, text, session_owner FROM dsh_search WHERE session_key = $1 ORDER BY seq", key
    )
    assert [tuple(r) for r in indexed] == [(s, m.text, SEARCHER) for s, m in enumerate(made)]
    await member.delete_session("probe")


# ---------------------------------------------------------------- measuring


def _likes(terms: Sequence[str]) -> str:
    return " AND ".join(f"m.text ILIKE ${i + 1} ESCAPE '\\'" for i in range(len(terms)))


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[8] if len(values) >= 3 else max(values)


async def _interleaved(fns: Sequence[Callable[[], Awaitable[Any]]], reps: int) -> list[list[float]]:
    """Samples of each, in rounds (the order rotating), after one warm call of each."""
    for fn in fns:
        await fn()
    samples: list[list[float]] = [[] for _ in fns]
    for r in range(reps):
        for i in itertools.islice(itertools.cycle(range(len(fns))), r, r + len(fns)):
            started = time.perf_counter()
            await fns[i]()
            samples[i].append(time.perf_counter() - started)
    return samples


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _walk(child)


def plan_line(doc: dict[str, Any], elapsed: float | None = None) -> str:
    """One line of an ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` document: its scans
    (rows out and rows a filter or recheck removed, summed over parallel workers), the
    workers launched, buffers, time, JIT."""
    top = doc["Plan"]
    scans = []
    workers = 0
    for node in _walk(top):
        kind = node["Node Type"]
        workers += node.get("Workers Launched", 0)
        if "Scan" not in kind or kind == "Function Scan":
            continue
        loops = node.get("Actual Loops") or 1
        target = node.get("Index Name") or node.get("Relation Name") or ""
        rows = round(node.get("Actual Rows", 0) * loops)
        removed = round(
            (node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0))
            * loops
        )
        scans.append(
            ("Parallel " if node.get("Parallel Aware") else "")
            + f"{kind} on {target} ({rows:,} rows"
            + (f", {removed:,} removed" if removed else "")
            + ")"
        )
    took = doc.get("Execution Time", elapsed)
    jit = doc.get("JIT")
    jit_text = (
        f"JIT {jit['Timing']['Total']:.0f} ms"
        if isinstance(jit, dict) and "Timing" in jit
        else "no JIT"
    )
    return (
        "; ".join(scans)
        + (f"; {workers} parallel workers" if workers else "")
        + f"; buffers hit {top.get('Shared Hit Blocks', 0):,} read {top.get('Shared Read Blocks', 0):,}"
        + (f"; {took:.1f} ms" if took is not None else "")
        + f"; {jit_text}"
    )


async def explain_find(root: asyncpg.Connection, patterns: list[str], flags: list[bool]) -> str:
    """The plan of ``dsh_search_find``'s inner statement run for ``SEARCHER``, logged by
    ``auto_explain`` (a module only a superuser loads) and caught as a notice."""
    caught: list[str] = []

    def listener(_conn: Any, msg: Any) -> None:
        caught.append(str(msg.message))

    root.add_log_listener(listener)
    try:
        await root.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
            "SET auto_explain.log_nested_statements = on; SET auto_explain.log_analyze = on; "
            "SET auto_explain.log_buffers = on; SET auto_explain.log_timing = on; "
            "SET auto_explain.log_format = json; SET auto_explain.log_level = notice"
        )
        await root.execute(f"SET SESSION AUTHORIZATION {SEARCHER}")
        try:
            await root.fetch(FIND_SQL, patterns, flags, RANK_WINDOW)
        finally:
            await root.execute(
                "RESET SESSION AUTHORIZATION; SET auto_explain.log_min_duration = -1"
            )
    finally:
        root.remove_log_listener(listener)
    for text in caught:
        if "plan:" not in text:
            continue
        doc = json.loads(text[text.index("{") :])
        if "FROM dsh_search AS m" in doc.get("Query Text", ""):
            duration = float(text.split("duration:")[1].split("ms")[0])
            return plan_line(doc, duration)
    raise AssertionError(f"auto_explain logged no plan of the inner statement: {caught!r}")


async def explain_sql(conn: asyncpg.Connection, sql: str, args: Sequence[Any]) -> str:
    raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    doc = json.loads(raw)[0]
    return plan_line(doc)


@dataclass
class Paths:
    """The connections and stores each path runs on."""

    store: SessionStore
    member: asyncpg.Connection  # SEARCHER, plain SQL
    root: asyncpg.Connection  # the superuser

    def dsh(self, query: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self.store.search_messages(query)

    def old(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        sql = OLD_SQL.format(likes=_likes(terms))
        params = [like_pattern(t) for t in terms]
        return lambda: self.member.fetch(sql, *params)

    def floor(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        sql = FLOOR_SQL.format(likes=_likes(terms))
        params = [like_pattern(t) for t in terms]
        return lambda: self.root.fetch(sql, *params)

    def find(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        params = [like_pattern(t) for t in terms]
        flags = [False] * len(terms)
        return lambda: self.member.fetch(FIND_SQL, params, flags, RANK_WINDOW)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ms(value: float) -> str:
    return f"{value * 1000:,.1f} ms"


async def _measure(
    paths: Paths, label: str, query: str, size: str, reps: int, *, explain: bool
) -> tuple[list[Row], dict[str, float]]:
    """The rows of one query at one size: dsh against the old RLS path, and the floor."""
    dsh, old, floor, find = await _interleaved(
        [paths.dsh(query), paths.old(query), paths.floor(query), paths.find(query)], reps
    )
    hits = len(await paths.store.search_messages(query))
    matched = len(await paths.old(query)())
    notes = [
        f"'{query}': {hits} hits ({matched} matching rows readable)",
        f"p90 dsh {_ms(_p90(dsh))}, old {_ms(_p90(old))}, floor {_ms(_p90(floor))}",
        f"dsh_search_find alone {_ms(median(find))}",
    ]
    if explain:
        terms = query.split()
        params = [like_pattern(t) for t in terms]
        new_plan = await explain_find(paths.root, params, [False] * len(terms))
        old_plan = await explain_sql(paths.member, OLD_SQL.format(likes=_likes(terms)), params)
        floor_plan = await explain_sql(paths.root, FLOOR_SQL.format(likes=_likes(terms)), params)
        notes += [f"new plan: {new_plan}", f"old plan: {old_plan}", f"floor plan: {floor_plan}"]
    vs_old = median(dsh) / median(old)
    vs_floor = median(dsh) / median(floor)
    near_floor = median(dsh) <= max(2 * median(floor), median(floor) + FLOOR_SLACK)
    rows = [
        Row(
            WORKLOAD,
            f"{label}, dsh vs old RLS @ {size}",
            median(dsh),
            "s",
            "below the old RLS path",
            vs_old < 1.0,
            baseline=median(old),
            ratio=vs_old,
            note="; ".join(notes),
            samples=dsh,
            baseline_samples=old,
        ),
        Row(
            WORKLOAD,
            f"{label}, dsh vs floor @ {size}",
            median(dsh),
            "s",
            "within 2x of the floor (or 5 ms)",
            near_floor,
            baseline=median(floor),
            ratio=vs_floor,
            samples=dsh,
            baseline_samples=floor,
        ),
    ]
    return rows, {"dsh": median(dsh), "old": median(old)}


async def _sanity(paths: Paths, root: asyncpg.Connection, per_session: int) -> None:
    """The listing, a read and a search through the store, as the member (untimed)."""
    store = paths.store
    readable = SESSIONS_PER_MEMBER + SHARED_SESSIONS * SHARED_WITH
    headers = await store.list_headers()
    assert len(headers) == readable, f"m03 lists {len(headers)} sessions, not {readable}"
    shared = next(h for h in headers if h.owner != SEARCHER)
    events = await store.read_events(shared.id)
    assert len(events) == per_session and events[-1].seq == per_session - 1
    assert [e.data for e in events[:2]] == [
        json.loads(r["data"])
        for r in await root.fetch(
            "SELECT data FROM dsh_events WHERE session_key = "
            "(SELECT key FROM dsh_sessions WHERE id = $1) AND seq < 2 ORDER BY seq",
            shared.id.encode(),
        )
    ]
    # The rare word's hits: exactly the readable messages holding it (at most 20).
    found = {(h.session_id, h.seq) for h in await store.search_messages(RARE, limit=RANK_WINDOW)}
    rows = await paths.member.fetch(OLD_SQL.format(likes=_likes([RARE])), like_pattern(RARE))
    assert found == {(bytes(r["id"]).decode(), r["seq"]) for r in rows}, "rare-word hits differ"
    assert await store.search_messages(ABSENT) == []


@dataclass(frozen=True)
class Scale:
    per_session: tuple[int, ...]  # messages per session at each stage
    reps: int


async def run_workload(settings: Settings) -> list[Row]:
    scale = Scale((12, 25, 50), 5) if settings.quick else Scale((250, 500, 1_000), 9)
    sessions_total = len(MEMBERS) * SESSIONS_PER_MEMBER
    rows: list[Row] = []
    with _cluster() as cluster:
        cluster.psql(_setup_sql())
        cluster.psql(f"CREATE DATABASE {DATABASE} OWNER {ADMIN}")
        cluster.psql(
            f"CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; "
            f"GRANT USAGE ON SCHEMA public TO {GROUP}",
            database=DATABASE,
        )
        admin = await open_store(cluster.url(DATABASE, user=ADMIN))
        await admin.close()
        root = await asyncpg.connect(cluster.url(DATABASE))
        store: SessionStore | None = None
        member: asyncpg.Connection | None = None
        try:
            await root.execute(OLD_TABLE)
            store = await open_store(cluster.url(DATABASE, user=SEARCHER))
            member = await asyncpg.connect(cluster.url(DATABASE, user=SEARCHER))
            await _check_bulk_rows(root, store)
            await root.execute("SET maintenance_work_mem = '256MB'; SET work_mem = '64MB'")
            probe = LOAD_PROBE_QUICK if settings.quick else LOAD_PROBE
            trigger_rate, bulk_rate = await _load_rates(root, Texts(8), probe)
            rows.append(
                Row(
                    WORKLOAD,
                    f"COPY {probe:,} messages, triggers on vs off",
                    trigger_rate,
                    "ev/s",
                    "-",
                    None,
                    baseline=bulk_rate,
                    ratio=trigger_rate / bulk_rate,
                    note="messages/s into one session (ratio: higher is faster); ours: through "
                    "dsh_index, the owner trigger and the foreign keys (how the stages load); "
                    "baseline: triggers off, then dsh_search by one INSERT … SELECT "
                    "dsh_search_text(type, data)",
                )
            )
            load_spent: dict[str, float] = {}
            sessions = await _make_sessions(root)
            texts = Texts(30)
            paths = Paths(store, member, root)
            await root.execute("SET plan_cache_mode = force_custom_plan")  # see the floor
            growth: list[tuple[str, dict[str, float]]] = []
            lo = 0
            for stage, hi in enumerate(scale.per_session):
                started = time.perf_counter()
                spent = await _load_stage(root, texts, sessions, lo, hi)
                loaded = time.perf_counter() - started
                for name, took in spent.items():
                    load_spent[name] = load_spent.get(name, 0.0) + took
                lo = hi
                size = f"{hi * sessions_total:,}"
                steps = ", ".join(f"{name} {took:.1f} s" for name, took in spent.items())
                print(
                    f"  team_search: {size} messages, stage loaded in {loaded:.1f} s ({steps})",
                    file=sys.stderr,
                    flush=True,
                )
                if stage < len(scale.per_session) - 1:
                    stage_rows, medians = await _measure(
                        paths, "rare word", RARE, size, scale.reps, explain=False
                    )
                    rows += stage_rows[:1]
                    growth.append((size, medians))
            size = f"{scale.per_session[-1] * sessions_total:,}"
            sizes = await root.fetch(
                "SELECT c, pg_size_pretty(pg_total_relation_size(c)) FROM unnest("
                "ARRAY['dsh_events', 'dsh_search', 'dsh_search_trgm']::regclass[]) AS c"
            )
            rows.append(
                Row(
                    WORKLOAD,
                    f"bulk load of {size} messages",
                    sum(load_spent.values()),
                    "s",
                    "-",
                    None,
                    note="3 stages, each VACUUM ANALYZEd; "
                    + ", ".join(f"{name} {took:.1f} s" for name, took in load_spent.items())
                    + "; sizes (with indexes): "
                    + ", ".join(f"{name} {pretty}" for name, pretty in sizes)
                    + f"; this process's peak RSS {_peak_rss_mb():,.0f} MB",
                )
            )
            await _sanity(paths, root, scale.per_session[-1])
            for label, query in QUERIES:
                query_rows, medians = await _measure(
                    paths, label, query, size, scale.reps, explain=True
                )
                rows += query_rows
                if query == RARE:
                    growth.append((size, medians))
            first, last = growth[0][1], growth[-1][1]
            rows.append(
                Row(
                    WORKLOAD,
                    f"rare word growth {growth[0][0]} -> {growth[-1][0]}",
                    last["dsh"] / first["dsh"],
                    "x",
                    "dsh <= 20 ms at every size",
                    max(m["dsh"] for _, m in growth) <= SEARCH_TARGET,
                    baseline=last["old"] / first["old"],
                    note="ours: the dsh path's median at the largest size over the smallest; "
                    "baseline: the old RLS path's; the target is the search workload's; "
                    + ", ".join(f"{s}: dsh {_ms(m['dsh'])} old {_ms(m['old'])}" for s, m in growth),
                )
            )
        finally:
            if member is not None:
                await member.close()
            if store is not None:
                await store.close()
            await root.close()
    return rows

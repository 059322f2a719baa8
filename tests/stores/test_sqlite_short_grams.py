"""Issue 36: search terms of one or two characters on SQLite are looked up in a block-level
gram index (``stores.sqlite.shortgrams``), not by a scan of every message, and find
exactly what that scan finds: the same hits in the same order, whatever the case folds,
the appends, replaces, deletes, reopens and upgrades, for whoever may read what."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.folding import fold
from core.log import NewEvent, Replace, assistant_message, user_message
from core.search import SearchHit, like_pattern
from stores import SqliteSessionStore
from stores.columns import decode_text
from stores.search import plan_search
from stores.sqlite import SCHEMA_VERSION
from stores.sqlite import schema as sqlite_schema
from stores.sqlite.search import _search_sql
from stores.sqlite.shortgrams import block_tokens, term_query

MSG = "user/message"
ASSISTANT = "assistant/message"
CHECKPOINT = {"kind": "plugin", "plugin": "compact"}

_EVERY_CHAR = [chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000]


def _cased() -> list[str]:
    """The characters whose case ``str`` knows (lower, upper or fold differ from them),
    with their single-character lower and upper cases and folds."""
    found = {c for c in _EVERY_CHAR if fold(c) != c or c.lower() != c or c.upper() != c}
    for c in list(found):
        found.update(x for x in (c.lower(), c.upper(), fold(c)) if len(x) == 1)
    return sorted(found)


def test_every_character_folds_as_re_ignorecase_matches_it() -> None:
    """``re.IGNORECASE`` matches a character with another only if both fold alike (so a
    text a term matches holds the term's folded grams), over every code point: each
    cased character's matches among the cased ones, and no other character matched by
    any of them (those fold to themselves)."""
    assert all(len(fold(c)) == 1 for c in _EVERY_CHAR)
    cased = _cased()
    among = "".join(cased)
    for c in cased:
        matched = re.findall(re.escape(c), among, re.IGNORECASE)
        assert c in matched
        assert {fold(d) for d in matched} == {fold(c)}, (hex(ord(c)), matched)
    others = "".join(sorted(set(_EVERY_CHAR) - set(cased)))
    assert all(fold(c) == c for c in others)
    any_cased = re.compile("[" + "".join(re.escape(c) for c in cased) + "]", re.IGNORECASE)
    assert any_cased.search(others) is None
    # The folds the issue names, and ASCII letters: what LIKE folds, re folds alike.
    for group in ("kK\u212a", "sS\u017f", "iI\u0130\u0131", "\u03c3\u03a3\u03c2", "\u00b5\u03bc"):
        assert len({fold(c) for c in group}) == 1, group
    assert fold("AbCxYZ") == fold("aBcXyz")


@given(st.characters(exclude_categories=["Cs"]), st.characters(exclude_categories=["Cs"]))
def test_any_two_characters_re_matches_fold_alike(a: str, b: str) -> None:
    if re.fullmatch(re.escape(a), b, re.IGNORECASE) or re.fullmatch(re.escape(b), a, re.IGNORECASE):
        assert fold(a) == fold(b)


TRICKY = "aAkKsSiIxyz%_\\ \u212a\u017f\u0130\u0131\u03a3\u03c3\u03c2\u00b5\u03bc\u0345\u03b9\u1fbe\u00df\u1e9e\u68c0\u7d22"
"""Characters of the random texts: ASCII letters and what re folds with them (Kelvin sign,
long s, dotted and dotless i), sigmas, micro and mu, iota's forms, sharp s, CJK, and
LIKE's special characters."""
TEXTS = st.text(alphabet=TRICKY, max_size=10)
TERMS = st.text(alphabet=TRICKY.replace(" ", ""), min_size=1, max_size=2)


@given(st.lists(TEXTS, min_size=1, max_size=5), st.data())
def test_a_block_holds_the_grams_of_every_short_term_its_texts_match(
    texts: list[str], data: st.DataObject
) -> None:
    text = data.draw(st.sampled_from(texts))
    if text:
        start = data.draw(st.integers(0, len(text) - 1))
        term = text[start : start + data.draw(st.integers(1, 2))]
        # Any spelling re matches it with (each character one re matches with it).
        spelling = "".join(
            data.draw(st.sampled_from([d for d in TRICKY if re.fullmatch(re.escape(c), d, re.I)]))
            for c in term
        )
        tokens = set(block_tokens(texts).split())
        query = term_query([spelling])
        assert query.strip('"') in tokens


async def _scan(store: SqliteSessionStore, query: str, limit: int = 20) -> list[SearchHit]:
    """The search as it was before the index: a ``LIKE`` scan of every message newest
    first, the store's user's sessions only (``_search_sql`` without long terms)."""
    plan = plan_search(query, limit)
    assert plan is not None
    sql = _search_sql([], len(plan.terms))
    params = [*(like_pattern(t) for t in plan.terms), *store._readers, plan.limit + 16]

    def body(raw: sqlite3.Connection) -> list[tuple[str, int, str]]:
        return [(decode_text(sid), seq, text) for sid, seq, text in raw.execute(sql, params)]

    found = await store._run_sync(body, write=False)
    return await asyncio.to_thread(plan.rank, found)


def _set_block_size(path: Path, size: int) -> None:
    """A new database's blocks of ``size`` rows (a few rows make many blocks)."""
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM search_messages").fetchone() == (0,)
        conn.execute("UPDATE short_grams_state SET size = ?", (size,))
    conn.close()


def _state(path: Path) -> tuple[int, int, int | None, int]:
    """Rows per block, indexed blocks, the highest search row id, loose rows."""
    with sqlite3.connect(path) as conn:
        ((size, blocks),) = conn.execute("SELECT size, blocks FROM short_grams_state")
        ((top,),) = conn.execute("SELECT max(id) FROM search_messages")
        ((loose,),) = conn.execute("SELECT count(*) FROM short_grams_loose")
    conn.close()
    return size, blocks, top, loose


async def _assert_as_scan(store: SqliteSessionStore, queries: list[str]) -> None:
    for query in queries:
        for limit in (1, 20):
            assert await store.search_messages(query, limit=limit) == await _scan(
                store, query, limit
            ), (query, limit)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.lists(TEXTS, min_size=1, max_size=8)),
        st.tuples(st.just("replace"), st.integers(0, 2), st.integers(1, 3), TEXTS),
        st.tuples(st.just("delete"), st.integers(0, 2)),
        st.tuples(st.just("delete"), st.just(-1)),  # the session written last
        st.tuples(st.just("reopen")),
    ),
    min_size=2,
    max_size=14,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(OPS, st.lists(st.lists(TERMS, min_size=1, max_size=2), min_size=1, max_size=4))
async def test_short_terms_find_what_the_scan_finds(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[object, ...]],
    queries: list[list[str]],
) -> None:
    """Random histories in blocks of 2 rows: appends (user and assistant messages),
    replaces of a session's last messages by a checkpoint (their rows leave), deleted
    sessions (whose newest ids SQLite gives again: loose rows), reopens; after each, every
    query (one or two short terms) finds exactly what the scan finds, in its order."""
    path = tmp_path_factory.mktemp("short") / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path):
        pass
    _set_block_size(path, 2)
    texts = [" ".join(q) for q in queries]
    store = await SqliteSessionStore.open(path)
    surfaces: dict[int, list[int]] = {}
    seqs: dict[int, int] = {}
    last = 0
    try:
        for op in ops:
            if op[0] == "reopen":
                await store.close()
                store = await SqliteSessionStore.open(path)
                await _assert_as_scan(store, texts)
                continue
            sid = last if op[1] == -1 else op[1]
            assert isinstance(sid, int)
            if op[0] == "delete":
                if sid in surfaces:
                    await store.delete_session(f"s{sid}")
                    del surfaces[sid]
                await _assert_as_scan(store, texts)
                continue
            if sid not in surfaces:
                await store.create_session(f"s{sid}", created_at=1)
                surfaces[sid], seqs[sid] = [], 0
            surface, seq = surfaces[sid], seqs[sid]
            batch: list[NewEvent] = []
            if op[0] == "append":
                for text in op[2]:  # type: ignore[union-attr]
                    data = (
                        user_message(text)
                        if seq % 2 == 0
                        else {
                            "turn": 1,
                            "step": 0,
                            "message": assistant_message(text, provider="p", model="m"),
                        }
                    )
                    batch.append(NewEvent(MSG if seq % 2 == 0 else ASSISTANT, data, "append"))
                    surface.append(seq)
                    seq += 1
            elif surface:
                gone = surface[-min(len(surface), op[2]) :]  # type: ignore[misc]
                summary = user_message(str(op[3]), source=CHECKPOINT)
                batch.append(NewEvent(MSG, summary, Replace(gone[0], gone[-1]), gone))
                del surface[-len(gone) :]
                surface.append(seq)
                seq += 1
            seqs[sid] = seq
            if batch:
                await store.append_batch(f"s{sid}", batch)
                last = sid
            size, blocks, top, _ = _state(path)
            assert blocks >= (-1 if top is None else top + 1) // size  # every complete block
            await _assert_as_scan(store, texts)
    finally:
        await store.close()


async def test_many_blocks_and_loose_rows(tmp_path: Path) -> None:
    """Enough rows for many blocks of the real size: rare and common terms in old and
    new blocks; the newest session deleted and its ids written again (loose rows)."""
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for k in range(6):
            await store.create_session(f"s{k}", created_at=k)
            texts = [f"message {k} {i} common words" for i in range(60)]
            if k == 1:
                texts[7] = "the rare \u212aelvin sign and 检索"
            if k == 0:
                texts[3] = "an old qz in the first block"
            await store.append_batch(
                f"s{k}", [NewEvent(MSG, user_message(t), "append") for t in texts]
            )
        size, blocks, top, loose = _state(path)
        assert (size, blocks, top, loose) == (64, 5, 360, 0)
        queries = ["k", "\u212a", "K", "检", "检索", "索 k", "rd", "5", "zz", "s 3", "%", "_"]
        await _assert_as_scan(store, queries)
        assert [h.snippet for h in await store.search_messages("检索")] == [
            "the rare \u212aelvin sign and 检索"
        ]
        await store.delete_session("s5")  # ids 301 to 360: block 4 (to 319) indexed
        await store.create_session("new", created_at=9)
        fresh = [NewEvent(MSG, user_message(f"fresh qz {i}"), "append") for i in range(70)]
        await store.append_batch("new", fresh)
        size, blocks, top, loose = _state(path)
        assert (blocks, top, loose) == (5, 370, 19)  # ids 301-319 loose, 320- new blocks
        await _assert_as_scan(store, [*queries, "qz", "q", "z 1"])
        # The loose rows (newer than block 0) come before block 0's row, in id order.
        hits = await store.search_messages("qz", limit=100)
        assert [h.seq for h in hits] == [*range(69, -1, -1), 3]


async def test_only_the_readable_sessions_are_found(tmp_path: Path) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path, user="alice") as alice:
        for k in range(4):
            await alice.create_session(f"a{k}", created_at=k)
            batch = [NewEvent(MSG, user_message(f"q{i} of a{k}"), "append") for i in range(50)]
            await alice.append_batch(f"a{k}", batch)
        assert await alice.share("a1", "bob")
        await _assert_as_scan(alice, ["q", "q4", "f", "a3"])
    async with await SqliteSessionStore.open(path, user="bob") as bob:
        hits = await bob.search_messages("q4", limit=100)
        assert {h.session_id for h in hits} == {"a1"}
        await _assert_as_scan(bob, ["q", "q4", "a3", "a1"])
        assert await bob.search_messages("a3") == []


def _downgrade(path: Path) -> None:
    """The database as the previous schema version wrote it: without the block index."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER short_grams_reused")
        for table in ("short_grams", "short_grams_state", "short_grams_loose"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.close()


async def test_an_upgrade_indexes_the_existing_messages_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for k in range(5):
            await store.create_session(f"s{k}", created_at=k)
            batch = [NewEvent(MSG, user_message(f"{k}x{i} \u017ftep"), "append") for i in range(70)]
            await store.append_batch(f"s{k}", batch)
        want = {q: await store.search_messages(q) for q in ("4x", "S", "x6", "ep", "1x6")}
    _downgrade(path)
    monkeypatch.setattr(sqlite_schema, "_BLOCKS_PER_STEP", 2)
    reports: list[tuple[int, int]] = []
    progress: Callable[[int, int], None] = lambda done, total: reports.append((done, total))  # noqa: E731
    async with await SqliteSessionStore.open(path, fold_progress=progress) as store:
        assert reports == [(128, 320), (256, 320), (320, 320)]
        assert _state(path)[:2] == (64, 5)
        for query, hits in want.items():
            assert await store.search_messages(query) == hits
        await _assert_as_scan(store, list(want))

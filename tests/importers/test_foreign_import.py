"""Storing sessions of other tools (``core.importers.foreign_import``) in real stores
(memory, SQLite, PostgreSQL): provenance at seq 0, the title, original and fallback ids, incremental re-import,
conflicts, failures that store nothing, and the incremental rule as a property."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.importers import foreign_import
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession, Provenance
from core.importers.foreign_import import (
    candidate_ids,
    fallback_id,
    file_kind,
    import_foreign,
    imported_title,
    native_kind,
    plain_head,
    store_foreign_session,
)
from core.importers.source import LogTooLargeError
from core.limits import MAX_TITLE_BYTES
from core.log import NewEvent, SessionHeader
from core.store import SessionStore
from stores import SessionQuery, open_store
from tests.importers.toy_foreign import header_line, install, message, to_events, toy_lines
from tests.storekinds import STORE_KINDS, open_kind

CREATED = 1_700_000_000_000


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """Each test runs on the memory store, SQLite and PostgreSQL alike."""
    async with open_kind(request, tmp_path) as opened:
        yield opened


def conversation(n: int, start: int = 0, word: str = "m") -> list[dict[str, Any]]:
    return [
        message("user" if i % 2 == 0 else "assistant", f"{word} {i}", CREATED + 10 * i)
        for i in range(start, n)
    ]


def session(
    records: Sequence[dict[str, Any]],
    sid: str = "c-1",
    tool: str = "claude-code",
    title: str | None = "A title",
    file: str = "/home/u/.claude/projects/p/c-1.jsonl",
) -> ForeignSession:
    return ForeignSession(
        provenance=Provenance(tool, file, sid),  # type: ignore[arg-type]
        created_at=CREATED,
        cwd="/work/p",
        title=title,
        events=to_events(tool, records, sid),
        files=(file,),
    )


async def test_a_new_session_is_stored_with_its_source_first_and_its_title_last(
    store: SessionStore,
) -> None:
    outcome = await store_foreign_session(store, session(conversation(4)))
    assert (outcome.status, outcome.session_id, outcome.new_events) == ("imported", "c-1", 4)
    header = await store.read_header("c-1")
    assert (header.created_at, header.cwd) == (CREATED, "/work/p")
    events = await store.read_events("c-1")
    assert events[0].type == "session/source" and events[0].time == CREATED
    assert events[0].data == {
        "tool": "claude-code",
        "file": "/home/u/.claude/projects/p/c-1.jsonl",
        "id": "c-1",
    }
    assert events[0].surface_op is None
    assert [e.type for e in events[1:5]] == ["user/message", "assistant/message"] * 2
    assert [e.time for e in events[1:5]] == [CREATED + 10 * i for i in range(4)]
    assert events[5].type == "session/title" and events[5].time == events[4].time
    assert events[5].data == {
        "title": "A title",
        "source": {"kind": "provider", "provider": "claude-code", "imported": True},
    }
    # dsh's listing and search see the title and the messages
    query = SessionQuery(store)
    title = await query.read_title("c-1")
    assert title is not None and title.title == "A title"
    hits = await store.search_messages("m 3")
    assert [h.session_id for h in hits] == ["c-1"]


async def test_importing_the_same_session_again_changes_nothing(store: SessionStore) -> None:
    await store_foreign_session(store, session(conversation(4)))
    before = await store.read_events("c-1")
    again = await store_foreign_session(store, session(conversation(4)))
    assert (again.status, again.session_id) == ("unchanged", "c-1")
    assert await store.read_events("c-1") == before


async def test_a_session_that_grew_gets_only_its_new_events(store: SessionStore) -> None:
    await store_foreign_session(store, session(conversation(4)))
    grown = await store_foreign_session(store, session(conversation(7)))
    assert (grown.status, grown.new_events, grown.title_changed) == ("updated", 3, False)
    events = await store.read_events("c-1")
    assert [e.type for e in events].count("session/title") == 1
    texts = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
    assert texts == ["m 0", "m 2", "m 4", "m 6"]
    assert events[-1].time == CREATED + 60  # times kept
    # and once more: nothing
    assert (await store_foreign_session(store, session(conversation(7)))).status == "unchanged"
    assert len(await store.read_events("c-1")) == len(events)


async def test_a_changed_title_is_written_again_unless_the_user_renamed_it(
    store: SessionStore,
) -> None:
    await store_foreign_session(store, session(conversation(2)))
    retitled = await store_foreign_session(store, session(conversation(2), title="Better"))
    assert (retitled.status, retitled.new_events, retitled.title_changed) == ("updated", 0, True)
    title = await SessionQuery(store).read_title("c-1")
    assert title is not None and title.title == "Better"
    await store.append("c-1", "session/title", {"title": "Mine", "source": {"kind": "user"}})
    kept = await store_foreign_session(store, session(conversation(3), title="Best"))
    assert (kept.status, kept.new_events, kept.title_changed) == ("updated", 1, False)
    title = await SessionQuery(store).read_title("c-1")
    assert title is not None and title.title == "Mine"


async def test_a_session_edited_at_the_source_is_reported_and_not_merged(
    store: SessionStore,
) -> None:
    await store_foreign_session(store, session(conversation(4)))
    before = await store.read_events("c-1")
    edited = conversation(4)
    edited[1] = message("assistant", "rewritten", CREATED + 10)
    outcome = await store_foreign_session(store, session(edited + conversation(6, 4)))
    assert (outcome.status, outcome.session_id) == ("conflict", "c-1")
    shorter = await store_foreign_session(store, session(conversation(3)))
    assert shorter.status == "conflict"
    assert await store.read_events("c-1") == before


async def test_a_session_continued_in_dsh_is_not_merged(store: SessionStore) -> None:
    await store_foreign_session(store, session(conversation(2)))
    await store.append_batch("c-1", to_events("claude-code", [message("user", "in dsh", 5)], "x"))
    before = await store.read_events("c-1")
    outcome = await store_foreign_session(store, session(conversation(4)))
    assert outcome.status == "conflict"
    assert await store.read_events("c-1") == before


async def test_a_taken_id_falls_back_to_a_stable_one(store: SessionStore) -> None:
    await store.create_session("c-1")  # dsh's own session, not this import's
    first = await store_foreign_session(store, session(conversation(2)))
    fallback = fallback_id("claude-code", "c-1")
    assert (first.status, first.session_id) == ("imported", fallback)
    assert await store.read_events("c-1") == []
    again = await store_foreign_session(store, session(conversation(3)))
    assert (again.status, again.session_id, again.new_events) == ("updated", fallback, 1)
    # the same id from another tool is another session
    codex = await store_foreign_session(store, session(conversation(2), tool="codex"))
    assert codex.session_id == fallback_id("codex", "c-1") != fallback
    # both taken by others: failed, nothing stored
    await store.create_session("c-2")
    await store.create_session(fallback_id("chatgpt", "c-2"))
    failed = await store_foreign_session(store, session(conversation(2), sid="c-2", tool="chatgpt"))
    assert failed.status == "failed" and "held by other sessions" in failed.reason


async def test_a_session_found_at_its_original_id_is_matched_by_tool_and_id(
    store: SessionStore,
) -> None:
    await store_foreign_session(store, session(conversation(2), tool="codex"))
    other = await store_foreign_session(store, session(conversation(2), tool="claude-code"))
    assert other.session_id == fallback_id("claude-code", "c-1")
    assert (await store.read_events("c-1"))[0].data["tool"] == "codex"


def test_unusable_original_ids_go_straight_to_the_fallback() -> None:
    for bad in ("", "a b", "x\x1b[31m", "\ud800", "é" * 600, "line\n"):
        assert candidate_ids("codex", bad) == [fallback_id("codex", bad)]
    assert candidate_ids("codex", "0199-abc")[0] == "0199-abc"
    assert fallback_id("codex", "a") == fallback_id("codex", "a") != fallback_id("chatgpt", "a")


async def test_without_a_title_the_first_request_names_the_session(store: SessionStore) -> None:
    records = [message("user", "\n  Why is   the build red?\nmore", CREATED), *conversation(2, 1)]
    await store_foreign_session(store, session(records, title=None))
    title = await SessionQuery(store).read_title("c-1")
    assert title is not None and title.title == "Why is the build red?"
    assert title.source == {"kind": "fallback", "provider": "claude-code", "imported": True}
    again = await store_foreign_session(store, session([*records, *conversation(4, 2)], title=None))
    assert (again.status, again.new_events, again.title_changed) == ("updated", 2, False)
    # the tool gave it a title since: it replaces the fallback, once
    named = await store_foreign_session(store, session(records, title="Red build"))
    assert named.status == "conflict"  # (a shorter session is a conflict, titles aside)
    full = [*records, *conversation(4, 2)]
    named = await store_foreign_session(store, session(full, title="Red build"))
    assert (named.status, named.new_events, named.title_changed) == ("updated", 0, True)
    assert (await store_foreign_session(store, session(full, title="Red build"))).status == (
        "unchanged"
    )
    # a tool's title never gives way to a fallback
    assert (await store_foreign_session(store, session(full, title=None))).status == "unchanged"
    title = await SessionQuery(store).read_title("c-1")
    assert title is not None and title.title == "Red build"


async def test_no_title_at_all_without_a_persons_message(store: SessionStore) -> None:
    records = [message("assistant", "hello", CREATED), {"raw": 1, "time": CREATED}]
    await store_foreign_session(store, session(records, title=None))
    assert await SessionQuery(store).read_title("c-1") is None
    grown = await store_foreign_session(
        store, session([*records, message("user", "later", CREATED + 5)], title=None)
    )
    assert (grown.new_events, grown.title_changed) == (1, True)
    title = await SessionQuery(store).read_title("c-1")
    assert title is not None and title.title == "later"


def test_titles_are_one_line_and_bounded() -> None:
    assert imported_title(None) is None
    assert imported_title(" \n\t ") is None
    assert imported_title("a\nb\t c") == "a b c"
    long = imported_title("é" * 5000)
    assert long is not None and len(long.encode()) <= MAX_TITLE_BYTES and set(long) == {"é"}


async def test_a_hostile_session_fails_whole(store: SessionStore) -> None:
    bad = session([*conversation(3), {"bad-event": True, "time": CREATED + 99}])
    outcome = await store_foreign_session(store, bad)
    assert outcome.status == "failed" and outcome.reason
    assert await store.list_headers() == []
    # a huge hostile title is cut, never refused
    huge = session(conversation(1), title="\x1b[2J" + "t" * 100_000)
    assert (await store_foreign_session(store, huge)).status == "imported"


async def test_an_event_without_time_takes_the_previous_one(store: SessionStore) -> None:
    events = to_events("codex", conversation(2), "c-1")
    events.append(NewEvent("codex/raw", {"record": 1}))
    item = session([], tool="codex")
    item.events = events
    assert (await store_foreign_session(store, item)).status == "imported"
    stored = await store.read_events("c-1")
    assert stored[3].time == stored[2].time
    assert (await store_foreign_session(store, item)).status == "unchanged"


def test_native_kinds_are_told_from_the_first_line() -> None:
    assert native_kind(b'{"type":"session","id":"a","created_at":1}\n') == "dsh"
    assert native_kind(b'\n{"type":"session","id":"a","createdAt":1}\n{"x"') == "reference"
    assert native_kind(b"\x28\xb5\x2f\xfd....") is None  # compressed: see file_kind
    assert native_kind(b'{"toy":"codex"}\n') is None
    assert native_kind(b"\xff\xfe") is None
    assert native_kind(b"") is None
    assert native_kind(b'{"type":"session"' + b" " * 70_000) is None


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


def test_a_compressed_file_is_judged_by_what_it_decompresses_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(monkeypatch)
    tools = list(foreign_import.FORMAT_MODULES)
    where = tmp_path / "x.jsonl.zst"
    reference = b'{"type":"session","version":0,"id":"r","createdAt":1}\n'
    assert file_kind(where, zst(reference), tools) == "reference"
    codex = toy_lines([header_line("codex", "cx-1")]).encode()
    assert file_kind(where, zst(codex), tools) == "codex"
    assert file_kind(where, codex, tools) == "codex"
    assert file_kind(where, b'{"type":"session","id":"a","created_at":1}\n', tools) == "dsh"
    # a dsh export is never compressed; a damaged or cut frame says nothing
    assert file_kind(where, zst(b'{"type":"session","id":"a","created_at":1}\n'), tools) is None
    assert file_kind(where, zst(codex)[:-6], tools) is None
    assert file_kind(where, b"\x28\xb5\x2f\xfd....", tools) is None
    # a bomb: 64 KiB of its start at most, read a little at a time
    bomb = zst(b"[" * (200 * 1024 * 1024))
    assert len(bomb) < SNIFF_BYTES
    assert len(plain_head(bomb)) == SNIFF_BYTES
    assert file_kind(where, bomb, tools) is None


def test_every_foreign_tool_has_a_reader_module() -> None:
    assert foreign_import.FORMAT_MODULES == {
        "claude-code": "core.importers.claude_code",
        "codex": "core.importers.codex",
        "chatgpt": "core.importers.chatgpt",
    }


# -- the incremental rule, as a property ----------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
records = st.lists(
    st.one_of(
        st.builds(
            lambda t, r: {"role": r, "text": t}, texts, st.sampled_from(["user", "assistant"])
        ),
        st.builds(lambda t: {"raw": t}, texts),
        st.builds(lambda t: {"more": t}, texts),  # more of the reply before it
    ),
    min_size=1,
    max_size=25,
)


def timed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "time": CREATED + i} for i, r in enumerate(items)]


async def stored_log(store: SessionStore, sid: str) -> list[Any]:
    """What a session is, whichever steps imported it: its folded surface, its log-only
    events but titles, in order, and its title (the importer writes the title when it
    first imports a session, so in steps it sits earlier; a reply read in the middle is
    completed by a replace, so the raw logs differ there)."""
    events = await store.read_events(sid)
    titles = [e.data for e in events if e.type == "session/title"]
    assert len(titles) <= 1  # never twice
    log_only = [
        (e.type, e.time, e.data)
        for e in events
        if e.surface_op is None and e.type != "session/title"
    ]
    return [await surface(store, sid), log_only, titles]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.data())
def test_importing_in_steps_gives_the_events_of_importing_once(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    items = timed(items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=3)))
    title = data.draw(st.sampled_from([None, "A title"]))  # None: the first request names it

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            stepped = await open_store(Path(tmp) / "a.sqlite3")
            whole = await open_store(Path(tmp) / "b.sqlite3")
            try:
                for cut in cuts:
                    outcome = await store_foreign_session(
                        stepped, session(items[:cut], title=title)
                    )
                    assert outcome.status in ("imported", "updated", "unchanged")
                final = await store_foreign_session(stepped, session(items, title=title))
                assert final.status in ("imported", "updated", "unchanged")
                again = await store_foreign_session(stepped, session(items, title=title))
                assert again.status == "unchanged"
                await store_foreign_session(whole, session(items, title=title))
                assert await stored_log(stepped, "c-1") == await stored_log(whole, "c-1")
                expected = [(e.type, e.data) for e in to_events("claude-code", items, "c-1")]
                assert await surface(whole, "c-1") == [
                    (t, d) for t, d in expected if t != "claude-code/raw"
                ]
                assert await stepped.read_header("c-1") == await whole.read_header("c-1")
            finally:
                await stepped.close()
                await whole.close()

    asyncio.run(run())


async def test_the_header_is_the_sessions(store: SessionStore) -> None:
    await store_foreign_session(store, session(conversation(1)))
    assert await store.read_header("c-1") == SessionHeader("c-1", CREATED, "/work/p")


async def test_each_session_is_stored_before_the_next_is_read(tmp_path: Path) -> None:
    """Memory is bounded by one session: the reader is asked for the next session only
    once the last one is in the database (looked at from another connection)."""
    db = tmp_path / "dsh.sqlite3"
    seen: list[int] = []

    def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
        for n in range(4):
            with sqlite3.connect(db) as conn:
                seen.append(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            if n == 2:
                yield ForeignImportError(paths[0], "torn", 7, "s-2")
            else:
                yield session(conversation(2), sid=f"s-{n}")

    fmt = SimpleNamespace(TOOL="claude-code", read_sessions=read_sessions)
    store = await open_store(db)
    try:
        outcomes = [o async for o in import_foreign(store, fmt, [tmp_path / "x"])]  # type: ignore[arg-type]
    finally:
        await store.close()
    assert seen == [0, 1, 2, 2]
    assert [o.status for o in outcomes] == ["imported", "imported", "failed", "imported"]
    failed = outcomes[2]
    assert (failed.file, failed.line, failed.reason, failed.original_id) == (
        str(tmp_path / "x"),
        7,
        "torn",
        "s-2",
    )


async def test_two_imports_at_once_never_append_twice(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    first, second = await open_store(db), await open_store(db)
    try:
        await store_foreign_session(first, session(conversation(2)))
        for n in (4, 6, 8):
            outcomes = await asyncio.gather(
                store_foreign_session(first, session(conversation(n))),
                store_foreign_session(second, session(conversation(n))),
            )
            statuses = sorted(o.status for o in outcomes)
            assert statuses[0] in ("failed", "unchanged", "updated")
            assert "updated" in statuses or statuses == ["unchanged", "unchanged"]
            # whatever the interleaving, the stored log is the source's, once
            events = await first.read_events("c-1")
            kept = [e for e in events if e.type in ("user/message", "assistant/message")]
            assert len(kept) == n
    finally:
        await first.close()
        await second.close()


async def test_a_session_being_written_is_left_for_later(store: SessionStore) -> None:
    await store_foreign_session(store, session(conversation(2)))
    assert await store.take_reply_lease("c-1", "elsewhere:0:1:x", ttl_ms=60_000)
    busy = await store_foreign_session(store, session(conversation(4)))
    assert busy.status == "failed" and "another dsh is writing" in busy.reason
    await store.release_reply_lease("c-1", "elsewhere:0:1:x")
    assert (await store_foreign_session(store, session(conversation(4)))).status == "updated"
    assert await store.read_reply_lease("c-1") is None


async def test_the_stored_session_is_compared_a_batch_at_a_time(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(foreign_import, "_BATCH", 3)
    await store_foreign_session(store, session(conversation(10)))
    await store.append("c-1", "session/title", {"title": "Mine", "source": {"kind": "user"}})
    grown = await store_foreign_session(store, session(conversation(17), title="Other"))
    assert (grown.status, grown.new_events, grown.title_changed) == ("updated", 7, False)
    assert (await store_foreign_session(store, session(conversation(17)))).status == "unchanged"
    edited = conversation(17)
    edited[15] = message("user", "changed late", edited[15]["time"])
    assert (await store_foreign_session(store, session(edited))).status == "conflict"
    assert len(await store.read_events("c-1")) == 1 + 10 + 1 + 1 + 7


async def test_a_reader_that_raises_is_one_failure_naming_its_file(
    store: SessionStore, tmp_path: Path
) -> None:
    def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
        yield session(conversation(1))
        raise LogTooLargeError("a line is longer than 64 MiB", 3)

    fmt = SimpleNamespace(TOOL="codex", read_sessions=read_sessions)
    outcomes = [o async for o in import_foreign(store, fmt, [tmp_path / "r.jsonl"])]  # type: ignore[arg-type]
    assert [o.status for o in outcomes] == ["imported", "failed"]
    assert (outcomes[1].file, outcomes[1].line, outcomes[1].reason) == (
        str(tmp_path / "r.jsonl"),
        3,
        "a line is longer than 64 MiB",
    )


def more(text: str) -> dict[str, Any]:
    return {"more": text}


async def surface(store: SessionStore, sid: str) -> list[tuple[str, Any]]:
    snapshot = await SessionQuery(store).read_surface(sid)
    return [(e.type, e.data) for e in snapshot.events]


async def test_a_reply_read_while_it_was_written_is_completed_in_place(
    store: SessionStore,
) -> None:
    """A tool that writes a reply over several lines (Claude Code) read in the middle of
    one: the rest of the reply replaces what was read of it, once; the surface is the
    reader's, and importing again finds it unchanged."""
    records = [*conversation(2), more("part two")]
    await store_foreign_session(store, session(records))
    full = [*records, more("part three"), *conversation(4, 2)]
    grown = await store_foreign_session(store, session(full))
    assert (grown.status, grown.new_events) == ("updated", 3)  # the whole reply, two more
    expected = [(e.type, e.data) for e in to_events("claude-code", full, "c-1")]
    assert await surface(store, "c-1") == expected
    assert (await store_foreign_session(store, session(full))).status == "unchanged"
    # the last reply grows again, twice
    longer = [*full, more("b"), more("c")]
    cut = [*full, more("b")]
    assert (await store_foreign_session(store, session(cut))).status == "updated"
    assert (await store_foreign_session(store, session(longer))).status == "updated"
    assert (await store_foreign_session(store, session(longer))).status == "unchanged"
    expected = [(e.type, e.data) for e in to_events("claude-code", longer, "c-1")]
    assert await surface(store, "c-1") == expected
    hits = await store.search_messages("part three")
    assert len(hits) == 1  # the part read first is shadowed: no longer found


async def test_a_reply_edited_rather_than_grown_is_a_conflict(store: SessionStore) -> None:
    await store_foreign_session(store, session([*conversation(2), more("a")]))
    before = await store.read_events("c-1")
    edited = conversation(2)
    edited[1] = message("assistant", "m 1, rewritten", edited[1]["time"])
    assert (await store_foreign_session(store, session([*edited, more("a")]))).status == (
        "conflict"
    )
    # only the last message may have grown
    await store_foreign_session(store, session([*conversation(2), more("a"), *conversation(4, 2)]))
    middle = [*conversation(2), more("a"), more("inserted"), *conversation(4, 2)]
    assert (await store_foreign_session(store, session(middle))).status == "conflict"
    assert len(await store.read_events("c-1")) == len(before) + 2


async def test_records_between_the_lines_of_a_reply_stay_in_place(store: SessionStore) -> None:
    raw = {"raw": "progress", "time": CREATED + 50}
    first = [*conversation(2), raw]
    await store_foreign_session(store, session(first))
    full = [*first, more("rest"), {"raw": "after", "time": CREATED + 60}, *conversation(4, 2)]
    grown = await store_foreign_session(store, session(full))
    assert (grown.status, grown.new_events) == ("updated", 4)
    expected = to_events("claude-code", full, "c-1")
    assert await surface(store, "c-1") == [(e.type, e.data) for e in expected if e.surface_op]
    assert (await store_foreign_session(store, session(full))).status == "unchanged"
    # a reply that grew when other messages came after it was edited
    edited = [*first, more("rest"), more("x"), full[4], *conversation(4, 2)]
    assert (await store_foreign_session(store, session(edited))).status == "conflict"

"""Event data nested too deeply (issue 31 point 3): refused on every append and import with
one line; what a store already holds (rows written before the limit, or by hand) is shown
with what lies deeper elided and exported exactly, never a traceback."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.errors import InvalidEventError
from core.jsoncodec import dumps_js, loads_exact
from core.limits import MAX_JSON_DEPTH
from core.log import NewEvent, user_message
from core.store import SessionStore
from stores import SqliteSessionStore
from stores.sqlite import _text
from tests.cli.conftest import Run
from tests.storekinds import STORE_KINDS, open_kind, pg_schema_url

pytestmark = pytest.mark.timeout(120)

DEPTH = 500  # what the log held: deep enough for every recursive reader to fail


def deep_text(depth: int) -> str:
    """An object whose value nests ``depth`` levels in all, objects and arrays in turn."""
    # Level i (0 innermost) is an array when i is odd, else an object; joined, not grown a
    # level at a time, which copies the whole text at every level (a minute at 200,000).
    levels = range(depth - 1)
    opening = "".join("[" if i % 2 else '{"k":' for i in reversed(levels))
    closing = "".join("]" if i % 2 else "}" for i in levels)
    return '{"a":' + opening + '"x"' + closing + "}"


async def seed_deep(db: Path, session_id: str, depth: int = DEPTH) -> tuple[str, str]:
    """A session of three events whose unknown event (seq 1) and user message (seq 2, an
    unknown content block) are then rewritten by hand to nest ``depth`` levels, as a row
    written before the limit reads. Returns the two data texts as stored."""
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session(session_id)
        await store.append(session_id, "user/message", user_message("hello"), surface_op="append")
        await store.append(session_id, "odd/event", {"a": 1})
        await store.append(session_id, "user/message", user_message("later"), surface_op="append")
    odd = deep_text(depth)
    with sqlite3.connect(db) as raw:
        (key,) = raw.execute(
            "SELECT key FROM sessions WHERE id = ?", (session_id.encode(),)
        ).fetchone()
        (stored,) = raw.execute(
            "SELECT data FROM events WHERE session = ? AND seq = 2", (key,)
        ).fetchone()
        block = '{"type":"odd-block","x":' + deep_text(depth - 3) + "},"
        message = _text(stored).replace('"content":[', '"content":[' + block, 1)
        raw.execute("UPDATE events SET data = ? WHERE session = ? AND seq = 1", (odd, key))
        raw.execute("UPDATE events SET data = ? WHERE session = ? AND seq = 2", (message, key))
    return odd, message


def nested_data(depth: int) -> dict[str, Any]:
    """Event data nesting ``depth`` levels in all (the data object is level 1)."""
    data: dict[str, Any] = loads_exact(deep_text(depth), frozen=False)
    return data


@pytest.fixture(params=STORE_KINDS)
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    async with open_kind(request, tmp_path) as store:
        yield store


async def test_every_store_refuses_deep_data_and_writes_nothing(any_store: SessionStore) -> None:
    store = any_store
    await store.create_session("s")
    await store.append("s", "odd/event", nested_data(MAX_JSON_DEPTH))  # the limit itself
    for depth in (MAX_JSON_DEPTH + 1, DEPTH, 100_000):
        too_deep = nested_data(depth) if depth < 1000 else {"a": deep_list(depth)}
        with pytest.raises(InvalidEventError, match="nests deeper than 64 levels"):
            await store.append("s", "odd/event", too_deep)
        with pytest.raises(InvalidEventError, match="nests deeper than 64 levels"):
            await store.append_batch(
                "s", [NewEvent("odd/event", {"ok": 1}), NewEvent("odd/event", too_deep)]
            )
        with pytest.raises(InvalidEventError, match="nests deeper than 64 levels"):
            message = user_message("hi")
            message["content"].append({"type": "odd-block", "x": too_deep})
            await store.append("s", "user/message", message, surface_op="append")
    assert [e.seq for e in await store.read_events("s")] == [0]


def deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 2):
        value = [value]
    return value


def one_error_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_import_refuses_deep_records_with_one_line(dsh: Run, tmp_path: Path) -> None:
    header = {"type": "session", "id": "deep", "created_at": 1, "cwd": None}
    reference = {"type": "session", "version": 0, "id": "deep", "createdAt": 1}

    def event(data: str) -> str:
        return (
            '{"seq":0,"type":"odd/event","time":2,"data":'
            + data
            + ',"surface_op":null,"source_event_seqs":null}'
        )

    def reference_event(data: str) -> str:
        return '{"type":"odd/event","time":2,"data":' + data + "}"

    cases = {
        "json-65": (header, event(deep_text(MAX_JSON_DEPTH + 1)), "event data nests"),
        "json-500": (header, event(deep_text(DEPTH)), "event data nests"),
        "json-100k": (header, event("[" * 100_000 + "]" * 100_000), "the record nests"),
        "ref-65": (reference, reference_event(deep_text(MAX_JSON_DEPTH + 1)), "event data nests"),
        "ref-100k": (reference, reference_event("[" * 100_000 + "]" * 100_000), "the record nests"),
    }
    for name, (head, line, what) in cases.items():
        log = tmp_path / f"{name}.jsonl"
        log.write_text(json.dumps(head) + "\n" + line + "\n", encoding="utf-8")
        result = dsh("import", str(log))
        assert result.code != 0, name
        assert f"line 2: {what} deeper than 64 levels" in one_error_line(result.err), name
        for mode in (["--text"], ["--svg", str(tmp_path / "out.svg")]):
            replayed = dsh("replay", str(log), *mode, db=tmp_path / "never.sqlite3")
            assert replayed.code != 0 and "deeper than 64 levels" in one_error_line(replayed.err)
    # A record cut short is not called deep for its many unclosed brackets.
    torn = tmp_path / "torn.jsonl"
    wide = "[" + ",".join(["{}"] * 100) + ",[[{"
    torn.write_text(json.dumps(header) + "\n" + event(wide)[:-40] + "\n", encoding="utf-8")
    result = dsh("import", str(torn))
    assert result.code != 0 and "line 2: invalid JSON" in one_error_line(result.err)
    assert dsh("sessions", "--json").json() == []
    # At the limit it imports.
    log = tmp_path / "ok.jsonl"
    log.write_text(json.dumps(header) + "\n" + event(deep_text(MAX_JSON_DEPTH)) + "\n")
    assert dsh("import", str(log)).code == 0


# 980: near what the stock decoder reads; 20,000: twenty times past it (loads_exact then parses on a
# list of its own, and every reader walks the value without recursing)
@pytest.mark.parametrize("depth", [DEPTH, 980, 20_000])
def test_stored_deep_rows_are_shown_elided_and_exported_exactly(
    dsh: Run, dsh_env: Path, tmp_path: Path, depth: int
) -> None:
    odd, message = asyncio.run(seed_deep(dsh_env, "deep", depth))
    shown = dsh("show", "deep")
    assert shown.code == 0, shown.err
    assert "▸ odd/event event" in shown.out and "…" in shown.out
    assert "hello" in shown.out and "later" in shown.out
    assert dsh("show", "deep", "--tail", "1").code == 0
    assert dsh("show", "deep", "--json").code == 0
    assert dsh("search", "later").code == 0
    assert dsh("prepare", "--session", "deep", "hi").code == 0
    markdown = dsh("export", "deep", "--format", "md")
    assert markdown.code == 0 and "later" in markdown.out
    # Exports write the stored data exactly: a backup loses nothing.
    for form in ("json", "reference"):
        exported = dsh("export", "deep", "--format", form)
        assert exported.code == 0, exported.err
        for data in (odd, message):  # both as dumps_js writes them
            assert '"data":' + data + "," in exported.out or '"data":' + data + "}" in exported.out
    # The export is a faithful copy, so importing it back meets the limit: one line.
    log = tmp_path / "deep.jsonl"
    assert dsh("export", "deep", "--format", "json", "-o", str(log)).code == 0
    again = dsh("import", str(log), db=tmp_path / "other.sqlite3")
    what = "event data" if depth <= 980 else "the record"  # the latter too deep to parse
    assert f"line 3: {what} nests deeper than 64 levels" in one_error_line(again.err)


async def test_postgres_rows_written_by_hand_read_back_exactly(
    pg_cluster: Any, tmp_path: Path
) -> None:
    import asyncpg

    from stores import open_store
    from tui.shared.items import event_preview

    with pg_schema_url(pg_cluster, migrated=True) as url:
        store = await open_store(url)
        try:
            await store.create_session("deep")
            await store.append("deep", "odd/event", {"a": 1})
            conn = await asyncpg.connect(url)
            try:
                await conn.execute("UPDATE dsh_events SET data = $1", deep_text(DEPTH))
            finally:
                await conn.close()
            (event,) = await store.read_events("deep")
        finally:
            await store.close()
    assert dumps_js(event.data) == deep_text(DEPTH)
    assert "…" in await asyncio.to_thread(event_preview, event)

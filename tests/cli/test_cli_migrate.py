"""``dsh migrate --to LOCATION [--from LOCATION]``: every session copied losslessly between
SQLite and PostgreSQL (``dsh export --format json`` byte-identical before and after), and
running it again is harmless, finishes an interrupted copy and brings the target up to
date; a session that differs in the target is reported, never overwritten."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.log import NewEvent, Replace, SessionHeader
from stores import open_store
from stores.sharing import os_user
from tests.cli.conftest import Run
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url

ODD = "odd\ud800\x00\u202e id"


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    with pg_schema_url(pg_cluster) as url:
        yield url


async def _seed_odd_session(location: str | Path) -> None:
    async with await open_store(location) as store:
        await store.import_session(
            SessionHeader(ODD, created_at=5, cwd="/tmp/\x1b[31mx\udfff"),
            [
                NewEvent("user/message", {"id": "u", "role": "user", "content": [
                    {"type": "text", "text": "nul\x00 and \ud83d lone <tag>"}
                ], "source": {"kind": "user"}}, "append", None, 1_000),
                NewEvent("assistant/chunk", {"chunk": {"type": "text-delta", "index": 0, "text": "é"}}, None, None, 900),
                NewEvent("assistant/message", {"turn": 0, "step": 0, "message": {
                    "id": "a", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                    "source": {"kind": "model", "provider": "p", "model": "m"}}, "usage": {"x": 1.5}},
                    Replace(0, 0), [0], 1_100),
                NewEvent("session/title", {"title": "Odd \u2028 one", "source": {"kind": "user"}}, None, None, 1_200),
                NewEvent("custom/thing", {"big": 2**62, "neg": -0.0, "f": 1e-7, "keys": {"b": 1, "a": 2}}, None, None, 1_300),
            ],
        )  # fmt: skip


def exports(dsh: Run, location: str | Path, out: Path) -> dict[str, bytes]:
    """``dsh export --format json`` of every session of ``location``, as bytes."""

    async def ids() -> list[str]:
        async with await open_store(location) as store:
            return [h.id for h in await store.list_headers()]

    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, bytes] = {}
    for n, sid in enumerate(asyncio.run(ids())):
        file = out / f"{n}.jsonl"
        done = dsh("export", sid, "--format", "json", "-o", str(file), db=location)
        assert done.code == 0, done.err
        result[sid] = file.read_bytes()
    return result


def test_migrate_sqlite_to_postgres_and_back_is_lossless(
    dsh: Run, dsh_env: Path, pg_url: str, tmp_path: Path
) -> None:
    assert dsh("demo").code == 0
    made = dsh("new", "--cwd", "/w")
    sid = made.out.strip()
    assert dsh("send", sid, "a question to keep").code == 0
    asyncio.run(_seed_odd_session(dsh_env))
    before = exports(dsh, dsh_env, tmp_path / "before")
    assert len(before) >= 8 and ODD in before
    listing = dsh("sessions", "--json").out

    moved = dsh("migrate", "--to", pg_url)
    assert moved.code == 0, moved.err
    total = len(before)
    assert f"[1/{total}] copied: " in moved.err and f"[{total}/{total}] copied: " in moved.err
    assert moved.out.startswith(f"{total} sessions in {dsh_env}: {total} copied, 0 completed")
    assert exports(dsh, pg_url, tmp_path / "on-postgres") == before
    # Same listing; the sessions the OS user owned belong to the role that migrated them.
    moved_rows = json.loads(dsh("sessions", "--json", db=pg_url).out)
    assert {row.pop("owner") for row in moved_rows} == {"dsh"}
    source_rows = json.loads(listing)
    assert {row.pop("owner") for row in source_rows} == {os_user()}
    assert moved_rows == source_rows

    # Again: nothing to do, nothing written.
    again = dsh("migrate", "--to", pg_url)
    assert again.code == 0
    assert f"0 copied, 0 completed, {total} already there, 0 conflicts; 0 events" in again.out

    # More work in the source (a reply, a new session) is brought over by the next run.
    assert dsh("send", sid, "a follow-up").code == 0
    assert dsh("new").code == 0
    later = dsh("migrate", "--from", str(dsh_env), "--to", pg_url)
    assert later.code == 0, later.err
    assert "1 copied, 1 completed" in later.out
    after = exports(dsh, dsh_env, tmp_path / "after")
    assert exports(dsh, pg_url, tmp_path / "on-postgres-2") == after

    # And back from PostgreSQL into a new SQLite file.
    back_db = tmp_path / "back" / "dsh.sqlite3"
    back = dsh("migrate", "--from", pg_url, "--to", str(back_db), db=None)
    assert back.code == 0, back.err
    assert exports(dsh, back_db, tmp_path / "back-exports") == after


def test_an_interrupted_copy_is_finished_by_running_it_again(
    dsh: Run, dsh_env: Path, pg_url: str, tmp_path: Path
) -> None:
    assert dsh("demo").code == 0
    before = exports(dsh, dsh_env, tmp_path / "before")

    async def copy_some() -> None:  # what a copy stopped half-way leaves: whole sessions
        async with await open_store(dsh_env) as source, await open_store(pg_url) as target:
            for header in (await source.list_headers())[:3]:
                events = await source.read_events(header.id)
                await target.import_session(
                    header,
                    [
                        NewEvent(e.type, e.data, e.surface_op, e.source_event_seqs, e.time)
                        for e in events
                    ],
                )

    asyncio.run(copy_some())
    rest = dsh("migrate", "--to", pg_url)
    assert rest.code == 0, rest.err
    assert f"{len(before) - 3} copied, 0 completed, 3 already there" in rest.out
    assert exports(dsh, pg_url, tmp_path / "after") == before


def test_a_session_that_differs_in_the_target_is_left_alone(
    dsh: Run, dsh_env: Path, pg_url: str, tmp_path: Path
) -> None:
    asyncio.run(_seed_odd_session(dsh_env))

    async def clash() -> None:
        async with await open_store(pg_url) as target:
            await target.create_session(ODD, created_at=5, cwd="/elsewhere")

    asyncio.run(clash())
    result = dsh("migrate", "--to", pg_url)
    assert result.code == 1
    assert "CONFLICT (differs in the target; left alone)" in result.err
    assert "0 copied, 0 completed, 0 already there, 1 conflicts" in result.out

    async def target_session() -> tuple[SessionHeader, int]:
        async with await open_store(pg_url) as target:
            return await target.read_header(ODD), len(await target.read_events(ODD))

    assert asyncio.run(target_session()) == (SessionHeader(ODD, 5, "/elsewhere"), 0)


def test_migrate_refuses_a_missing_source_and_the_same_database(
    dsh: Run, dsh_env: Path, tmp_path: Path
) -> None:
    missing = dsh("migrate", "--from", str(tmp_path / "nope.sqlite3"), "--to", str(dsh_env))
    assert missing.code == 1 and "there is no database at" in missing.err
    assert not (tmp_path / "nope.sqlite3").exists()
    assert dsh("new").code == 0
    same = dsh("migrate", "--to", str(dsh_env))
    assert same.code == 1 and "the same database" in same.err

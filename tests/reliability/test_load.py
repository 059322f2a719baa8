"""Load on one SQLite file from several OS processes.

* 8 writer processes × 1,000 appends (half to one shared session, half to their own):
  all 8,000 events present, seqs contiguous per session, each writer's order kept, and no
  "database is locked" (or any other error) reaches a writer.
* ``prepare`` of three large sources while another process keeps appending to them: each
  snapshot is internally consistent — its one ``capturedThroughSeq`` ends a real prefix
  of the log at a batch boundary, and its conversation is exactly the projection of that
  prefix. Each source has ``DSH_LOAD_MESSAGES`` messages (default 20,000 so CI stays fast;
  the issue's figure is ``DSH_LOAD_MESSAGES=200000``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from core.log import Event, NewEvent, SessionHeader, assistant_message, user_message
from core.references import (
    SessionReferenceConfig,
    SessionReferenceInput,
    SessionReferenceService,
    parse_reference_prompt,
    project_surface,
)
from core.surface import fold_surface
from stores import SessionQuery, SqliteSessionStore
from tests.children import expect_line, spawn
from tests.reliability.conftest import LOAD_MESSAGES

WRITERS = 8
PREPARES = 2  # snapshots taken while the appender runs
APPENDS = 1_000

WRITER = """
import asyncio, sys, time
from pathlib import Path
from stores import SqliteSessionStore

async def main(db, name, count, go):
    async with await SqliteSessionStore.open(db) as store:
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.002)
        for i in range(count):
            sid = "shared" if i % 2 == 0 else name
            await store.append(sid, "load/event", {"w": name, "i": i})
    print("done", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""

# Appends exchanges (user + assistant, one batch) and log-only chunks to the sources,
# round-robin, until the stop file appears; prints how many batches it wrote.
APPENDER = """
import asyncio, sys, time
from pathlib import Path
from core.log import NewEvent, assistant_message, user_message
from stores import SqliteSessionStore

async def main(db, sources, go, stop):
    sources = sources.split(",")
    batches = 0
    async with await SqliteSessionStore.open(db) as store:
        print("ready", flush=True)
        while not Path(go).exists():
            await asyncio.sleep(0.002)
        i = 0
        while not Path(stop).exists():
            sid = sources[i % len(sources)]
            await store.append_batch(sid, [
                NewEvent("user/message", user_message(f"live q{i}"), "append"),
                NewEvent("assistant/chunk", {"turn": 0, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}),
                NewEvent("assistant/message", {"turn": 0, "step": 0, "last": True,
                          "message": assistant_message(f"live a{i}", provider="p", model="m")}, "append"),
            ])
            batches += 1
            i += 1
            await asyncio.sleep(0.005)
    print("batches", batches, flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
"""


async def test_eight_writer_processes_thousand_appends_each(tmp_path: Path) -> None:
    db = tmp_path / "load.sqlite3"
    go = tmp_path / "go"
    names = [f"w{n}" for n in range(WRITERS)]
    async with await SqliteSessionStore.open(db) as store:
        for sid in ("shared", *names):
            await store.create_session(sid, created_at=0)
    writers = [spawn(WRITER, db, name, APPENDS, go) for name in names]
    for proc in writers:
        expect_line(proc, "ready")
    started = time.monotonic()
    go.touch()
    errors = []
    for proc in writers:
        out, err = await asyncio.to_thread(proc.communicate, None, 240)
        errors.append(err)
        assert proc.returncode == 0 and out.strip() == "done", err
    elapsed = time.monotonic() - started
    assert not any("locked" in e or "Traceback" in e for e in errors), errors

    async with await SqliteSessionStore.open(db) as store:
        logs = {sid: await store.read_events(sid) for sid in ("shared", *names)}
    found = sum(len(log) for log in logs.values())
    assert found == WRITERS * APPENDS
    for sid, log in logs.items():
        assert [e.seq for e in log] == list(range(len(log))), sid
    assert len(logs["shared"]) == WRITERS * APPENDS // 2
    for name in names:
        assert [e.data["i"] for e in logs[name]] == list(range(1, APPENDS, 2))
        mine = [e.data["i"] for e in logs["shared"] if e.data["w"] == name]
        assert mine == list(range(0, APPENDS, 2))  # every append, in the writer's order
    print(f"\nload: {WRITERS}x{APPENDS} appends, {found} events found, {elapsed:.1f}s")


async def seed_large(store: SqliteSessionStore, sid: str, messages: int) -> None:
    await store.create_session(sid, cwd="/load", created_at=0)
    chunk = 10_000
    for start in range(0, messages, chunk):
        batch: list[NewEvent] = []
        for i in range(start, min(messages, start + chunk), 2):
            batch.append(NewEvent("user/message", user_message(f"{sid} q{i} <tag>"), "append"))
            batch.append(
                NewEvent(
                    "assistant/message",
                    {
                        "turn": i,
                        "step": 0,
                        "last": True,
                        "message": assistant_message(f"{sid} a{i + 1}", provider="p", model="m"),
                    },
                    "append",
                )
            )
        await store.append_batch(sid, batch)


def projection_of_prefix(log: list[Event], through: int) -> list[dict[str, str]]:
    return [
        {"role": p.role, "text": p.text} for p in project_surface(fold_surface(log[: through + 1]))
    ]


async def test_prepare_three_large_sources_while_another_process_appends(
    tmp_path: Path,
) -> None:
    db = tmp_path / "big.sqlite3"
    sources = ["big-a", "big-b", "big-c"]
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("target", created_at=1)
        for sid in sources:
            await seed_large(store, sid, LOAD_MESSAGES)
    go, stop = tmp_path / "go", tmp_path / "stop"
    appender = spawn(APPENDER, db, ",".join(sources), go, stop)
    expect_line(appender, "ready")

    snapshots: list[list[Any]] = []
    timings: list[float] = []
    try:
        async with await SqliteSessionStore.open(db) as store:
            query = SessionQuery(store)
            # A budget big enough to keep everything: the check is then exact.
            service = SessionReferenceService(
                query, SessionReferenceConfig(max_reference_bytes=1 << 30)
            )
            target = SessionHeader("target", 1)
            refs = [SessionReferenceInput(sid, sid) for sid in sources]
            go.touch()
            await asyncio.sleep(0.2)  # the appender is running
            for _ in range(PREPARES):
                began = time.monotonic()
                prepared = await service.prepare(target, "compare", refs)
                timings.append(time.monotonic() - began)
                assert prepared.additional_context is not None
                prompt = prepared.additional_context["content"][0]["text"]
                parsed = parse_reference_prompt(prompt)
                assert parsed is not None
                meta = prepared.additional_context["source"]["references"]
                for obj, entry in zip(parsed, meta, strict=True):
                    assert obj["capturedThroughSeq"] == entry["capturedThroughSeq"]
                    assert entry["omittedMessages"] == 0 and not entry["truncated"]
                snapshots.append(parsed)
    finally:
        stop.touch()
        out, err = await asyncio.to_thread(appender.communicate, None, 120)
    assert appender.returncode == 0, err
    batches = int(out.split()[1])
    assert batches > 0

    async with await SqliteSessionStore.open(db) as store:
        logs = {sid: await store.read_events(sid) for sid in sources}
    for parsed in snapshots:
        for obj in parsed:
            log = logs[obj["sessionId"]]
            through = obj["capturedThroughSeq"]
            assert 0 <= through < len(log)
            # A batch boundary: the captured prefix never ends inside an exchange.
            assert log[through].type == "assistant/message" and log[through].data["last"]
            assert obj["conversation"] == projection_of_prefix(log, through)
    seqs = [[o["capturedThroughSeq"] for o in s] for s in snapshots]
    print(
        f"\nprepare-under-append: {LOAD_MESSAGES} messages x3, {batches} batches appended "
        f"meanwhile, captured seqs {seqs}, prepare took {[f'{t:.2f}s' for t in timings]}"
    )
    assert any(s[0] > LOAD_MESSAGES - 1 for s in seqs), "the appender never got in"

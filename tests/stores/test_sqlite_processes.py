"""SqliteSessionStore across OS processes: concurrent writers, and a writer killed mid-batch."""

from __future__ import annotations

import asyncio
import itertools
import signal
import sqlite3
from pathlib import Path

import pytest

from stores import SqliteSessionStore
from tests.children import expect_line, spawn

# Appends ``count`` events, alternating between the shared session and the writer's own,
# with a two-event batch every tenth step; starts once the go-file exists.
WRITER = """
import asyncio, sys, time
from pathlib import Path
from core.log import NewEvent
from stores import SqliteSessionStore

async def main(db, name, count, go):
    async with await SqliteSessionStore.open(db) as store:
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.005)
        for i in range(count):
            sid = "shared" if i % 2 else name
            if i % 10 == 0:
                await store.append_batch(sid, [
                    NewEvent("user/message", {"w": name, "i": i, "part": 0}, "append"),
                    NewEvent("assistant/chunk", {"w": name, "i": i, "part": 1}),
                ])
            else:
                await store.append(sid, "turn/start", {"w": name, "i": i})

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""

# Opens the store, reports, then appends one big batch and reports how long it took.
BIG_BATCH = """
import asyncio, sys, time
from core.log import NewEvent
from stores import SqliteSessionStore

async def main(db, sid, size):
    async with await SqliteSessionStore.open(db) as store:
        batch = [NewEvent("assistant/chunk", {"i": i, "pad": "x" * 200}) for i in range(size)]
        print("ready", flush=True)
        began = time.monotonic()
        await store.append_batch(sid, batch)
        print(f"done {time.monotonic() - began:.6f}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_two_processes_append_concurrently(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    go = tmp_path / "go"
    count = 300
    async with await SqliteSessionStore.open(db) as store:
        for sid in ("shared", "w0", "w1"):
            await store.create_session(sid, created_at=0)
    writers = [spawn(WRITER, db, f"w{n}", count, go) for n in range(2)]
    for proc in writers:
        expect_line(proc, "ready")
    go.touch()
    for proc in writers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    per_writer = {i: 2 if i % 10 == 0 else 1 for i in range(count)}
    async with await SqliteSessionStore.open(db) as store:
        total = 0
        for sid in ("shared", "w0", "w1"):
            log = await store.read_events(sid)
            assert [e.seq for e in log] == list(range(len(log)))
            total += len(log)
            if sid != "shared":
                assert {e.data["w"] for e in log} == {sid}
        assert total == 2 * sum(per_writer.values())
        shared = await store.read_events("shared")
        for name in ("w0", "w1"):
            mine = [e.data["i"] for e in shared if e.data["w"] == name]
            expected = [i for i in range(count) if i % 2 for _ in range(per_writer[i])]
            assert mine == expected  # every append, in each writer's own order
            # A batch stays contiguous even while the other writer is appending.
        for a, b in itertools.pairwise(shared):
            if a.data.get("part") == 0:
                assert (b.data["w"], b.data["i"], b.data["part"]) == (a.data["w"], a.data["i"], 1)


@pytest.mark.slow
async def test_writer_killed_mid_batch_leaves_all_or_nothing(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    size = 20_000
    sessions = [f"k{i}" for i in range(9)]
    async with await SqliteSessionStore.open(db) as store:
        for sid in sessions:
            await store.create_session(sid, created_at=0)
            await store.append(sid, "turn/start", {})

    # Calibrate: one uninterrupted run tells how long the batch takes here.
    proc = spawn(BIG_BATCH, db, sessions[0], size)
    expect_line(proc, "ready")
    duration = float(expect_line(proc, "done").split()[1])
    proc.communicate(timeout=60)  # also closes its pipes
    assert proc.returncode == 0

    # Then kill at spread-out points of the same work (before, during and around commit).
    outcomes: list[int | None] = []
    for sid, fraction in zip(
        sessions[1:], (0.0, 0.2, 0.4, 0.6, 0.75, 0.85, 0.95, 1.05), strict=True
    ):
        proc = spawn(BIG_BATCH, db, sid, size)
        expect_line(proc, "ready")
        await asyncio.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        outcomes.append(proc.returncode)

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    async with await SqliteSessionStore.open(db) as store:
        for sid in sessions:
            log = await store.read_events(sid)
            assert len(log) in (1, 1 + size), (sid, len(log))
            assert [e.seq for e in log] == list(range(len(log)))
            if len(log) > 1:
                assert [e.data["i"] for e in log[1:]] == list(range(size))
            # The database stays writable and seqs continue without a gap.
            assert (await store.append(sid, "turn/end", {})).seq == len(log)
        assert len(await store.read_events(sessions[0])) == size + 2
    assert -signal.SIGKILL in outcomes  # at least one child really died mid-way


async def test_store_in_a_second_process_sees_committed_data(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("s", created_at=0)
        await store.append("s", "x", {"v": "\ud800"})
        reader = (
            "import asyncio, sys\n"
            "from stores import SqliteSessionStore\n"
            "async def main():\n"
            "    async with await SqliteSessionStore.open(sys.argv[1], read_only=True) as s:\n"
            "        print(ascii((await s.read_events('s'))[0].data['v']))\n"
            "asyncio.run(main())\n"
        )
        proc = await asyncio.to_thread(spawn, reader, db)
        out, err = await asyncio.to_thread(proc.communicate, None, 60)
        assert proc.returncode == 0, err
        assert out.strip() == "'\\ud800'"

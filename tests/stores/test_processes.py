"""Durable stores (SQLite, PostgreSQL) shared by many OS processes: 8 writers x 1,000
appends, a client killed mid-batch, and one reply lease per session across processes."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from stores import open_store
from tests.children import expect_line, spawn

WRITERS = 8
APPENDS = 1_000

# Each writer makes ``count`` appends, alternating between the shared session and its own;
# every tenth is a three-event batch. It starts once the go-file exists.
WRITER = """
import asyncio, sys, time
from pathlib import Path
from core.log import NewEvent
from stores import open_store

async def main(where, name, count, go):
    store = await open_store(where)
    try:
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.005)
        for i in range(count):
            sid = "shared" if i % 2 else name
            if i % 10 == 0 or i % 10 == 1:
                await store.append_batch(sid, [
                    NewEvent("user/message", {"w": name, "i": i, "part": 0}, "append"),
                    NewEvent("assistant/chunk", {"w": name, "i": i, "part": 1}),
                    NewEvent("assistant/chunk", {"w": name, "i": i, "part": 2}),
                ])
            else:
                await store.append(sid, "turn/start", {"w": name, "i": i})
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""


def _events_of(i: int) -> int:
    return 3 if i % 10 in (0, 1) else 1


async def test_eight_processes_append_a_thousand_each(location: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    names = [f"w{n}" for n in range(WRITERS)]
    async with await open_store(location) as store:
        for sid in ("shared", *names):
            await store.create_session(sid, created_at=0)
    writers = [spawn(WRITER, location, name, APPENDS, go) for name in names]
    try:
        for proc in writers:
            await asyncio.to_thread(expect_line, proc, "ready")
        go.touch()
        for proc in writers:
            _, err = await asyncio.to_thread(proc.communicate, None, 300)
            assert proc.returncode == 0, err
    finally:
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    async with await open_store(location) as store:
        shared = await store.read_events("shared")
        assert [e.seq for e in shared] == list(range(len(shared)))
        expected_shared = sum(_events_of(i) for i in range(APPENDS) if i % 2)
        assert len(shared) == WRITERS * expected_shared
        for name in names:
            own = await store.read_events(name)
            assert [e.seq for e in own] == list(range(len(own)))
            assert {e.data["w"] for e in own} == {name}
            assert [e.data["i"] for e in own if e.data.get("part", 0) == 0] == [
                i for i in range(APPENDS) if i % 2 == 0
            ]
            assert len(own) == sum(_events_of(i) for i in range(APPENDS) if i % 2 == 0)
            # Every append of this writer to the shared session, in its own order.
            assert [
                e.data["i"] for e in shared if e.data["w"] == name and e.data.get("part", 0) == 0
            ] == [i for i in range(APPENDS) if i % 2]
        # A batch stays whole and contiguous while seven other writers append.
        for a, b, c in zip(shared, shared[1:], shared[2:], strict=False):
            if a.data.get("part") == 0:
                assert [(e.data["w"], e.data["i"], e.data["part"]) for e in (b, c)] == [
                    (a.data["w"], a.data["i"], 1),
                    (a.data["w"], a.data["i"], 2),
                ]
        titles_ok = await store.append("shared", "turn/end", {})
        assert titles_ok.seq == len(shared)


# Opens the store, reports, then appends one big batch and reports how long it took.
BIG_BATCH = """
import asyncio, sys, time
from core.log import NewEvent
from stores import open_store

async def main(where, sid, size):
    store = await open_store(where)
    batch = [NewEvent("assistant/chunk", {"i": i, "pad": "x" * 200}) for i in range(size)]
    print("ready", flush=True)
    began = time.monotonic()
    await store.append_batch(sid, batch)
    print(f"done {time.monotonic() - began:.6f}", flush=True)
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_a_client_killed_mid_batch_leaves_whole_batches(location: str) -> None:
    size = 10_000
    sessions = [f"k{i}" for i in range(7)]
    async with await open_store(location) as store:
        for sid in sessions:
            await store.create_session(sid, created_at=0)
            await store.append(sid, "turn/start", {})

    # Calibrate: one uninterrupted run tells how long the batch takes here.
    proc = spawn(BIG_BATCH, location, sessions[0], size)
    await asyncio.to_thread(expect_line, proc, "ready")
    duration = float((await asyncio.to_thread(expect_line, proc, "done")).split()[1])
    await asyncio.to_thread(proc.communicate, None, 60)
    assert proc.returncode == 0

    # Then kill at spread-out points of the same work (before, during and around commit).
    outcomes: list[int | None] = []
    for sid, fraction in zip(sessions[1:], (0.0, 0.25, 0.5, 0.75, 0.95, 1.1), strict=True):
        proc = spawn(BIG_BATCH, location, sid, size)
        await asyncio.to_thread(expect_line, proc, "ready")
        await asyncio.sleep(duration * fraction)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.communicate, None, 60)
        outcomes.append(proc.returncode)

    async with await open_store(location) as store:
        for sid in sessions:
            # A killed client's transaction is rolled back by the server (or never
            # committed to the file): each log is the first event plus the whole batch or not.
            async with asyncio.timeout(30):
                log = await store.read_events(sid)
            assert len(log) in (1, 1 + size), (sid, len(log))
            assert [e.seq for e in log] == list(range(len(log)))
            if len(log) > 1:
                assert [e.data["i"] for e in log[1:]] == list(range(size))
            # The store stays writable and seqs continue without a gap (the killed
            # client's row lock, if any, went with its connection).
            async with asyncio.timeout(30):
                assert (await store.append(sid, "turn/end", {})).seq == len(log)
        assert len(await store.read_events(sessions[0])) == size + 2
    assert -signal.SIGKILL in outcomes  # at least one child really died mid-way


# Tries to take the reply lease of "s" once everyone is ready; reports whether it won.
CONTENDER = """
import asyncio, sys, time
from pathlib import Path
from stores import open_store

async def main(where, owner, go):
    store = await open_store(where)
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.002)
    won = await store.take_reply_lease("s", owner, ttl_ms=60_000)
    print("won" if won else "lost", flush=True)
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""


async def test_one_reply_lease_per_session_across_processes(location: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    async with await open_store(location) as store:
        await store.create_session("s", created_at=0)
    # Owners name other hosts: no process can tell they are dead, only expiry frees them.
    owners = [f"host-{n}:{n + 1}:nonce{n}" for n in range(WRITERS)]
    contenders = [spawn(CONTENDER, location, owner, go) for owner in owners]
    try:
        for proc in contenders:
            await asyncio.to_thread(expect_line, proc, "ready")
        go.touch()
        said = [(await asyncio.to_thread(expect_line, proc, "")).strip() for proc in contenders]
        for proc in contenders:
            await asyncio.to_thread(proc.communicate, None, 60)
            assert proc.returncode == 0
    finally:
        for proc in contenders:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert sorted(said) == ["lost"] * (WRITERS - 1) + ["won"]
    winner = owners[said.index("won")]
    async with await open_store(location) as store:
        # The winner's process has exited, but it is on another host: still held.
        assert not await store.take_reply_lease("s", "here:1:x", ttl_ms=1_000)
        assert await store.take_reply_lease("s", winner, ttl_ms=60_000)  # renewal
        await store.release_reply_lease("s", winner)
        assert await store.take_reply_lease("s", "here:1:x", ttl_ms=1_000)

"""Faults across real processes on one SQLite file: a second process writes while ``dsh send``
streams, ``dsh send`` is SIGKILLed mid-reply, the file is read-only or corrupt.

``dsh`` runs as a real process (``python -m tui.cli``) against the local fake
OpenAI-compatible server, so nothing here is mocked.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END, USER_MESSAGE
from stores import SqliteSessionStore
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json
from tests.providers.fake_openai import dsh_env as openai_env

ROOT = Path(__file__).resolve().parents[2]
DSH = [sys.executable, "-m", "tui.cli"]

# Appends to the streaming session and to another one until told to stop (or ``count``),
# alternating single appends and two-event batches; prints how many events it wrote.
APPENDER = """
import asyncio, sys
from pathlib import Path
from core.log import NewEvent, user_message
from stores import SqliteSessionStore

async def main(db, count, go, stop):
    written = {"chat": 0, "other": 0}
    async with await SqliteSessionStore.open(db) as store:
        print("ready", flush=True)
        while not Path(go).exists():
            await asyncio.sleep(0.005)
        for i in range(count):
            if Path(stop).exists():
                break
            sid = "chat" if i % 2 else "other"
            if i % 5 == 0:
                await store.append_batch(sid, [
                    NewEvent("vendor/note", {"i": i, "part": 0}),
                    NewEvent("vendor/note", {"i": i, "part": 1}),
                ])
                written[sid] += 2
            elif sid == "other":
                await store.append(sid, "user/message", user_message(f"other {i}"), surface_op="append")
                written[sid] += 1
            else:
                await store.append(sid, "vendor/note", {"i": i, "part": 0})
                written[sid] += 1
            await asyncio.sleep(0.002)
    print("wrote", written["chat"], written["other"], flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]))
"""


def dsh_env(db: Path, server: FakeOpenAIServer) -> dict[str, str]:
    return {**openai_env(db, server, api_key="sk-reliability"), "PYTHONPATH": str(ROOT)}


async def run_dsh(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *DSH,
        *args,
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start_dsh(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *DSH,
        *args,
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_until(proc: asyncio.subprocess.Process, needle: bytes, limit: float = 30) -> bytes:
    assert proc.stdout is not None
    seen = b""
    while needle not in seen:
        chunk = await asyncio.wait_for(proc.stdout.read(256), limit)
        if not chunk:
            raise AssertionError(f"process ended before {needle!r}; got {seen!r}")
        seen += chunk
    return seen


async def events_of(db: Path, session_id: str) -> list[Any]:
    async with await SqliteSessionStore.open(db) as store:
        return await store.read_events(session_id)


def chmod_all(folder: Path, pattern: str, mode: int) -> None:
    for path in folder.glob(pattern):
        path.chmod(mode)


def assert_contiguous(log: list[Any]) -> None:
    assert [e.seq for e in log] == list(range(len(log)))


def assert_chunks_are_a_prefix(log: list[Any], words: list[str]) -> list[str]:
    """The stored chunks are exactly the first k streamed deltas, in order (no torn batch)."""
    chunks = [e.data["chunk"] for e in log if e.type == ASSISTANT_CHUNK]
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    texts = [c["text"] for c in chunks]
    assert texts == words[: len(texts)]
    return texts


async def test_second_process_writes_while_dsh_send_streams(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    db = tmp_path / "shared.sqlite3"
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("chat", created_at=1)
        await store.create_session("other", created_at=0)
    env = dsh_env(db, fake_openai)
    words = [f"w{i} " for i in range(40)]
    fake_openai.sse([chunk_json(w) for w in words] + [chunk_json("", finish="stop")], pause=0.02)

    go, stop = tmp_path / "go", tmp_path / "stop"
    appender = await asyncio.create_subprocess_exec(
        sys.executable, "-c", APPENDER, str(db), "400", str(go), str(stop),
        env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert appender.stdout is not None
    assert (await asyncio.wait_for(appender.stdout.readline(), 30)).startswith(b"ready")
    sender = await start_dsh(env, "send", "chat", "stream while others write")
    await read_until(sender, b"w0 ")
    go.touch()  # the other process writes while the reply streams
    out, err = await asyncio.wait_for(sender.communicate(), 60)
    stop.touch()
    wrote, appender_err = await asyncio.wait_for(appender.communicate(), 60)
    assert sender.returncode == 0, err.decode()
    assert appender.returncode == 0, appender_err.decode()
    assert (b"w0 " + out).decode().strip() == "".join(words).strip()
    assert b"locked" not in err and b"Traceback" not in err
    _, chat_count, other_count = wrote.decode().split()

    chat = await events_of(db, "chat")
    other = await events_of(db, "other")
    assert_contiguous(chat)
    assert_contiguous(other)
    assert chat[0].type == USER_MESSAGE
    assert assert_chunks_are_a_prefix(chat, words) == words  # every delta stored
    (reply,) = [e for e in chat if e.type == ASSISTANT_MESSAGE]
    assert reply.data["finish"] == "completed"
    assert reply.data["message"]["content"][-1]["text"] == "".join(words)
    notes = [e for e in chat if e.type == "vendor/note"]
    assert len(notes) == int(chat_count) > 0  # every write of the other process is there
    assert len(other) == int(other_count) > 0
    for log in (notes, [e for e in other if e.type == "vendor/note"]):
        order = [(e.data["i"], e.data["part"]) for e in log]
        assert order == sorted(order)  # in the writer's own order, batches intact
    # Chunks interleave with the other writer, but each engine flush is one contiguous batch.
    kinds = [e.type for e in chat]
    assert kinds.index(TURN_END) > kinds.index(ASSISTANT_MESSAGE)


async def test_sigkill_mid_stream_then_restart(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    db = tmp_path / "killed.sqlite3"
    env = dsh_env(db, fake_openai)
    code, out, err = await run_dsh(env, "new")
    assert code == 0, err
    session = out.strip()
    words = [f"k{i} " for i in range(200)]
    fake_openai.sse([chunk_json(w) for w in words], pause=0.01)
    sender = await start_dsh(env, "send", session, "a question that dies")
    seen = await read_until(sender, b"k30 ")  # several chunk batches are flushed by now
    sender.send_signal(signal.SIGKILL)
    rest, _ = await asyncio.wait_for(sender.communicate(), 30)
    assert sender.returncode == -signal.SIGKILL

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    log = await events_of(db, session)
    assert_contiguous(log)
    assert log[0].type == USER_MESSAGE
    assert log[0].data["content"][0]["text"] == "a question that dies"
    stored = assert_chunks_are_a_prefix(log, words)
    assert len(stored) >= 10  # committed batches survived the kill
    assert (seen + rest).decode().startswith("".join(stored))  # nothing unseen was stored
    # Nothing claims to be finished: the reply died with its process.
    assert not [e for e in log if e.type in (ASSISTANT_MESSAGE, TURN_END)]

    # After a restart the session is usable and the log continues without a gap.
    fake_openai.sse([chunk_json("back", finish="stop")])
    code, out, err = await run_dsh(env, "send", session, "are you back?")
    assert code == 0 and out == "back\n", err
    after = await events_of(db, session)
    assert_contiguous(after)
    assert after[: len(log)] == log  # every committed event is still there
    code, shown, err = await run_dsh(env, "show", session)
    assert code == 0 and "a question that dies" in shown and "are you back?" in shown, err


async def test_read_only_database_file_reads_with_a_clear_notice(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    db = tmp_path / "ro.sqlite3"
    env = dsh_env(db, fake_openai)
    code, out, _ = await run_dsh(env, "new")
    session = out.strip()
    fake_openai.sse([chunk_json("stored", finish="stop")])
    assert (await run_dsh(env, "send", session, "keep me"))[0] == 0
    before = [(e.seq, e.type, dict(e.data)) for e in await events_of(db, session)]
    chmod_all(tmp_path, "ro.sqlite3*", stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        code, shown, err = await run_dsh(env, "show", session, "--json")
        assert code == 0, err
        assert [e["data"] for e in json.loads(shown)] == [d for _, _, d in before]
        code, out, err = await run_dsh(env, "send", session, "write this")
        assert code == 1 and "read-only" in err and err.startswith("dsh: error:"), err
        assert "Traceback" not in err and err.count("\n") == 1
        assert len(fake_openai.requests) == 1  # refused before asking the model
    finally:
        chmod_all(tmp_path, "ro.sqlite3*", stat.S_IRUSR | stat.S_IWUSR)
    assert [(e.seq, e.type, dict(e.data)) for e in await events_of(db, session)] == before


async def test_corrupt_database_file_is_one_clear_error(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    db = tmp_path / "corrupt.sqlite3"
    env = dsh_env(db, fake_openai)
    code, out, _ = await run_dsh(env, "new")
    assert code == 0
    async with await SqliteSessionStore.open(db) as store:  # checkpoint the WAL into the file
        await store.append(out.strip(), "vendor/note", {"pad": "x" * 20_000})
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # smash the schema page
    db.write_bytes(bytes(raw))
    for args in (("sessions",), ("send", out.strip(), "hello"), ("show", out.strip())):
        code, _, err = await run_dsh(env, *args)
        assert code == 1, (args, err)
        assert err.startswith("dsh: error:") and err.count("\n") == 1, err
        assert "Traceback" not in err
        assert "corrupt" in err or "not a" in err or "malformed" in err, err

"""Two ``dsh compact`` processes on one session at once: the slower one (its summary held
back by the fake model server) fails with one clear line and leaves nothing in the log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.log import USER_MESSAGE, user_message
from stores import SqliteSessionStore
from tests.providers.fake_openai import (
    DSH,
    FakeOpenAIServer,
    ScriptedResponse,
    chunk_json,
    dsh_env,
    run_dsh,
    sse_data,
)


async def test_the_slower_of_two_dsh_compact_fails_cleanly(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    slow_env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    fast_env = {**slow_env, "DSH_PROVIDER": "offline"}
    session = "raced"
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        await store.create_session(session)
        for text in ("first question", "first answer", "second question", "second answer"):
            await store.append(session, USER_MESSAGE, user_message(text), surface_op="append")
    asked, gate = asyncio.Event(), asyncio.Event()
    fake_openai.add(
        ScriptedResponse(
            headers={"Content-Type": "text/event-stream"},
            body=[sse_data(chunk_json("the slow summary", finish="stop")), sse_data("[DONE]")],
            asked=asked,
            gate=gate,
        )
    )
    slow = await asyncio.create_subprocess_exec(
        *DSH,
        "compact",
        session,
        env=slow_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.wait_for(asked.wait(), 30)  # the slow one read the surface and asked
        code, out, err = await run_dsh(fast_env, "compact", session)
        assert code == 0 and "compacted 4 messages" in out, err
    finally:
        gate.set()
    out_b, err_b = await asyncio.wait_for(slow.communicate(), 60)
    assert slow.returncode == 1, (out_b, err_b)
    assert err_b.decode() == (
        "dsh: error: the session changed while compacting; nothing compacted\n"
    )
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        log = await store.read_events(session)
    types = [e.type for e in log]
    assert [t for t in types if t.startswith("compact/")] == [
        "compact/start",
        "compact/summary",
        "compact/end",
    ]
    assert "the slow summary" not in str([e.data for e in log])

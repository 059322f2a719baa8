"""Two ``dsh compact`` processes on one session at once: while the first one's summary is
held back by the fake model server, the second is refused at once with one clear line (the
reply lease) and stores nothing; the first one then completes."""

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


async def test_a_second_dsh_compact_is_refused_while_the_first_summarises(
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
        assert code == 1 and not out, (out, err)
        assert err == (
            "dsh: error: the session is busy: another process is writing a reply or compacting it\n"
        )
    finally:
        gate.set()
    out_b, err_b = await asyncio.wait_for(slow.communicate(), 60)
    assert slow.returncode == 0, (out_b, err_b)
    assert "compacted 4 messages" in out_b.decode()
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        log = await store.read_events(session)
    types = [e.type for e in log]
    assert [t for t in types if t.startswith("compact/")] == [
        "compact/start",
        "compact/summary",
        "compact/end",
    ]
    assert "the slow summary" in str([e.data for e in log])
    assert "Summary of" not in str([e.data for e in log]), "the refused one stored nothing"

"""``dsh send`` stopped by SIGINT (Ctrl+C), SIGTERM or SIGHUP mid-reply: the user's message
and the partial reply are stored (the reply as interrupted), the session stays usable, and the
process exits 128 + the signal number (a real process against the
local fake OpenAI-compatible server, which stalls after two chunks)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import termios
from pathlib import Path

import pytest

from tests.providers.fake_openai import (
    DSH,
    FakeOpenAIServer,
    Pause,
    chunk_json,
    dsh_env,
    run_dsh,
)

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
async def test_a_stop_signal_mid_reply_stores_the_partial_reply_as_interrupted(
    tmp_path: Path, fake_openai: FakeOpenAIServer, signum: signal.Signals
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    _, session, _ = await run_dsh(env, "new")
    session = session.strip()
    fake_openai.sse([chunk_json("partial "), chunk_json("answer"), Pause(30), chunk_json("never")])
    proc = await asyncio.create_subprocess_exec(
        *DSH,
        "send",
        session,
        "please stream",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = b""
    while b"answer" not in seen:
        chunk = await asyncio.wait_for(proc.stdout.read(64), 30)
        assert chunk, "dsh send ended before the reply streamed"
        seen += chunk
    proc.send_signal(signum)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 128 + signum, err
    assert b"Traceback" not in err
    if signum != signal.SIGINT:  # Ctrl+C is seen on the terminal; the others are said
        assert b"partial reply is kept" in err

    code, out, err_text = await run_dsh(env, "show", session, "--json")
    assert code == 0, err_text
    log = json.loads(out)
    assert log[0]["data"]["content"][0]["text"] == "please stream"
    reply = next(e for e in log if e["type"] == "assistant/message")
    assert reply["data"]["finish"] == "interrupted" and reply["data"]["interrupted"] is True
    assert reply["data"]["message"]["content"][-1]["text"] == "partial answer"
    assert [e["data"]["status"] for e in log if e["type"] == "turn/end"] == ["interrupted"]

    fake_openai.sse([chunk_json("fine", finish="stop")])  # the session stays usable
    code, out, _ = await run_dsh(env, "send", session, "again")
    assert code == 0 and out == "fine\n"


def _controlling_terminal() -> None:  # in the child, before exec: a session of its own
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def test_closing_the_terminal_mid_reply_keeps_the_partial_reply(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    _, session, _ = await run_dsh(env, "new")
    session = session.strip()
    fake_openai.sse([chunk_json("partial "), chunk_json("answer"), Pause(30), chunk_json("never")])
    master, slave = os.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *DSH,
            "send",
            session,
            "please stream",
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            preexec_fn=_controlling_terminal,
        )
    finally:
        os.close(slave)
    seen = b""
    while b"answer" not in seen:
        seen += await asyncio.wait_for(asyncio.to_thread(os.read, master, 1024), 30)
    os.close(master)  # the terminal window closes: the kernel hangs up dsh's session
    assert await asyncio.wait_for(proc.wait(), 30) == 128 + signal.SIGHUP

    code, out, err_text = await run_dsh(env, "show", session, "--json")
    assert code == 0, err_text
    log = json.loads(out)
    reply = next(e for e in log if e["type"] == "assistant/message")
    assert reply["data"]["finish"] == "interrupted"
    assert reply["data"]["message"]["content"][-1]["text"] == "partial answer"

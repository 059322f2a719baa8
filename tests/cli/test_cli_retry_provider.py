"""``dsh retry`` and ``dsh edit`` as real processes against the local fake OpenAI-compatible
server (issue 32): a stop signal keeps the partial new reply, a model that fails leaves the
earlier reply in place, and each failure says in one line how to go on."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.providers.fake_openai import (
    DSH,
    FakeOpenAIServer,
    Pause,
    chunk_json,
    dsh_env,
    new_session,
    read_log,
    run_dsh,
)

pytestmark = pytest.mark.timeout(90)


def surface_replies(log: list[dict[str, Any]]) -> list[str]:
    """The text of every assistant message still on the surface (no later replace lists it)."""
    shadowed = {seq for e in log for seq in (e.get("source_event_seqs") or [])}
    return [
        e["data"]["message"]["content"][-1]["text"]
        for e in log
        if e["type"] == "assistant/message" and e["seq"] not in shadowed
    ]


async def answered(env: dict[str, str], server: FakeOpenAIServer) -> str:
    session = await new_session(env)
    server.sse([chunk_json("first answer", finish="stop")])
    code, out, err = await run_dsh(env, "send", session, "a question")
    assert (code, out) == (0, "first answer\n"), err
    return session


async def test_a_stop_signal_mid_retry_keeps_the_partial_new_reply(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    session = await answered(env, fake_openai)
    fake_openai.sse([chunk_json("second "), chunk_json("try"), Pause(30), chunk_json("never")])
    proc = await asyncio.create_subprocess_exec(
        *DSH,
        "retry",
        session,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = b""
    while b"try" not in seen:
        chunk = await asyncio.wait_for(proc.stdout.read(64), 30)
        assert chunk, "dsh retry ended before the reply streamed"
        seen += chunk
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert b"partial reply is kept" in err and b"Traceback" not in err
    log = await read_log(env, session)
    assert surface_replies(log) == ["second try"]
    replies = [e for e in log if e["type"] == "assistant/message"]
    assert [r["data"]["finish"] for r in replies] == ["completed", "interrupted"]
    assert replies[1]["source_event_seqs"] == [replies[0]["seq"]]
    # the model saw the conversation without the reply it replaces
    assert [m["role"] for m in fake_openai.requests[-1].json["messages"]] == ["system", "user"]


async def test_a_model_failing_on_retry_leaves_the_earlier_reply(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    session = await answered(env, fake_openai)
    fake_openai.error(401, "Authentication Fails")
    code, out, err = await run_dsh(env, "retry", session)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("dsh: error: the model failed: ")
    assert err.endswith(f"(the earlier reply stays; `dsh retry {session}` asks again)\n")
    log = await read_log(env, session)
    assert surface_replies(log) == ["first answer"]
    assert len([e for e in log if e["type"] == "assistant/message"]) == 1
    fake_openai.sse([chunk_json("better", finish="stop")])
    code, out, err = await run_dsh(env, "retry", session)
    assert (code, out) == (0, "better\n"), err
    assert surface_replies(await read_log(env, session)) == ["better"]


async def test_a_model_failing_after_an_edit_keeps_the_edited_message(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    session = await answered(env, fake_openai)
    fake_openai.error(401, "Authentication Fails")
    code, out, err = await run_dsh(env, "edit", session, "0", "-", stdin=b"a better question")
    assert (code, out) == (1, "")
    assert err.endswith(f"(your message is saved; `dsh reply {session}` asks again)\n")
    log = await read_log(env, session)
    assert surface_replies(log) == []  # the edit took the reply off with the old message
    fake_openai.sse([chunk_json("answered", finish="stop")])
    code, out, err = await run_dsh(env, "reply", session)
    assert (code, out) == (0, "answered\n"), err
    request = json.loads(fake_openai.requests[-1].body)
    assert request["messages"][-1] == {"role": "user", "content": "a better question"}

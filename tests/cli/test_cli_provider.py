"""``dsh send`` as a real process against a local fake OpenAI-compatible server.

Proves the user's message and the partial reply survive a connection dropped mid-stream,
and that the real provider streams into the log (stop signals: ``test_cli_signals.py``).
"""

from __future__ import annotations

from pathlib import Path

from tests.providers.fake_openai import (
    Drop,
    FakeOpenAIServer,
    chunk_json,
    dsh_env,
    read_log,
    run_dsh,
)


def _env(db: Path, server: FakeOpenAIServer) -> dict[str, str]:
    return dsh_env(db, server, api_key="sk-e2e")


async def test_streamed_reply_reaches_the_log(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(tmp_path / "db.sqlite3", fake_openai)
    _, session, _ = await run_dsh(env, "new")
    session = session.strip()
    fake_openai.sse(
        [chunk_json(reasoning="hmm"), chunk_json("Hello "), chunk_json("world", finish="stop")]
    )
    code, out, err = await run_dsh(env, "send", session, "hi there")
    assert code == 0, err
    assert out == "Hello world\n"
    body = fake_openai.requests[0].json
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["messages"][-1] == {"role": "user", "content": "hi there"}
    log = await read_log(env, session)
    reply = next(e for e in log if e["type"] == "assistant/message")
    message = reply["data"]["message"]  # type: ignore[index]
    assert message["content"] == [
        {"type": "reasoning", "text": "hmm"},
        {"type": "text", "text": "Hello world"},
    ]
    assert message["source"] == {"kind": "model", "provider": "openai", "model": "fake-model"}


async def test_dropped_connection_keeps_partial_reply(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(tmp_path / "db.sqlite3", fake_openai)
    _, session, _ = await run_dsh(env, "new")
    session = session.strip()
    fake_openai.sse([chunk_json("half an "), chunk_json("answer"), Drop()], done=False)
    code, out, err = await run_dsh(env, "send", session, "go")
    assert code == 1 and "the model failed" in err and "Traceback" not in err
    assert out == "half an answer\n"
    log = await read_log(env, session)
    reply = next(e for e in log if e["type"] == "assistant/message")
    assert reply["data"]["finish"] == "error"  # type: ignore[index]
    assert reply["data"]["message"]["content"][-1]["text"] == "half an answer"  # type: ignore[index]


async def test_auth_failure_is_one_clear_line(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(tmp_path / "db.sqlite3", fake_openai)
    _, session, _ = await run_dsh(env, "new")
    fake_openai.error(401, "Authentication Fails (sk-e2e is invalid)")
    code, _out, err = await run_dsh(env, "send", session.strip(), "hello")
    assert code == 1 and err.count("\n") == 1
    assert "sk-e2e" not in err and "rejected" in err.lower()

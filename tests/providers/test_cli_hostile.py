"""``dsh send`` as a real process against hostile or misconfigured model servers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.fake_openai import (
    BodyPart,
    FakeOpenAIServer,
    Pause,
    ScriptedResponse,
    chunk_json,
    dsh_env,
    new_session,
    read_log,
    run_dsh,
    sse_data,
)

KEY = "sk-cli-hostile-9876"


async def test_key_with_control_character_is_one_config_line(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=f"{KEY}\x07tail")
    code, out, err = await run_dsh(env, "send", "anything", "hello")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("dsh: error: DEEPSEEK_API_KEY ")
    assert "Traceback" not in err and KEY not in err and "tail" not in err
    assert fake_openai.requests == []


async def test_key_with_trailing_crlf_works(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=f"{KEY}\r\n")
    session = await new_session(env)
    fake_openai.sse([chunk_json("fine", finish="stop")])
    code, out, err = await run_dsh(env, "send", session, "hello")
    assert (code, out) == (0, "fine\n"), err
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_rate_limit_wait_is_announced_on_stderr(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=KEY)
    session = await new_session(env)
    fake_openai.error(429, "slow down", headers={"Retry-After": "0.5"})
    fake_openai.sse([chunk_json("fine", finish="stop")])
    code, out, err = await run_dsh(env, "send", session, "hello")
    assert (code, out) == (0, "fine\n"), err
    [line] = err.splitlines()
    assert line.startswith("dsh: waiting 0.5 s before retrying: rate limited by 127.0.0.1:")
    assert "HTTP 429" in line


def slowloris() -> Iterator[BodyPart]:
    yield sse_data(chunk_json("partial"))
    for byte in itertools.cycle(b": .\n"):
        yield bytes([byte])
        yield Pause(0.1)


async def test_slowloris_ends_at_dsh_reply_timeout_and_keeps_the_partial_reply(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=KEY)
    env["DSH_REPLY_TIMEOUT"] = "1.5"
    session = await new_session(env)
    fake_openai.add(
        ScriptedResponse(headers={"Content-Type": "text/event-stream"}, body=slowloris())
    )
    code, out, err = await run_dsh(env, "send", session, "hello")
    assert code == 1 and out == "partial\n"
    assert "reply_timeout" in err and "Traceback" not in err
    reply = [e for e in await read_log(env, session) if e["type"] == "assistant/message"][-1]
    assert reply["data"]["finish"] == "error"
    assert reply["data"]["message"]["content"][-1]["text"] == "partial"


async def test_endless_content_ends_at_dsh_max_reply_bytes(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=KEY)
    env["DSH_MAX_REPLY_BYTES"] = "5000"
    session = await new_session(env)
    endless = (sse_data(chunk_json("y" * 100)) for _ in itertools.count())
    fake_openai.add(ScriptedResponse(headers={"Content-Type": "text/event-stream"}, body=endless))
    code, out, err = await run_dsh(env, "send", session, "hello")
    assert code == 1 and "max_reply_bytes (5000 bytes)" in err
    assert 0 < len(out.strip()) <= 5000
    chunks = [e for e in await read_log(env, session) if e["type"] == "assistant/chunk"]
    assert 0 < len(chunks) <= 50


@pytest.mark.parametrize("stdin_encoding", ["utf-8:surrogateescape", "utf-8:strict"])
async def test_invalid_utf8_on_stdin_is_sent_and_kept(
    tmp_path: Path, fake_openai: FakeOpenAIServer, stdin_encoding: str
) -> None:
    """Whatever the locale makes of standard input, the bytes are kept (a strict UTF-8
    locale used to end in a UnicodeDecodeError traceback)."""
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai, api_key=KEY)
    env["PYTHONIOENCODING"] = stdin_encoding
    session = await new_session(env)
    fake_openai.sse([chunk_json("got it", finish="stop")])
    code, out, err = await run_dsh(env, "send", session, "-", stdin=b"caf\xe9")
    assert (code, out) == (0, "got it\n"), err
    sent = fake_openai.requests[0]
    sent.body.decode("utf-8")
    assert sent.json["messages"][-1]["content"] == "caf\ufffd"
    first = (await read_log(env, session))[0]
    assert first["data"]["content"][0]["text"] == "caf\udce9"

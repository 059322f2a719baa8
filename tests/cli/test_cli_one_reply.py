"""Two ``dsh send`` processes on one session: while the first streams its reply (the fake
model holds it mid-stream), the second is refused with one line and stores nothing; the
turns stay unique and each turn's fragments come from one reply."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.fake_openai import (
    DSH,
    BodyPart,
    FakeOpenAIServer,
    Pause,
    ScriptedResponse,
    chunk_json,
    dsh_env,
    run_dsh,
    sse_data,
)

pytestmark = pytest.mark.timeout(90)

BUSY = "dsh: error: the session is busy: another process is writing a reply or compacting it\n"


def _held_reply(release: asyncio.Event) -> Iterator[BodyPart]:
    """``one`` at once, ``two`` only after ``release`` (looked at every 50 ms)."""
    yield sse_data(chunk_json("one"))
    while not release.is_set():
        yield Pause(0.05)
    yield sse_data(chunk_json(" two"))
    yield sse_data("[DONE]")


async def test_a_second_send_is_refused_while_a_reply_streams(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = dsh_env(tmp_path / "db.sqlite3", fake_openai)
    code, session, err = await run_dsh(env, "new")
    assert code == 0, err
    session = session.strip()
    release = asyncio.Event()
    fake_openai.add(
        ScriptedResponse(headers={"Content-Type": "text/event-stream"}, body=_held_reply(release))
    )
    fake_openai.sse([chunk_json("second answer")])  # only reached by a send that got through
    first = await asyncio.create_subprocess_exec(
        *DSH,
        "send",
        session,
        "first question",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert first.stdout is not None
        seen = b""
        while b"one" not in seen:
            chunk = await asyncio.wait_for(first.stdout.read(64), 30)
            assert chunk, "the first dsh send ended before its reply streamed"
            seen += chunk

        code, out, err = await run_dsh(env, "send", session, "second question")
        assert (code, out, err) == (1, "", BUSY)
    finally:
        release.set()
        rest, first_err = await asyncio.wait_for(first.communicate(), 30)
    assert first.returncode == 0, first_err
    assert (seen + rest).decode().startswith("one two")

    code, out, err = await run_dsh(env, "send", session, "second question")  # now it may
    assert code == 0, err
    assert out.startswith("second answer")

    code, out, err = await run_dsh(env, "show", session, "--json")
    assert code == 0, err
    log = json.loads(out)
    asked = [e["data"]["content"][0]["text"] for e in log if e["type"] == "user/message"]
    assert asked == ["first question", "second question"]
    turns = [e["data"]["turn"] for e in log if e["type"] == "turn/end"]
    assert turns == [1, 2]
    fragments = {
        turn: "".join(
            e["data"]["chunk"]["text"]
            for e in log
            if e["type"] == "assistant/chunk" and e["data"]["turn"] == turn
        )
        for turn in turns
    }
    assert fragments == {1: "one two", 2: "second answer"}

"""``dsh`` as a real process on a disk that fills up: it says what was stored, ``dsh reply``
answers the message once instead of sending it again, and a completely full disk can
still be read (``show``, ``sessions``, ``export``)."""

from __future__ import annotations

import json
from pathlib import Path

from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END, USER_MESSAGE
from tests.fulldisk import SmallDisk, small_disk, tmpfs_mounts
from tests.providers.fake_openai import (
    FakeOpenAIServer,
    Pause,
    chunk_json,
    dsh_env,
    new_session,
    read_log,
    run_dsh,
)

__all__ = ["small_disk", "tmpfs_mounts"]


def _env(db: Path, server: FakeOpenAIServer, config: Path) -> dict[str, str]:
    return {**dsh_env(db, server, api_key="sk-disk"), "XDG_CONFIG_HOME": str(config)}


def _texts(log: list[dict[str, object]], type_: str) -> list[str]:
    out = []
    for event in log:
        if event["type"] == type_:
            data = event["data"]
            assert isinstance(data, dict)
            message = data if type_ == USER_MESSAGE else data["message"]
            out.append("".join(block["text"] for block in message["content"]))
    return out


def _turns(log: list[dict[str, object]], type_: str) -> list[int]:
    return [e["data"]["turn"] for e in log if e["type"] == type_]  # type: ignore[index]


async def test_a_disk_full_mid_reply_says_what_was_stored_and_reply_answers_once(
    tmp_path: Path, small_disk: SmallDisk, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(small_disk.root / "dsh.sqlite3", fake_openai, tmp_path / "config")
    session = await new_session(env)
    small_disk.fill(leave=160 * 1024)  # room for the message, not for a 1.2 MB reply
    # The first words are stored on their own (the chunk timer fires in the pause); the
    # rest does not fit.
    fake_openai.sse(
        [chunk_json("first words "), Pause(0.3), *(chunk_json("x" * 2048) for _ in range(600))]
    )
    code, _, err = await run_dsh(env, "send", session, "please answer")
    assert code == 1
    assert "your message is saved (#0); the reply could not be stored: the disk is full" in err
    assert f"free some space, then run `dsh reply {session}`" in err
    assert "Traceback" not in err and "model client" not in err

    small_disk.free()
    fake_openai.sse([chunk_json("Hello "), chunk_json("there", finish="stop")])
    code, out, err = await run_dsh(env, "reply", session)
    assert (code, out) == (0, "Hello there\n"), err
    # The model was asked exactly the same conversation again: the message, once.
    assert fake_openai.requests[1].json["messages"] == fake_openai.requests[0].json["messages"]

    code, _, err = await run_dsh(env, "reply", session)
    assert code == 1
    assert "nothing to answer: the last message already has a reply" in err

    log = await read_log(env, session)
    assert _texts(log, USER_MESSAGE) == ["please answer"]
    assert _texts(log, ASSISTANT_MESSAGE) == ["Hello there"]
    # The failed turn's orphaned chunks keep turn 1; the answer is turn 2.
    assert set(_turns(log, ASSISTANT_CHUNK)) == {1, 2}
    assert _turns(log, ASSISTANT_MESSAGE) == [2] and _turns(log, TURN_END) == [2]


async def test_a_completely_full_disk_can_still_be_read(
    tmp_path: Path, small_disk: SmallDisk, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(small_disk.root / "dsh.sqlite3", fake_openai, tmp_path / "config")
    session = await new_session(env)
    fake_openai.sse([chunk_json("Kept answer", finish="stop")])
    code, _, err = await run_dsh(env, "send", session, "kept question")
    assert code == 0, err
    small_disk.fill()
    assert small_disk.free_bytes() == 0

    code, out, err = await run_dsh(env, "show", session)
    assert code == 0, err
    assert "kept question" in out and "Kept answer" in out
    assert "the disk is full" in err  # a note: opened read-only, and why
    code, out, err = await run_dsh(env, "sessions", "--json")
    assert code == 0, err
    assert [row["id"] for row in json.loads(out)] == [session]
    code, out, err = await run_dsh(env, "export", session)
    assert code == 0, err
    assert "kept question" in out and "Kept answer" in out

    code, _, err = await run_dsh(env, "send", session, "one more")
    assert code == 1
    assert "nothing was sent or stored" in err and "the disk is full" in err
    assert "Traceback" not in err

    small_disk.free()
    log = await read_log(env, session)
    assert _texts(log, USER_MESSAGE) == ["kept question"]
    assert len(fake_openai.requests) == 1


async def test_reply_answers_a_message_whose_reply_failed_before_any_word(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    env = _env(tmp_path / "dsh.sqlite3", fake_openai, tmp_path / "config")
    session = await new_session(env)
    code, _, err = await run_dsh(env, "reply", session)
    assert code == 1 and "nothing to answer: the session has no messages" in err

    fake_openai.error(400, "the request was refused")  # not retried
    code, _, err = await run_dsh(env, "send", session, "are you there?")
    assert code == 1 and "the request was refused" in err
    assert f"(your message is saved; `dsh reply {session}` asks again)" in err
    fake_openai.sse([chunk_json("Yes.", finish="stop")])
    code, out, err = await run_dsh(env, "reply", session)
    assert (code, out) == (0, "Yes.\n"), err
    log = await read_log(env, session)
    assert _texts(log, USER_MESSAGE) == ["are you there?"]
    assert _texts(log, ASSISTANT_MESSAGE) == ["Yes."]
    assert _turns(log, TURN_END) == [1, 2]

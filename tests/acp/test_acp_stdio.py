"""``dsh acp`` on raw pipes: stdout carries JSON-RPC lines only, and EOF ends the process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.log import message_text
from tests.acp.harness import dsh_command
from tests.acp.seed import read_log, seed_session

pytestmark = pytest.mark.timeout(60)


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


def _run_acp(tmp_path: Path, env: dict[str, str] | None = None, **how: Any) -> Any:
    """``dsh acp`` on a fresh database, run to its end (``how``: its stdin and outputs)."""
    return subprocess.run(
        [*dsh_command(), "--db", str(tmp_path / "db.sqlite3"), "acp"],
        env=env or _env(tmp_path),
        timeout=45,
        check=False,
        **how,
    )


async def test_stdout_is_protocol_only_and_eof_exits_cleanly(tmp_path: Path) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": "/p", "mcpServers": []},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {}},
    ]
    process = await asyncio.create_subprocess_exec(
        *dsh_command(),
        "--db",
        str(tmp_path / "db.sqlite3"),
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(tmp_path),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
    await process.stdin.drain()

    messages: list[dict[str, Any]] = []

    def seen_all() -> bool:
        ids = {m.get("id") for m in messages}
        updates = [m for m in messages if m.get("method") == "session/update"]
        return {0, 1, 2} <= ids and bool(updates)

    while not seen_all():
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line, "the agent closed stdout early"
        messages.append(json.loads(line))  # every line is one JSON-RPC message
    process.stdin.close()
    rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    messages += [json.loads(line) for line in rest.decode().splitlines()]

    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    responses = {m["id"]: m for m in messages if "id" in m}
    assert responses[0]["result"]["protocolVersion"] == 1
    assert responses[0]["result"]["agentInfo"]["name"] == "dsh"
    assert responses[1]["result"]["sessionId"]
    assert responses[2]["error"]["code"] == -32601
    assert responses[2]["error"]["data"]["details"] == "Method not found: no/such"
    # The commands are announced once the client knows the new session's id.
    announce = next(
        i
        for i, m in enumerate(messages)
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    )
    assert messages.index(responses[1]) < announce
    assert messages[announce]["params"]["sessionId"] == responses[1]["result"]["sessionId"]


def test_requests_piped_from_a_file_are_all_answered_before_exit(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        json.dumps(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        done = _run_acp(tmp_path, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr.decode()
    answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["id"] for a in answers] == [0, 1]
    assert answers[1]["result"] == {"sessions": []}


def test_stdin_from_dev_null_is_an_empty_input_not_a_hang(tmp_path: Path) -> None:
    """/dev/null cannot be watched by the event loop (epoll says EPERM): it is read in a
    thread like a regular file, so the agent sees the end of input at once and exits 0."""
    with open(os.devnull, "rb") as stdin:
        done = _run_acp(tmp_path, stdin=stdin, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""
    assert "Traceback" not in done.stderr.decode()


def test_a_closed_stdin_is_an_empty_input(tmp_path: Path) -> None:
    done = _run_acp(tmp_path, capture_output=True, preexec_fn=lambda: os.close(0))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"" and "Traceback" not in done.stderr.decode()


def test_a_bad_offline_delay_is_a_one_line_error(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "DSH_OFFLINE_DELAY": "soon"}
    done = _run_acp(tmp_path, env, input=b"", capture_output=True)
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().strip() == (
        "dsh: error: environment: DSH_OFFLINE_DELAY must be a number of seconds (0–60)"
    )


STRAY_OUTPUT = """
import os, sys
from tui.acp.agent import DshAcpAgent
original = DshAcpAgent.initialize
async def noisy(self, *args, **kwargs):
    print("stray print")
    os.write(1, b"stray write to fd 1\\n")
    return await original(self, *args, **kwargs)
DshAcpAgent.initialize = noisy
from tui.cli.commands import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_stray_output_goes_to_stderr_not_into_the_protocol(tmp_path: Path) -> None:
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [sys.executable, "-c", STRAY_OUTPUT, "--db", str(tmp_path / "db.sqlite3"), "acp"],
        input=(json.dumps(request) + "\n").encode(),
        capture_output=True,
        env=_env(tmp_path),
        timeout=45,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert [json.loads(line)["id"] for line in done.stdout.decode().splitlines()] == [0]
    assert "stray print" in done.stderr.decode()
    assert "stray write to fd 1" in done.stderr.decode()


# --------------------------------------------------------------------------- raw lines


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


INITIALIZE = _request(0, "initialize", {"protocolVersion": 1})


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


async def _spawn(tmp_path: Path, db: Path, env: dict[str, str] | None = None) -> Any:
    return await asyncio.create_subprocess_exec(
        *dsh_command(),
        "--db",
        str(db),
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**_env(tmp_path), **(env or {})},
    )


async def _read_until(
    process: Any, messages: list[dict[str, Any]], done: Any, seconds: float = 30
) -> None:
    while not done():
        line = await asyncio.wait_for(process.stdout.readline(), seconds)
        assert line, "the agent closed stdout early: " + (await process.stderr.read()).decode()
        messages.append(json.loads(line))


async def test_lines_that_are_not_objects_are_invalid_requests_and_reading_goes_on(
    tmp_path: Path,
) -> None:
    process = await _spawn(tmp_path, tmp_path / "db.sqlite3")
    bad = ["[]", "42", '"x"', "true", "null", json.dumps([INITIALIZE]), '{"id": [1], "x": 1}']
    lines = [json.dumps(INITIALIZE), *bad, "{not json", json.dumps(_request(1, "session/list", {}))]
    process.stdin.write("".join(line + "\n" for line in lines).encode())
    await process.stdin.drain()
    messages: list[dict[str, Any]] = []
    await _read_until(process, messages, lambda: any(m.get("id") == 1 for m in messages))
    process.stdin.close()
    rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert rest == b"" and b"Traceback" not in err

    errors = [m for m in messages if "error" in m]
    assert [(m["id"], m["error"]["code"]) for m in errors] == [(None, -32600)] * len(bad) + [
        (None, -32700)
    ]
    for m in errors:  # the human message is in data.details too
        assert m["error"]["data"]["details"].startswith(m["error"]["message"] + ": ")
    assert "batches are not supported" in errors[5]["error"]["data"]["details"]
    answers = {m["id"]: m for m in messages if m.get("id") is not None}
    assert answers[0]["result"]["agentInfo"]["name"] == "dsh"
    assert answers[1]["result"] == {"sessions": []}, "null was not taken as the end of input"


async def test_lines_nested_too_deeply_are_parse_errors_and_reading_goes_on(
    tmp_path: Path,
) -> None:
    process = await _spawn(tmp_path, tmp_path / "db.sqlite3")
    deep_params = _request(2, "session/list", {"cwd": "/p", "x": [[[[[[[[[[]]]]]]]]]]})
    deep_params["params"]["x"] = json.loads("[" * 500 + "]" * 500)
    lines = [
        json.dumps(INITIALIZE),
        "[" * 100_000 + "]" * 100_000,  # deeper than any recursive parser
        "{" * 100_000,  # not JSON, and deep too
        json.dumps(deep_params),  # JSON, deeper than dsh reads
        json.dumps(_request(1, "session/list", {})),
    ]
    process.stdin.write("".join(line + "\n" for line in lines).encode())
    await process.stdin.drain()
    messages: list[dict[str, Any]] = []
    await _read_until(process, messages, lambda: any(m.get("id") == 1 for m in messages))
    process.stdin.close()
    rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert rest == b"" and b"Traceback" not in err and b"RecursionError" not in err

    errors = [m for m in messages if "error" in m]
    assert [(m["id"], m["error"]["code"]) for m in errors] == [(None, -32700)] * 3
    assert [m["error"]["data"]["details"] for m in errors] == [
        "Parse error: the line nests deeper than 64 levels",
        "Parse error: the line is not valid JSON",
        "Parse error: the line nests deeper than 64 levels",
    ]
    answers = {m["id"]: m for m in messages if m.get("id") is not None}
    assert answers[1]["result"] == {"sessions": []}


async def test_piped_requests_finish_their_prompts_after_the_end_of_input(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db.sqlite3"
    sid = await seed_session(db, cwd="/p")
    process = await _spawn(tmp_path, db, {"DSH_OFFLINE_DELAY": "0.02"})
    lines = [
        INITIALIZE,
        _request(1, "session/new", {"cwd": "/q", "mcpServers": []}),
        _request(2, "session/prompt", {"sessionId": sid, "prompt": [text("a piped question")]}),
    ]
    # Everything written, stdin closed at once: the prompt is still running at the end.
    out, err = await asyncio.wait_for(
        process.communicate("".join(json.dumps(r) + "\n" for r in lines).encode()), 60
    )
    assert process.returncode == 0, err.decode()
    messages = [json.loads(line) for line in out.decode().splitlines()]
    answers = {m["id"]: m for m in messages if "id" in m}
    assert answers[2]["result"] == {"stopReason": "end_turn"}
    chunks = [
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert len(chunks) > 3 and "Request: a piped question" in "".join(chunks)
    assert messages.index(answers[2]) > max(
        i for i, m in enumerate(messages) if m.get("method") == "session/update"
    )
    events = await read_log(db, sid)
    reply = next(e for e in events if e.type == "assistant/message")
    assert reply.data["finish"] == "completed"
    assert message_text(reply.data["message"]) == "".join(chunks)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_stop_signal_mid_reply_stores_the_partial_reply_as_interrupted(
    tmp_path: Path, signum: signal.Signals
) -> None:
    db = tmp_path / "db.sqlite3"
    sid = await seed_session(db, cwd="/p")
    process = await _spawn(tmp_path, db, {"DSH_OFFLINE_DELAY": "0.3"})
    prompt = _request(1, "session/prompt", {"sessionId": sid, "prompt": [text("go slowly")]})
    process.stdin.write((json.dumps(INITIALIZE) + "\n" + json.dumps(prompt) + "\n").encode())
    await process.stdin.drain()
    messages: list[dict[str, Any]] = []
    # Mid reply: a chunk of it has arrived (the command announcement that may come first
    # is a notification too; a signal then, before the prompt is read, answers nothing).
    await _read_until(
        process,
        messages,
        lambda: any(
            m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
            for m in messages
        ),
    )
    process.send_signal(signum)  # stdin stays open: the signal alone ends the agent
    rest, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 128 + signum, err.decode()
    assert b"Traceback" not in err
    messages += [json.loads(line) for line in rest.decode().splitlines()]
    answers = {m["id"]: m for m in messages if "id" in m}
    assert answers[1]["result"] == {"stopReason": "cancelled"}
    received = "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert received.startswith("Offline ")

    events = await read_log(db, sid)
    reply = next(e for e in events if e.type == "assistant/message")
    assert reply.data["finish"] == "interrupted" and reply.data["interrupted"] is True
    assert message_text(reply.data["message"]) == received
    assert [e.data["status"] for e in events if e.type == "turn/end"] == ["interrupted"]


async def test_an_idle_agent_stops_on_sigterm_with_stdin_still_open(tmp_path: Path) -> None:
    process = await _spawn(tmp_path, tmp_path / "db.sqlite3")
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    await process.stdin.drain()
    messages: list[dict[str, Any]] = []
    await _read_until(process, messages, lambda: bool(messages))
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    assert b"Traceback" not in err

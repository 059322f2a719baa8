"""``dsh acp`` and issue 30: a ``session/new`` whose cwd is over ``core.limits`` is an
invalid-params error naming it, nothing is stored, and the agent goes on serving; a
``session/list`` skips the rows it cannot read and says so in its log only."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import dsh_command
from tests.acp.seed import seed_session

pytestmark = pytest.mark.timeout(60)

HUGE = 10 * 1024 * 1024


def _serve(
    tmp_path: Path, requests: list[dict[str, Any]], *options: str
) -> subprocess.CompletedProcess[bytes]:
    """``dsh acp`` on ``requests`` (stdin closed after them), to the end."""
    return subprocess.run(
        [*dsh_command(), "--db", str(tmp_path / "db.sqlite3"), "acp", *options],
        input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
        },
        timeout=50,
        check=False,
    )


def test_session_new_with_a_10_mb_cwd_is_refused_and_the_agent_goes_on(tmp_path: Path) -> None:
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": "/" + "d" * HUGE, "mcpServers": []},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": "d" * HUGE, "mcpServers": []},  # not absolute either
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/new",
            "params": {"cwd": "/p", "mcpServers": []},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "session/list", "params": {}},
    ]
    done = _serve(tmp_path, requests)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Traceback" not in done.stderr
    assert len(done.stdout) < 20_000  # no answer echoes the cwd back
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    refused = answers[1]["error"]
    assert refused["code"] == -32602
    words = f"a cwd may hold at most 4,096 UTF-8 bytes (this one has {HUGE + 1:,})"
    assert refused["message"] == words and refused["data"]["details"] == words
    assert answers[2]["error"]["code"] == -32602
    assert "cwd must be an absolute path" in answers[2]["error"]["message"]
    made = answers[3]["result"]["sessionId"]
    assert [s["sessionId"] for s in answers[4]["result"]["sessions"]] == [made]


def test_session_list_skips_a_damaged_title_and_logs_it(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    asyncio.run(seed_session(db, session_id="fine", title="Fine", cwd="/p", created_at=2))
    asyncio.run(seed_session(db, session_id="bad\x1b[2J", title="Was", cwd="/p", created_at=1))
    with sqlite3.connect(db) as raw:  # a row written by hand
        raw.execute(
            "UPDATE events SET data = '{\"title\":5}' WHERE kind = 2 AND session = "
            "(SELECT key FROM sessions WHERE id = ?)",
            (b"bad\x1b[2J",),
        )
    raw.close()
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
    ]
    log = tmp_path / "acp.log"
    done = _serve(tmp_path, requests, "--log", str(log))
    assert done.returncode == 0, done.stderr.decode()
    (listed,) = [m for m in map(json.loads, done.stdout.splitlines()) if m.get("id") == 1]
    sessions = {s["sessionId"]: s.get("title") for s in listed["result"]["sessions"]}
    assert sessions == {"fine": "Fine", "bad\x1b[2J": None}
    told = log.read_text(encoding="utf-8")
    assert (
        "WARNING dsh.acp: the title of session bad\\x1b[2J is damaged and not shown "
        "(its title is not text)" in told
    )
    assert "\x1b" not in told

"""The server unreachable (issue 34, point 2): every ``dsh`` command says so in one line,
exits non-zero, never shows a traceback; a ``dsh send`` whose server restarts mid-reply
ends in one line too, with the text already shown stored."""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.engine import CHUNK_FLUSH_SECONDS
from stores.postgres import PostgresSessionStore
from tests.pgcluster import Cluster
from tests.team.soundness import assert_store_sound

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


WRITE_EVERY_50MS = (
    "import stores.postgres as p; "
    f"p.PostgresSessionStore.chunk_flush_seconds = lambda self: {CHUNK_FLUSH_SECONDS}; "
    "import runpy; runpy.run_module('tui.cli', run_name='__main__')"
)
"""``python -c`` code running ``python -m tui.cli`` with a reply's chunks written every
50 ms (``writes_every_50ms`` in ``conftest``)."""


def _env(tmp_path: Path, url: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        DSH_DB=url,
        **more,
    )
    return env


def _dsh(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, url),
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_every_command_on_a_stopped_server_is_one_line(
    own_cluster: Cluster, url: str, tmp_path: Path
) -> None:
    own_cluster.stop()
    try:
        # (`dsh sessions` on a down server: tests/cli/test_cli_postgres.py)
        commands = [("send", "s", "hello"), ("search", "needle")]
        for args in commands:
            result = _dsh(tmp_path, url, *args)
            assert result.returncode == 1, (args, result.stdout, result.stderr)
            assert "Traceback" not in result.stderr, result.stderr
            lines = result.stderr.splitlines()
            assert len(lines) == 1, (args, result.stderr)
            assert lines[0].startswith("dsh: error: "), lines
            assert "not running or refuses connections" in lines[0], lines
            assert result.stdout == ""
    finally:
        own_cluster.start()

    async def check() -> None:
        store = await PostgresSessionStore.open(url)
        try:
            assert await store.list_headers() == []  # nothing half-made
            await assert_store_sound(store)
        finally:
            await store.close()

    asyncio.run(check())


def test_dsh_send_whose_server_restarts_mid_reply(
    own_cluster: Cluster, url: str, tmp_path: Path
) -> None:
    made = _dsh(tmp_path, url, "new")
    assert made.returncode == 0, made.stderr
    sid = made.stdout.strip()
    long = " ".join(f"word{i}" for i in range(300))
    child = subprocess.Popen(
        # Chunks written every 50 ms, so the restart meets a write (see writes_every_50ms).
        [sys.executable, "-c", WRITE_EVERY_50MS, "send", sid, f"Please repeat: {long}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=0,
        env=_env(tmp_path, url, DSH_OFFLINE_DELAY="0.01"),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        raw = b""
        deadline = time.monotonic() + 30
        while b"word5 " not in raw and time.monotonic() < deadline:  # well into the reply
            if select.select([fd], [], [], 0.1)[0]:
                raw += os.read(fd, 4096)
        own_cluster.restart(down=1.0)  # the child writes every 0.25 s
        out, err = child.communicate(timeout=60)
        shown = raw.decode()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 1, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("dsh: error: ")]
    assert len(errors) == 1, err
    assert "lost mid-reply" in errors[0] and "partial reply are saved" in errors[0], err
    assert all(line.startswith(("dsh: error: ", "dsh: waiting ")) for line in err.splitlines())

    async def check() -> None:
        store = await PostgresSessionStore.open(url)
        try:
            events = await store.read_events(sid)
            [reply] = [e for e in events if e.type == "assistant/message"]
            assert reply.data["finish"] == "error"
            text = reply.data["message"]["content"][0]["text"]
            assert text.startswith("Offline model") and (shown + out).startswith(text)
            await assert_store_sound(store)
        finally:
            await store.close()

    asyncio.run(check())

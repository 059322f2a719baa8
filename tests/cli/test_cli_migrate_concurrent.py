"""Two ``dsh migrate`` processes at once into one target (issue 30): both exit 0, neither
reports a conflict, and every session is there once, byte-identical to the source."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.log import NewEvent, user_message
from stores import migrate, open_store
from tests.acp.harness import dsh_command
from tests.cli.conftest import Run
from tests.cli.test_cli_migrate import exports
from tests.storekinds import DURABLE_KINDS, durable_location

pytestmark = pytest.mark.timeout(300)

SESSIONS = 60
EVENTS = 30


@pytest.fixture(params=DURABLE_KINDS)
def target_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    (tmp_path / "target").mkdir()
    with durable_location(request, tmp_path / "target") as where:
        yield where


async def _seed(source: Path, target_at: str) -> None:
    """The source's sessions; the target holds the first events of every third one."""
    async with await open_store(source) as store, await open_store(target_at) as target:
        for n in range(SESSIONS):
            sid = f"session-{n:03}"
            header = await store.create_session(sid, cwd=f"/w/{n % 4}", created_at=n + 1)
            await store.append_batch(
                sid,
                [
                    NewEvent("user/message", user_message(f"{sid} {k}"), "append")
                    for k in range(EVENTS)
                ],
            )
            if n % 3 == 0:
                events = await store.read_events(sid)
                await target.import_session(
                    replace(header, owner=None),
                    [NewEvent(e.type, e.data, e.surface_op, None, e.time) for e in events[:5]],
                )


def test_two_migrate_processes_at_once(
    dsh: Run, dsh_env: Path, target_at: str, tmp_path: Path
) -> None:
    asyncio.run(_seed(dsh_env, target_at))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    argv = [*dsh_command(), "migrate", "--from", str(dsh_env), "--to", target_at]
    runs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(2)
    ]
    results = [run.communicate(timeout=240) for run in runs]
    for run, (out, err) in zip(runs, results, strict=True):
        assert run.returncode == 0, err.decode()
        assert b"CONFLICT" not in err and b"BUSY" not in err
        assert b" 0 conflicts; " in out
    assert exports(dsh, target_at, tmp_path / "target-exports") == exports(
        dsh, dsh_env, tmp_path / "source-exports"
    )


def test_a_session_busy_in_the_target_is_reported(
    dsh: Run, dsh_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "target.sqlite3"
    sid = dsh("new").out.strip()
    assert dsh("send", sid, "hello").code == 0

    async def hold() -> None:  # a reply running there, on another machine
        async with await open_store(dsh_env) as source, await open_store(target) as there:
            header = replace(await source.read_header(sid), owner=None)
            first = (await source.read_events(sid))[0]
            await there.import_session(
                header, [NewEvent(first.type, first.data, "append", None, first.time)]
            )
            assert await there.take_reply_lease(sid, "elsewhere:1:x", ttl_ms=60_000)

    asyncio.run(hold())
    monkeypatch.setattr(migrate, "LEASE_WAITS_S", (0.01,))
    moved = dsh("migrate", "--to", str(target))
    assert moved.code == 1
    assert f"BUSY (another process holds it in the target; run migrate again): {sid}" in moved.err
    assert "0 copied, 0 completed, 0 already there, 0 conflicts, 1 busy; 0 events" in moved.out

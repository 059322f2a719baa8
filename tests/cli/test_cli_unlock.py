"""``dsh unlock SESSION [--yes]`` (issue 30, point 9), with real ``dsh`` processes: a reply
lease left by a dsh killed in another container (same host name, another PID namespace:
nobody here can tell it died) keeps the session busy until it runs out; the busy error
says how to free it, ``dsh unlock`` says who holds it, asks on a terminal, needs ``--yes``
without one, and is read-only on a session shared with you."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.leases import lease_owner, namespace_identity
from stores import SqliteSessionStore, open_store
from stores.sharing import os_user
from tests.children import expect_line, spawn
from tests.cli.test_cli_postgres import run_dsh
from tests.e2e.pty_screen import PtyScreen
from tests.storekinds import DURABLE_KINDS, durable_location

pytestmark = pytest.mark.timeout(120)

QUESTION = "Break it? Another dsh may still be writing: two replies would interleave. [y/N]"
BUSY = "the session is busy: another process is writing a reply or compacting it"


@pytest.fixture(params=DURABLE_KINDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of each durable kind (a SQLite file, a PostgreSQL schema)."""
    with durable_location(request, tmp_path) as where:
        yield where


def killed_in_a_container() -> str:
    """The holder a ``dsh send`` killed mid-reply in another container of this host name
    left: another PID namespace, and a pid that no process here has."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert namespace_identity() != "0123456789abcdef"
    return f"{socket.gethostname()}:0123456789abcdef:{child.pid}:4f1c2e9a"


def leave_lease(location: str, session: str, holder: str, ttl_ms: int = 30_000) -> None:
    async def take() -> None:
        async with await open_store(location) as store:
            assert await store.take_reply_lease(session, holder, ttl_ms=ttl_ms)

    asyncio.run(take())


def read_holder(location: str, session: str) -> str | None:
    async def read() -> str | None:
        async with await open_store(location) as store:
            lease = await store.read_reply_lease(session)
            return None if lease is None else lease.holder

    return asyncio.run(read())


def dsh(tmp_path: Path, location: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``dsh`` on ``location``, without a terminal (stdin is /dev/null)."""
    return run_dsh(tmp_path, "--db", location, *args)


def test_a_lease_left_in_another_container_blocks_until_unlocked(
    tmp_path: Path, location: str
) -> None:
    session = dsh(tmp_path, location, "new").stdout.strip()
    holder = killed_in_a_container()
    leave_lease(location, session, holder)

    refused = dsh(tmp_path, location, "send", session, "hello?")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (f"dsh: error: {BUSY} (if none is, `dsh unlock {session}` frees it)\n")

    no_terminal = dsh(tmp_path, location, "unlock", session)
    assert no_terminal.returncode == 1
    assert no_terminal.stdout.startswith(
        f"reply lease on {session}: held by {holder}, runs out in "
    )
    assert no_terminal.stderr == (
        "dsh: error: breaking a reply lease needs --yes (there is no terminal to ask on)\n"
    )
    assert read_holder(location, session) == holder  # nothing changed

    unlocked = dsh(tmp_path, location, "unlock", session, "--yes")
    assert unlocked.returncode == 0, unlocked.stderr
    described, done = unlocked.stdout.splitlines()
    assert described.startswith(f"reply lease on {session}: held by {holder}, runs out in ")
    assert described.endswith(" s") and "a process on this machine" not in unlocked.stdout
    assert done == f"unlocked {session}"
    assert read_holder(location, session) is None

    sent = dsh(tmp_path, location, "send", session, "hello?")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip()  # the offline model's answer
    again = dsh(tmp_path, location, "unlock", session)
    assert (again.returncode, again.stdout, again.stderr) == (
        0,
        f"no reply lease on {session}\n",
        "",
    )


def test_a_lease_that_ran_out_and_a_hostile_holder(tmp_path: Path) -> None:
    db = str(tmp_path / "dsh.sqlite3")
    session = dsh(tmp_path, db, "new").stdout.strip()
    leave_lease(db, session, "\x1b[2J\u202eevil\nhost:1:x", ttl_ms=0)
    unlocked = dsh(tmp_path, db, "unlock", session, "--yes")
    assert unlocked.returncode == 0, unlocked.stderr
    assert re.fullmatch(
        re.escape(f"reply lease on {session}: held by \\x1b[2J\\u202eevil\\nhost:1:x, ran out ")
        + r"\d+ s ago: it blocks nothing\n"
        + re.escape(f"unlocked {session}\n"),
        unlocked.stdout,
    ), unlocked.stdout


_WRITER = """
import asyncio, sys, time
from core.leases import lease_owner
from stores import open_store

async def main():
    store = await open_store(sys.argv[1])
    mine = lease_owner()
    assert await store.take_reply_lease(sys.argv[2], mine, ttl_ms=60_000)
    print("holder", mine, flush=True)
    time.sleep(600)

asyncio.run(main())
"""


def test_a_live_writer_on_this_machine_is_named_and_needs_no_hint(tmp_path: Path) -> None:
    db = str(tmp_path / "dsh.sqlite3")
    session = dsh(tmp_path, db, "new").stdout.strip()
    writer = spawn(_WRITER, db, session)
    try:
        holder = expect_line(writer, "holder ").split()[1]
        refused = dsh(tmp_path, db, "send", session, "hello?")
        assert refused.stderr == f"dsh: error: {BUSY}\n"  # someone surely writes: no hint
        shown = dsh(tmp_path, db, "unlock", session)
        assert shown.returncode == 1
        described, writing = shown.stdout.splitlines()
        assert re.fullmatch(
            re.escape(f"reply lease on {session}: held by {holder}, runs out in ") + r"\d+ s",
            described,
        ), described
        assert writing == f"a process on this machine (pid {writer.pid}) is writing it"
        assert read_holder(db, session) == holder
    finally:
        writer.kill()
        writer.communicate()
    # Killed on this machine and in this namespace: its lease frees the session at once.
    sent = dsh(tmp_path, db, "send", session, "hello?")
    assert sent.returncode == 0, sent.stderr


def test_unlock_on_a_terminal_asks_first(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    session = dsh(tmp_path, str(db), "new").stdout.strip()
    holder = killed_in_a_container()
    leave_lease(str(db), session, holder)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DSH_", "TEXTUAL", "PYTEST_"))
        and name not in ("COLUMNS", "LINES", "NO_COLOR")
    }
    env.update(
        TERM="xterm-256color",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONUNBUFFERED="1",
    )
    argv = [sys.executable, "-m", "tui.cli", "--db", str(db), "unlock", session]
    with PtyScreen(argv, env=env, cwd=tmp_path, columns=200, lines=12) as screen:
        screen.wait_for(f"reply lease on {session}: held by {holder}, runs out in ", QUESTION)
        screen.send("n\r")
        assert screen.wait_exit() == 1
        assert "dsh: nothing changed" in screen.text
    assert read_holder(str(db), session) == holder

    # A lease that changed hands while the question waited is not the one shown: kept.
    with PtyScreen(argv, env=env, cwd=tmp_path, columns=200, lines=12) as screen:
        screen.wait_for(QUESTION)
        hand_over(str(db), session, "box:0123456789abcdef:77:new")
        screen.send("y\r")
        assert screen.wait_exit() == 1
        screen.wait_for("the lease changed hands while you answered (now held by")
        assert "box:0123456789abcdef:77:new); nothing changed" in screen.text
    assert read_holder(str(db), session) == "box:0123456789abcdef:77:new"

    with PtyScreen(argv, env=env, cwd=tmp_path, columns=200, lines=12) as screen:
        screen.wait_for(QUESTION)
        screen.send("y\r")
        assert screen.wait_exit() == 0
        assert f"unlocked {session}" in screen.text
    assert read_holder(str(db), session) is None


def hand_over(location: str, session: str, holder: str) -> None:
    """Another dsh breaks the lease and takes its own."""

    async def take() -> None:
        async with await open_store(location) as store:
            assert await store.break_reply_lease(session)
            assert await store.take_reply_lease(session, holder, ttl_ms=30_000)

    asyncio.run(take())


def test_unlock_is_read_only_on_a_session_shared_with_you(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"

    async def alice_shares() -> None:
        async with await SqliteSessionStore.open(db, user="alice") as alice:
            await alice.create_session("alices")
            await alice.share("alices", os_user())
            assert await alice.take_reply_lease("alices", lease_owner(), ttl_ms=60_000)

    asyncio.run(alice_shares())
    for args in (("alices",), ("alices", "--yes")):
        refused = dsh(tmp_path, str(db), "unlock", *args)
        assert (refused.returncode, refused.stdout) == (1, ""), refused.stderr
        assert refused.stderr == (
            "dsh: error: the session is read-only: it is owned by alice "
            "(only its owner can change it)\n"
        )
    assert read_holder_as(db, "alice", "alices") is not None


def read_holder_as(db: Path, user: str, session: str) -> str | None:
    async def read() -> str | None:
        async with await SqliteSessionStore.open(db, user=user) as store:
            lease = await store.read_reply_lease(session)
            return None if lease is None else lease.holder

    return asyncio.run(read())


def test_unlock_is_in_the_help(tmp_path: Path) -> None:
    listed = run_dsh(tmp_path, "--help")
    assert "unlock" in listed.stdout
    helped = run_dsh(tmp_path, "unlock", "--help")
    assert helped.returncode == 0 and "--yes" in helped.stdout

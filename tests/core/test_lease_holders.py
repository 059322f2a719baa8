"""Reply lease holders (issue 30, point 9): a holder names its host and the PID namespace it
runs in, and only a process of that same host and namespace judges it dead by its pid.
Two containers with one host name see different processes behind the same pid: each must
take the other's live lease for alive (it runs out by its TTL), never write beside it."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import core.leases as leases
from core.leases import (
    LeaseHolder,
    holder_runs_here,
    lease_owner,
    lease_owner_is_dead,
    namespace_identity,
    parse_holder,
)
from stores import SqliteSessionStore
from tests.children import ROOT, expect_line

pytestmark = pytest.mark.timeout(60)

OTHER_NAMESPACE = "0123456789abcdef"


def dead_pid() -> int:
    """The pid of a child that has exited and been reaped (so no process has it, for now)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def ours() -> tuple[str, str]:
    """This process's host name and namespace identity (which this machine must have)."""
    namespace = namespace_identity()
    assert namespace is not None, "this test machine has /proc: the identity must be readable"
    assert namespace != OTHER_NAMESPACE
    return socket.gethostname(), namespace


def test_a_holder_names_its_host_namespace_pid_and_reply() -> None:
    host, namespace = ours()
    mine = lease_owner()
    assert re.fullmatch(r"[0-9a-f]{16}", namespace)
    parsed = parse_holder(mine)
    assert parsed is not None
    assert (parsed.host, parsed.namespace, parsed.pid) == (host, namespace, os.getpid())
    assert mine == f"{host}:{namespace}:{os.getpid()}:{parsed.nonce}" and parsed.nonce
    assert lease_owner() != mine  # unique per reply
    assert namespace_identity() == namespace  # stable within the process


def test_a_killed_process_of_this_host_and_namespace_is_dead_at_once() -> None:
    host, namespace = ours()
    gone = f"{host}:{namespace}:{dead_pid()}:x"
    assert lease_owner_is_dead(gone) and not holder_runs_here(gone)
    mine = lease_owner()
    assert not lease_owner_is_dead(mine) and holder_runs_here(mine)  # this process runs
    parent = f"{host}:{namespace}:{os.getppid()}:x"
    assert not lease_owner_is_dead(parent) and holder_runs_here(parent)


def test_another_namespace_with_our_host_name_is_never_judged_dead() -> None:
    host, namespace = ours()
    pid = dead_pid()  # no process of ours has it: only the holder's namespace could tell
    for holder in (
        f"{host}:{OTHER_NAMESPACE}:{pid}:x",  # another container, same host name
        f"{host}:-:{pid}:x",  # a holder that could not read its namespace
        f"{host}:{pid}:x",  # an older dsh's host:pid:nonce: which namespace, nobody knows
        f"{host}:{namespace.upper()}:{pid}:x",  # not exactly ours
        f"other-{host}:{namespace}:{pid}:x",  # another host
    ):
        assert not lease_owner_is_dead(holder), holder
        assert not holder_runs_here(holder), holder


def test_an_unreadable_identity_judges_nobody_dead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host, namespace = ours()
    gone = f"{host}:{namespace}:{dead_pid()}:x"
    assert lease_owner_is_dead(gone)
    for setting in ("_BOOT_ID", "_PID_NAMESPACE"):
        with monkeypatch.context() as patch:
            patch.setattr(leases, setting, str(tmp_path / "unreadable"))
            assert namespace_identity() is None
            mine = lease_owner()
            assert mine.split(":")[1] == "-" and parse_holder(mine) is not None
            assert not lease_owner_is_dead(gone)
            assert not lease_owner_is_dead(gone.replace(namespace, "-"))
            assert not holder_runs_here(mine)  # unsure, even about itself


def test_the_machine_id_is_part_of_the_identity_when_readable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = set()
    for machine in ("one", "two", None):
        path = tmp_path / f"machine-id-{machine}"
        if machine is not None:
            path.write_text(f"{machine}\n")
        monkeypatch.setattr(leases, "_MACHINE_IDS", (str(path),))
        identity = namespace_identity()
        assert identity is not None and re.fullmatch(r"[0-9a-f]{16}", identity)
        seen.add(identity)
    assert len(seen) == 3


def test_odd_holders_are_alive() -> None:
    host, namespace = ours()
    for odd in (
        "",
        "x",
        "a:b",
        "a:b:c:d:e",
        f"{host}:{namespace}:²:x",
        f"{host}:{namespace}:-1:x",
        f"{host}:{namespace}:0:x",
        f"{host}:{namespace}:{2**31}:x",
        f"{host}:{namespace}:{'9' * 5000}:x",
        f"{host}:{namespace}: 12:x",
    ):
        assert parse_holder(odd) is None, odd
        assert not lease_owner_is_dead(odd) and not holder_runs_here(odd)


def test_a_host_name_with_colons(monkeypatch: pytest.MonkeyPatch) -> None:
    _, namespace = ours()
    monkeypatch.setattr(socket, "gethostname", lambda: "odd:host")
    pid = dead_pid()
    assert parse_holder(f"odd:host:{namespace}:{pid}:x") == LeaseHolder(
        "odd:host", namespace, pid, "x"
    )
    assert lease_owner_is_dead(f"odd:host:{namespace}:{pid}:x")
    assert lease_owner().startswith(f"odd:host:{namespace}:{os.getpid()}:")


def test_engine_names_stay_importable() -> None:
    from core import engine

    assert engine.lease_owner is lease_owner
    assert engine.lease_owner_is_dead is lease_owner_is_dead


# --------------------------------------------------------------------------- real namespaces

_CONTAINER = """
import os, subprocess, sys
# Pid 1 of a new PID namespace: its worker gets a pid that the judge's namespace lacks.
with open("/proc/sys/kernel/ns_last_pid", "w") as counter:
    counter.write(str(int(sys.argv[1]) - 1))
sys.exit(subprocess.call([sys.executable, "-c", sys.argv[2], *sys.argv[3:]]))
"""

_WORKER = """
import asyncio, os, sys, time
from core.leases import lease_owner, lease_owner_is_dead
from stores import SqliteSessionStore

async def main():
    store = await SqliteSessionStore.open(sys.argv[1])
    mine = lease_owner()
    assert await store.take_reply_lease("theirs", mine, ttl_ms=60_000, dead=lease_owner_is_dead)
    print("holder", os.getpid(), mine, flush=True)
    took = await store.take_reply_lease("ours", mine, ttl_ms=60_000, dead=lease_owner_is_dead)
    print("ours", "taken" if took else "busy", flush=True)
    time.sleep(600)

asyncio.run(main())
"""


def _unshare_problem() -> str | None:
    """Why ``unshare --pid --fork`` cannot make a PID namespace here, or ``None``."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is not installed"
    try:
        probe = subprocess.run(
            [unshare, "--pid", "--fork", sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as err:
        return f"unshare cannot run: {err}"
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        return (
            "unshare --pid --fork cannot make a PID namespace here (it needs root, or "
            f"unprivileged user namespaces): {probe.stderr.strip() or probe.stdout.strip()}"
        )
    return None


def _start_container(db: Path, pid: int) -> subprocess.Popen[str]:
    """``_WORKER`` on ``db`` in a new PID namespace (same host name), as pid ``pid`` there."""
    unshare = shutil.which("unshare")
    assert unshare is not None
    return subprocess.Popen(
        [unshare, "--pid", "--fork", sys.executable, "-c", _CONTAINER, str(pid), _WORKER, db],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # one process group: unshare, its pid 1 and the worker
    )


def _pid_exists(pid: int) -> bool:
    """Whether a process of this namespace has ``pid``."""
    return Path(f"/proc/{pid}").exists()


def _free_pid() -> int:
    """A pid no process of this namespace has (the top of the range is least used)."""
    try:
        top = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        top = 32768
    for pid in range(top - 1, top // 2, -1):
        if not _pid_exists(pid):
            return pid
    raise AssertionError("no free pid in the upper half of pid_max")


@pytest.fixture
def container(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A SQLite database and the pid the other namespace's worker is to get."""
    problem = _unshare_problem()
    if problem is not None:
        pytest.skip(problem)
    yield tmp_path / "dsh.sqlite3", _free_pid()


async def test_a_live_holder_in_another_pid_namespace_is_never_judged_dead(
    container: tuple[Path, int],
) -> None:
    db, pid = container
    async with await SqliteSessionStore.open(db) as store:
        await store.create_session("ours")
        await store.create_session("theirs")
        mine = lease_owner()
        assert await store.take_reply_lease("ours", mine, ttl_ms=60_000, dead=lease_owner_is_dead)
        child = _start_container(db, pid)
        try:
            line = await asyncio.to_thread(expect_line, child, "holder ")
            _, their_pid, theirs = line.split()
            # The same host name, a pid our namespace does not have: judged by host and
            # pid alone, this live holder would be dead.
            assert int(their_pid) == pid and not _pid_exists(pid)
            held = parse_holder(theirs)
            assert held is not None and held.host == socket.gethostname() and held.pid == pid
            assert held.namespace != namespace_identity()
            assert not lease_owner_is_dead(theirs) and not holder_runs_here(theirs)
            assert not await store.take_reply_lease(
                "theirs", lease_owner(), ttl_ms=60_000, dead=lease_owner_is_dead
            )
            # And the other way round: it took our live lease for alive too.
            assert (await asyncio.to_thread(expect_line, child, "ours ")).split() == [
                "ours",
                "busy",
            ]
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
        lease = await store.read_reply_lease("theirs")
        assert lease is not None and lease.holder == theirs  # still there: runs out by TTL
        assert (await store.read_reply_lease("ours")) is not None

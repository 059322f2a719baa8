"""A live ``dsh send`` (or ``dsh reply``) whose session is unlocked from another process
stops at its next lease renewal (within 5 s) with one line and exit status 1, and stores no
final message: the next ``dsh send`` owns the session, and every reply's message follows its
own chunks. Real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.log import ASSISTANT_MESSAGE, TURN_END, USER_MESSAGE, Event, message_text, user_message
from stores import open_store
from tests.children import ROOT
from tests.cli.test_cli_unlock import dsh
from tests.core.test_engine_lease_lost import assert_each_message_follows_its_chunks
from tests.storekinds import DURABLE_KINDS, durable_location

pytestmark = pytest.mark.timeout(120)

LOST = (
    "dsh: error: another process took this session's reply lease (it was broken with "
    "`dsh unlock`, or ran out while this dsh stalled): the reply stopped; your message is "
    "saved, the partial reply is not\n"
)
RENEWAL_S = 5.0  # core.engine.REPLY_LEASE_RENEW_SECONDS


@pytest.fixture(params=DURABLE_KINDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with durable_location(request, tmp_path) as where:
        yield where


def slow_dsh(tmp_path: Path, location: str, *args: str) -> subprocess.Popen[str]:
    """``dsh`` whose offline model says a word a second (17 s for a short question)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        DSH_OFFLINE_DELAY="1",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "--db", location, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def read_events(location: str, session: str) -> list[Event]:
    async def read() -> list[Event]:
        async with await open_store(location) as store:
            return await store.read_events(session)

    return asyncio.run(read())


def unlock_while_it_streams(tmp_path: Path, location: str, session: str, *args: str) -> str:
    """Run the slow ``dsh`` with ``args``; once its reply streams, unlock the session and
    send another message. Returns the slow one's output, once it exited 1 with one line."""
    first = slow_dsh(tmp_path, location, *args)
    try:
        assert first.stdout is not None
        head = first.stdout.read(1)  # its first word is out: it holds the lease, streaming
        assert head
        unlocked = dsh(tmp_path, location, "unlock", session, "--yes")
        assert unlocked.returncode == 0, unlocked.stderr
        assert unlocked.stdout.endswith(f"unlocked {session}\n")
        broken = time.monotonic()
        second = dsh(tmp_path, location, "send", session, "second question")
        assert second.returncode == 0, second.stderr  # the session is free for it
        assert second.stdout.startswith("Offline model")
        first.wait(timeout=60)  # (communicate would lose what read() buffered)
        out, err = head + first.stdout.read(), first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert (first.returncode, err) == (1, LOST)  # one line, no traceback
    assert time.monotonic() - broken < RENEWAL_S + 10  # long before its 17 s reply ends
    assert out.endswith("\n") and "Earlier messages" not in out  # cut short, line ended
    return out


def assert_one_final_message(events: list[Event]) -> None:
    """Only the second send's reply is stored as a message; the stopped one left chunks
    (a turn of its own) and no ``turn/end``."""
    (message,) = [e for e in events if e.type == ASSISTANT_MESSAGE]
    assert "Request: second question" in message_text(message.data["message"])
    assert [e.data["turn"] for e in events if e.type == TURN_END] == [message.data["turn"]]
    assert_each_message_follows_its_chunks(events)
    stopped = {e.data["turn"] for e in events if e.type == "assistant/chunk"}
    assert stopped - {message.data["turn"]}  # the stopped reply's chunks stay, own turn


def test_an_unlocked_send_stops_and_the_next_send_owns_the_session(
    tmp_path: Path, location: str
) -> None:
    session = dsh(tmp_path, location, "new").stdout.strip()
    out = unlock_while_it_streams(tmp_path, location, session, "send", session, "first question")
    assert out.startswith("Offline model")
    events = read_events(location, session)
    questions = [message_text(e.data) for e in events if e.type == USER_MESSAGE]
    assert questions == ["first question", "second question"]  # the first one is kept
    assert_one_final_message(events)


def test_an_unlocked_reply_stops_the_same_way(tmp_path: Path) -> None:
    db = str(tmp_path / "dsh.sqlite3")
    session = dsh(tmp_path, db, "new").stdout.strip()

    async def leave_unanswered() -> None:
        async with await open_store(db) as store:
            await store.append(
                session, USER_MESSAGE, user_message("unanswered"), surface_op="append"
            )

    asyncio.run(leave_unanswered())
    unlock_while_it_streams(tmp_path, db, session, "reply", session)
    assert_one_final_message(read_events(db, session))

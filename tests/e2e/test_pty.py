"""The real ``dsh`` program in a pseudo-terminal: reference a session with ``@`` and send.

Each test builds a database with the real CLI (``dsh demo``, ``dsh new``, ``dsh rename``)
in separate processes, starts ``python -m tui.cli`` in a 120x36 PTY, types like a user and
reads the screen through a terminal emulator (pyte), then checks the stored log with
``dsh show --json``. Nothing is faked: store, offline model and terminal I/O are the real ones.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pty_screen import PtyScreen

COLUMNS, LINES = 120, 36
TARGET_TITLE = "E2E target session"
WEBSHOP = "/home/demo/projects/webshop"  # the cwd of the demo's webshop sessions

CHECKOUT_ID, CHECKOUT_LABEL = "demo-webshop-checkout", "Checkout flow redesign"
NOTES_ID, NOTES_LABEL = "demo-notes", "Scratch notes (no cwd)"
PICKER_HEADER = "0 of 3 references"  # the picker's first row while the draft has no mention

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
]


@dataclass
class Dsh:
    """A temp database plus the environment every ``dsh`` process of a test runs with."""

    tmp: Path
    db: Path
    env: dict[str, str]

    def cli(self, *args: str) -> str:
        """Run ``dsh --db DB ARGS…`` in its own process; its stdout (it must succeed)."""
        done = subprocess.run(
            [sys.executable, "-m", "tui.cli", "--db", str(self.db), *args],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"dsh {' '.join(args)} failed:\n{done.stderr}"
        return done.stdout

    def events(self, session_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = json.loads(self.cli("show", session_id, "--json"))
        return events

    def tui(self) -> PtyScreen:
        return PtyScreen(
            [sys.executable, "-m", "tui.cli"],
            env=self.env,
            cwd=self.tmp,
            columns=COLUMNS,
            lines=LINES,
        )


@pytest.fixture
def dsh(tmp_path: Path) -> Iterator[Dsh]:
    """A temp database holding the demo sessions, and a clean environment (no ``DSH_*``
    or ``TEXTUAL*`` leftovers, isolated config and data directories)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DSH_", "TEXTUAL", "PYTEST_"))
        and name not in ("DEEPSEEK_API_KEY", "COLUMNS", "LINES", "NO_COLOR")
    }
    db = tmp_path / "db.sqlite3"
    env.update(
        TERM="xterm-256color",
        COLUMNS=str(COLUMNS),
        LINES=str(LINES),
        DSH_DB=str(db),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),  # the TUI keeps its theme there
        TEXTUAL_ANIMATIONS="none",
        PYTHONUNBUFFERED="1",
    )
    d = Dsh(tmp_path, db, env)
    d.cli("demo")
    yield d


def new_target(d: Dsh) -> str:
    """A new session (the newest, so the app opens on it) in the webshop's cwd."""
    target = d.cli("new", "--cwd", WEBSHOP).strip()
    d.cli("rename", target, TARGET_TITLE)
    return target


def open_on_target(screen: PtyScreen) -> int:
    """Wait for the app to show the target session, ready for typing; the first screen
    column right of the session sidebar (0 when the sidebar is hidden)."""
    screen.wait_for(
        f"dsh · offline (echo-1) · {TARGET_TITLE}",
        "Message… (@ to reference another session",
        "^q Quit",
    )
    separator = screen.column_of("▕", 1)  # the sidebar's right edge, on the row below the title
    return 0 if separator is None else separator + 1


def pick(screen: PtyScreen, query: str, label: str) -> None:
    """Type ``@``, wait for the picker's rows, filter with ``query`` until ``label`` is the
    first row and every row shows the query (sessions whose messages match follow it,
    issue 18), and press Enter to insert its mention."""
    screen.send("@")
    screen.wait_until(
        lambda s: (rows := s.boxed(PICKER_HEADER)) is not None and len(rows) > 3,
        "the @ picker listing sessions",
    )
    screen.send(query)
    screen.wait_until(
        lambda s: (
            (rows := s.boxed(PICKER_HEADER)) is not None
            and len(rows) >= 2
            and rows[1].startswith(label)
            and all(query in row.lower() for row in rows[1:])
        ),
        f"the picker filtered by {query!r} down to {label!r}",
    )
    screen.send("\r")
    screen.wait_until(lambda s: s.boxed(PICKER_HEADER) is None, "the picker to close")


def test_reference_a_session_with_the_picker_and_send(dsh: Dsh) -> None:
    target = new_target(dsh)
    chip = f"@{CHECKOUT_LABEL}"  # the composer shows a picked mention as one chip
    request = f"Compare with @{CHECKOUT_LABEL} what did we decide?"

    with dsh.tui() as screen:
        left = open_on_target(screen)
        screen.send("Compare with ")
        screen.wait_for("Compare with")
        pick(screen, "checkout", CHECKOUT_LABEL)
        screen.wait_until(
            lambda s: f"Compare with {chip}" in s.flowed(left), "the mention in the draft"
        )
        screen.send("what did we decide?")
        screen.wait_until(
            lambda s: f"Compare with {chip} what did we decide?" in s.flowed(left),
            "the whole draft",
        )

        screen.send("\r")
        received = re.compile(rf"{re.escape(CHECKOUT_LABEL)}: (\d+) messages? received")
        screen.wait_all(
            {
                "collapsed reference card": lambda s: (
                    f"▸ Referenced sessions · {CHECKOUT_LABEL}" in s.text
                ),
                "the user's message, mention shown as @label": lambda s: (
                    re.search(rf"You\b[^@]* {re.escape(request)}", s.flowed(left)) is not None
                ),
                "the offline model's reply": lambda s: (
                    f"Offline model (no network): here is what I received. Request: {request}"
                    in s.flowed(left)
                ),
                "the source's message count": lambda s: received.search(s.text) is not None,
                "the reply finished": lambda s: (
                    "Earlier messages in this conversation: 0." in s.text
                    and "Replying…" not in s.text
                ),
                "the composer cleared": lambda s: "Message… (@ to reference" in s.text,
                "no error notice": lambda s: "SESSION_REFERENCE_" not in s.text,
            }
        )
        count = received.search(screen.text)
        assert count is not None

        screen.send("\x11")  # ctrl+q
        assert screen.wait_exit() == 0, screen.dump()

    users = [(i, e) for i, e in enumerate(dsh.events(target)) if e["type"] == "user/message"]
    assert len(users) == 2, users
    (i, snapshot), (j, direct) = users
    assert j == i + 1, "the snapshot must come right before the direct message"
    assert direct["seq"] == snapshot["seq"] + 1
    source = snapshot["data"]["source"]
    assert source["kind"] == "session-reference"
    [ref] = source["references"]
    assert (ref["sessionId"], ref["label"]) == (CHECKOUT_ID, CHECKOUT_LABEL)
    assert ref["retainedMessages"] == int(count.group(1))
    assert "<referenced-sessions>" in snapshot["data"]["content"][0]["text"]
    assert direct["data"]["source"] == {"kind": "user"}
    assert direct["data"]["content"] == [{"type": "text", "text": request}]


def test_a_session_deleted_after_the_mention_was_inserted_is_reported(dsh: Dsh) -> None:
    target = new_target(dsh)
    before = dsh.events(target)
    draft = f"@{NOTES_LABEL} any news?"  # the mention as the composer shows it: one chip

    with dsh.tui() as screen:
        left = open_on_target(screen)
        pick(screen, "scratch", NOTES_LABEL)
        screen.send("any news?")
        screen.wait_until(lambda s: draft in s.flowed(left), "the draft with the mention")

        assert dsh.cli("delete", NOTES_ID).strip() == f"deleted {NOTES_ID}"
        screen.send("\r")
        notice = re.compile(
            "The referenced session "
            rf"'({re.escape(NOTES_LABEL)}|{re.escape(NOTES_ID)})' does not exist.*SESSION_REFERENCE_READ_FAILED"
        )
        screen.wait_all(
            {
                "the error notice": lambda s: notice.search(s.flowed(left)) is not None,
                "the draft back in the composer": lambda s: draft in s.flowed(left),
                "no reply": lambda s: "Offline model (no network)" not in s.text,
            }
        )

        screen.send("\x11")
        assert screen.wait_exit() == 0, screen.dump()

    assert dsh.events(target) == before  # nothing was appended


def _interrupted_reply(d: Dsh, session_id: str) -> str:
    """The text of the session's one stored reply, which must be marked interrupted."""
    events = d.events(session_id)
    [reply] = [e for e in events if e["type"] == "assistant/message"]
    assert reply["data"]["finish"] == "interrupted" and reply["data"]["interrupted"] is True
    assert [e["data"]["status"] for e in events if e["type"] == "turn/end"] == ["interrupted"]
    text: str = reply["data"]["message"]["content"][-1]["text"]
    return text


def _start_a_slow_reply(d: Dsh) -> tuple[str, PtyScreen]:
    target = new_target(d)
    d.env["DSH_OFFLINE_DELAY"] = "0.3"  # a word every 0.3 s: the reply is still running
    screen = d.tui()
    open_on_target(screen)
    screen.send("tell me slowly")
    screen.wait_for("tell me slowly")
    screen.send("\r")
    screen.wait_for("Offline model", "Replying…")
    return target, screen


def test_sigterm_mid_reply_stores_the_partial_reply_and_exits_143(dsh: Dsh) -> None:
    target, screen = _start_a_slow_reply(dsh)
    with screen:
        screen.child.kill(signal.SIGTERM)
        assert screen.wait_exit() == 128 + signal.SIGTERM, screen.dump()
    text = _interrupted_reply(dsh, target)
    assert text.startswith("Offline model") and "Earlier messages" not in text


def test_closing_the_terminal_mid_reply_keeps_the_partial_reply(dsh: Dsh) -> None:
    target, screen = _start_a_slow_reply(dsh)
    with screen:
        # The terminal goes away (its window closed): the kernel hangs up the session,
        # and the program gets SIGHUP with nowhere left to draw.
        screen.child.ptyproc.fileobj.close()
        status = os.waitpid(screen.child.pid, 0)[1]
        screen.child.ptyproc.terminated = True
        assert os.WIFEXITED(status), f"killed by signal {os.WTERMSIG(status)}"
        assert os.WEXITSTATUS(status) == 128 + signal.SIGHUP
    text = _interrupted_reply(dsh, target)
    assert text.startswith("Offline model") and "Earlier messages" not in text

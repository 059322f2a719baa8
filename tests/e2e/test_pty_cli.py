"""The ``dsh`` command line on a real terminal: what it asks before destroying data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.pty_screen import PtyScreen

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
]


class Cli:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = tmp / "db.sqlite3"
        self.env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("DSH_", "TEXTUAL", "PYTEST_"))
            and name not in ("DEEPSEEK_API_KEY", "COLUMNS", "LINES", "NO_COLOR")
        }
        self.env.update(
            TERM="xterm-256color",
            XDG_CONFIG_HOME=str(tmp / "config"),
            XDG_DATA_HOME=str(tmp / "data"),
            PYTHONUNBUFFERED="1",
        )

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tui.cli", "--db", str(self.db), *args]

    def run(self, *args: str, code: int = 0) -> str:
        done = subprocess.run(
            self.argv(*args),
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == code, f"dsh {' '.join(args)}: {done.stderr}"
        return done.stdout + done.stderr

    def pty(self, *args: str, columns: int = 160, lines: int = 24) -> PtyScreen:
        return PtyScreen(self.argv(*args), env=self.env, cwd=self.tmp, columns=columns, lines=lines)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_delete_on_a_terminal_asks_first(cli: Cli) -> None:
    session = cli.run("new").strip()
    cli.run("rename", session, "Keep me")
    with cli.pty("delete", "Keep me") as screen:
        screen.wait_for(f"Delete session 'Keep me' ({session}) and its 0 messages? [y/N]")
        screen.send("n\r")
        assert screen.wait_exit() == 1
        assert "nothing deleted" in screen.text
    assert "Keep me" in cli.run("sessions")

    with cli.pty("delete", "Keep me") as screen:
        screen.wait_for("[y/N]")
        screen.send("y\r")
        assert screen.wait_exit() == 0
        assert f"deleted {session}" in screen.text
    assert session not in cli.run("sessions")


def test_delete_yes_does_not_ask_and_a_script_is_not_asked(cli: Cli) -> None:
    first = cli.run("new").strip()
    second = cli.run("new").strip()
    with cli.pty("delete", "--yes", first) as screen:
        assert screen.wait_exit() == 0
        assert "[y/N]" not in screen.text and f"deleted {first}" in screen.text
    assert f"deleted {second}" in cli.run("delete", second)  # no terminal: no question


def test_demo_reset_on_a_terminal_asks_first(cli: Cli) -> None:
    cli.run("demo")
    cli.run("send", "demo-notes", "my own note")
    with cli.pty("demo", "--reset") as screen:
        screen.wait_for("Delete the 7 existing demo sessions of 7,", "rebuild them? [y/N]")
        screen.send("\r")  # the default is no
        assert screen.wait_exit() == 1
        assert "nothing changed" in screen.text
    assert "my own note" in cli.run("show", "demo-notes")

    with cli.pty("demo", "--reset") as screen:
        screen.wait_for("[y/N]")
        screen.send("yes\r")
        assert screen.wait_exit() == 0
        assert "(rebuilt)" in screen.text
    assert "my own note" not in cli.run("show", "demo-notes")


def test_sessions_at_80_columns_never_folds_an_id(cli: Cli) -> None:
    cli.run("demo")
    uuid = cli.run("new", "--cwd", "/home/demo/projects/a-rather-long/working-directory").strip()
    cli.run("rename", uuid, "A title long enough that it cannot fit beside a full UUID")
    with cli.pty("sessions", columns=80) as screen:
        assert screen.wait_exit() == 0
        rows = [row.rstrip() for row in screen.rows if row.strip()]
    assert len(rows) == 1 + 8, screen.dump()  # the header, one row per session
    assert all(len(row) <= 80 for row in rows)
    starts = [row.split("  ")[0] for row in rows[1:]]
    assert uuid in starts and "demo-research-with-references" in starts
    [row] = [r for r in rows if r.startswith(uuid)]
    assert "A title long" in row and "…" in row, "the title is cut, not the id"


def test_show_on_a_terminal_wraps_and_keeps_continuation_indents(cli: Cli) -> None:
    cli.run("demo")
    show = ("show", "demo-research-with-references", "--expand")
    with cli.pty(*show, columns=80, lines=200) as screen:
        assert screen.wait_exit() == 0
        rows = [row.rstrip() for row in screen.rows]
    assert all(len(row) <= 80 for row in rows)
    start = next(i for i, row in enumerate(rows) if row.startswith("    cwd /home/demo/projects/w"))
    assert rows[start + 1].startswith("    ") and "truncated no" in rows[start + 1], rows
    reply = next(i for i, row in enumerate(rows) if row.startswith("    assistant: Merge"))
    assert rows[reply + 1].startswith("    fold the review page"), rows[reply : reply + 2]


def test_ctrl_c_at_the_question_ends_dsh_and_deletes_nothing(cli: Cli) -> None:
    session = cli.run("new").strip()
    with cli.pty("delete", session) as screen:
        screen.wait_for("[y/N]")
        screen.send("\x03")
        assert screen.wait_exit(timeout=10) == 130
    assert session in cli.run("sessions")

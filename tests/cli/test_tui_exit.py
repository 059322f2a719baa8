"""A real crash of the TUI (a bug, not an ordinary fault) ends the ``dsh`` process with a
non-zero exit status, after Textual's crash report; it used to exit 0."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

from tests.children import ROOT

CRASHING_DSH = """
import sys
from tui.app.app import DshApp

async def broken(self):
    raise RuntimeError("a deliberate bug for this test")

DshApp.refresh_sessions = broken  # the app crashes as soon as it is ready
from tui.cli.commands import main
sys.exit(main())
"""


def test_a_crash_exits_non_zero(tmp_path: Path) -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DSH_", "TEXTUAL", "PYTEST_"))
    }
    env.update(
        TERM="xterm-256color",
        DSH_DB=str(tmp_path / "db.sqlite3"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        PYTHONPATH=str(ROOT),
    )
    child = pexpect.spawn(
        sys.executable, ["-c", CRASHING_DSH], env=env, cwd=str(tmp_path), dimensions=(30, 100)
    )
    try:
        child.expect(pexpect.EOF, timeout=60)
        output = (child.before or b"").decode("utf-8", "replace")
    finally:
        child.close()
    assert "a deliberate bug for this test" in output, output[-2000:]
    assert child.exitstatus == 1, (child.exitstatus, child.signalstatus, output[-2000:])

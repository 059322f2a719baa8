"""Ctrl+C stops ``dsh show`` of a long session within a page (it used to draw the whole
session first: the wait for the drawing could not be interrupted), exit status 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli.test_streamed_memory import _build

ROOT = Path(__file__).resolve().parents[2]
MAIN = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from tui.cli.commands import main; sys.exit(main())"
)


def test_ctrl_c_stops_show_of_a_long_session(tmp_path: Path) -> None:
    db = tmp_path / "long.sqlite3"
    _build(db, 1500)  # about 12 MB: several seconds of drawing
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.Popen(
        [sys.executable, "-c", MAIN, "--db", str(db), "show", "big"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline()  # it is drawing
        proc.send_signal(signal.SIGINT)
        rest = proc.stdout.read()  # drain, so a blocked write cannot hold it
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert code == 130
    # What it drew after the signal, not how long that took (a busy machine's clock says
    # little): the whole session is about 9 MB; stopping within a page leaves next to none.
    assert len(rest) < 1_000_000, f"it drew {len(rest):,} bytes after Ctrl+C"
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")

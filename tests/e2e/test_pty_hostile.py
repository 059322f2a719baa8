"""Issue 12 §3 in a real terminal: the F2 rename dialog of a session whose title holds
escape sequences writes none of them (it used to set the window title, clear the screen
and write the clipboard with OSC 52, seen in tmux)."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.test_pty import Dsh
from tests.e2e.test_pty import dsh as dsh  # the fixture: a demo database in a clean env

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
]

TAGS = "".join(chr(0xE0000 + ord(c)) for c in "IGNORE")
TITLE = f"T \x1b]0;PWNED-TITLE\x07\x1b]52;c;UFdORUQ=\x07\x9b2J\u202eevil {TAGS} end"


def test_the_rename_dialog_writes_no_escape_sequence_of_the_title(dsh: Dsh) -> None:
    target = dsh.cli("new").strip()
    dsh.cli("rename", target, TITLE)
    with dsh.tui() as screen:
        screen.wait_for("^q Quit", "Message…")
        screen.send("\x1bOQ")  # F2
        screen.wait_for("Rename session")
        screen.pump(0.5)
        raw = bytes(screen.raw)
        for needle in ("\x1b]0;PWNED", "\x1b]52;", "PWNED-TITLE\x07", "\x9b", "\u202e", TAGS[0]):
            assert needle.encode("utf-8") not in raw, repr(needle)
        screen.wait_for("\\x1b]0;PWNED-TITLE")  # shown escaped instead
        screen.send("\r")  # untouched: nothing is renamed
        screen.wait_gone("Rename session")
        screen.send("\x11")  # ctrl+q
        screen.wait_exit()
    assert dsh.events(target)[-1]["data"]["title"] == TITLE  # kept exactly

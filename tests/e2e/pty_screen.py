"""Drive a real program in a pseudo-terminal and read its screen through a terminal emulator.

Everything the child writes is fed into a :class:`pyte.Screen` of the same size as the PTY,
so tests can wait for and assert on what a user would actually see, independent of how
the program chose to draw it (cursor moves, partial updates, synchronized output, colours).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pexpect
import pyte

__all__ = ["DEFAULT_TIMEOUT", "PtyScreen", "ScreenTimeout"]

DEFAULT_TIMEOUT = 20.0
"""Seconds one wait may take before the test fails (generous: CI machines can be slow)."""

_POLL = 0.05
_BORDER = "▏▎▍▌▋▊▉█▐▕│┃▁▂▃▄▅▆▇ "
"""Stripped from both ends of a row by :meth:`PtyScreen.flowed`: Textual's left/right
borders (eighth blocks, box lines) and scrollbar thumbs."""
_SPACES = re.compile(r"\s+")


class ScreenTimeout(AssertionError):
    """A wait ran out; the message holds what was on the screen at that moment."""


class PtyScreen:
    """A child process in a PTY of ``columns`` x ``lines`` cells plus an emulated screen.

    Use as a context manager: the child is always terminated on exit.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        columns: int = 120,
        lines: int = 36,
    ) -> None:
        self.columns = columns
        self.lines = lines
        self.screen = pyte.Screen(columns, lines)
        self._stream = pyte.ByteStream(self.screen)
        self.eof = False
        self.raw = bytearray()
        """Every byte the child wrote, in order (to replay into another emulator when a
        test fails)."""
        self.child = pexpect.spawn(
            argv[0],
            list(argv[1:]),
            env=dict(env),
            cwd=str(cwd),
            dimensions=(lines, columns),
            encoding=None,
            echo=False,
        )

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> PtyScreen:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Terminate the child if it still runs (first politely, then SIGKILL)."""
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close(force=True)

    def wait_exit(self, timeout: float = DEFAULT_TIMEOUT) -> int | None:
        """Keep reading until the child closes the terminal and exits; its exit status
        (``None`` when it was killed by a signal, see ``child.signalstatus``)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if time.monotonic() > deadline:
                raise ScreenTimeout(f"the program did not exit within {timeout} s\n{self.dump()}")
            self.pump(_POLL)
        status = self.child.wait()
        return None if self.child.signalstatus is not None else int(status)

    # ------------------------------------------------------------------ input

    def send(self, keys: str) -> None:
        """Write keys to the terminal (``"\\r"`` Enter, ``"\\x1b"`` Esc, ``"\\x11"`` ctrl+q)."""
        self.child.send(keys.encode("utf-8"))

    # ------------------------------------------------------------------ output

    def pump(self, timeout: float = 0.0) -> None:
        """Feed whatever the child wrote into the screen, waiting at most ``timeout`` for it."""
        if self.eof:
            return
        wait = timeout
        while True:
            try:
                data = self.child.read_nonblocking(1 << 16, timeout=wait)
            except pexpect.TIMEOUT:
                return
            except pexpect.EOF:
                self.eof = True
                return
            self.raw += data
            self._stream.feed(data)
            wait = 0.0  # drain what is already there, then return

    @property
    def rows(self) -> list[str]:
        """The screen, one string per row (trailing spaces kept)."""
        return list(self.screen.display)

    def cells(self, y: int, left: int = 0, right: int | None = None) -> str:
        """Row ``y`` from column ``left`` up to ``right`` (exclusive), by screen column: a
        wide character counts as the two cells it covers."""
        line = self.screen.buffer[y]
        stop = self.columns if right is None else right
        return "".join(line[x].data for x in range(left, stop))

    def column_of(self, needle: str, y: int) -> int | None:
        """The screen column where ``needle`` starts in row ``y`` (``None`` if absent)."""
        return next((x for x in range(self.columns) if self.cells(y, x).startswith(needle)), None)

    @property
    def text(self) -> str:
        return "\n".join(row.rstrip() for row in self.rows)

    def flowed(self, left: int = 0) -> str:
        """The screen right of column ``left`` as one line of words.

        Each row is cut at ``left``, border glyphs and spaces are stripped from both ends,
        and the rows are joined by single spaces. Text that the program wrapped at word
        boundaries over several rows therefore reads as one sentence again.
        """
        parts = (self.cells(y, left).strip(_BORDER) for y in range(self.lines))
        return _SPACES.sub(" ", " ".join(part for part in parts if part)).strip()

    def boxed(self, header: str) -> list[str] | None:
        """The inner rows, stripped, of the rounded box (``╭…╮`` down to ``╰…╯``) whose
        first inner row contains ``header``; ``None`` when there is none on screen.

        Columns are those of the box's top-left corner, so a box drawn over another one
        (dsh's ``@`` picker over the empty-state panel) is read on its own.
        """
        for top in range(self.lines):
            row = [self.screen.buffer[top][x].data for x in range(self.columns)]
            if "╭" not in row or "╮" not in row:
                continue
            left = row.index("╭")
            right = row.index("╮", left)
            inner: list[str] = []
            for y in range(top + 1, self.lines):
                line = self.cells(y, left, right + 1)
                if line.startswith("╰"):
                    break
                if not (line.startswith("│") and line.endswith("│")):
                    inner = []
                    break
                inner.append(line[1:-1].strip())
            if inner and header in inner[0]:
                return inner
        return None

    def dump(self) -> str:
        rule = "-" * self.columns
        return f"{rule}\n{self.text}\n{rule}"

    # ------------------------------------------------------------------ waiting

    def wait_until(
        self,
        condition: Callable[[PtyScreen], bool],
        what: str,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Poll the screen until ``condition(self)`` holds; fail with a screen dump if not."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump(_POLL)
            if condition(self):
                return
            if self.eof:
                raise ScreenTimeout(f"the program exited while waiting for {what}\n{self.dump()}")
            if time.monotonic() > deadline:
                raise ScreenTimeout(
                    f"timed out after {timeout} s waiting for {what}\n{self.dump()}"
                )

    def wait_all(
        self, checks: Mapping[str, Callable[[PtyScreen], bool]], timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Wait until every check holds on one and the same screen; on timeout, fail naming
        the checks that still do not hold.

        Assert on a finished screen this way rather than on one snapshot: a read can end
        in the middle of a frame the program is still writing.
        """
        failing: list[str] = []

        def all_hold(screen: PtyScreen) -> bool:
            failing[:] = [name for name, check in checks.items() if not check(screen)]
            return not failing

        try:
            self.wait_until(all_hold, "the expected screen", timeout)
        except ScreenTimeout as err:
            raise ScreenTimeout(f"these checks do not hold: {failing}\n{err}") from None

    def wait_for(self, *needles: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until every needle is on the screen (each within one row)."""
        self.wait_until(
            lambda s: all(n in s.text for n in needles),
            " and ".join(repr(n) for n in needles),
            timeout,
        )

    def wait_gone(self, *needles: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until none of the needles is on the screen."""
        self.wait_until(
            lambda s: not any(n in s.text for n in needles),
            "no " + " or ".join(repr(n) for n in needles),
            timeout,
        )

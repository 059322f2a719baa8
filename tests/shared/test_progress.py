"""The progress line of a long store upgrade (tui/shared/progress.py)."""

from __future__ import annotations

import io

from tui.shared.progress import indexing_words, terminal_progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_redrawn_line_cleared_at_the_end() -> None:
    out = Tty()
    show = terminal_progress(out)
    assert show is not None
    show(20, 2045)
    show(2045, 2045)
    assert out.getvalue() == (
        "\r\x1b[Kdsh: Indexing messages for search: 20 of 2,045 sessions\r\x1b[K"
    )
    assert indexing_words(1, 2) == "Indexing messages for search: 1 of 2 sessions"


def test_a_pipe_gets_nothing() -> None:
    assert terminal_progress(io.StringIO()) is None

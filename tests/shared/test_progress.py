"""The progress line of a long store upgrade (tui/shared/progress.py)."""

from __future__ import annotations

import io

from tui.shared.progress import indexing_words, terminal_progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_redrawn_line_ended_by_the_last_count() -> None:
    out = Tty()
    show = terminal_progress(out)
    assert show is not None
    show(20, 2045)
    show(2045, 2045)
    assert out.getvalue() == (
        "\rdsh: Indexing messages for search: 20 of 2,045 sessions"
        "\rdsh: Indexing messages for search: 2,045 of 2,045 sessions\n"
    )
    assert indexing_words(1, 2) == "Indexing messages for search: 1 of 2 sessions"


def test_a_pipe_gets_nothing() -> None:
    assert terminal_progress(io.StringIO()) is None

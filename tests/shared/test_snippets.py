"""A hit's snippet drawn as ``Text`` (tui/shared/snippets.py): the match stays in view,
its spans are styled by offset, nothing is read as markup."""

from __future__ import annotations

from core.search import make_hit
from tui.shared.cells import cell_len
from tui.shared.snippets import MATCH_STYLE, snippet_text


def styled(text: object) -> list[str]:
    from rich.text import Text

    assert isinstance(text, Text)
    return [text.plain[s.start : s.end] for s in text.spans if str(s.style) == MATCH_STYLE]


def test_the_spans_are_styled_and_markup_stays_text() -> None:
    hit = make_hit("s", 0, "[bold]x[/] retry [red]RETRY", ["retry"])
    text = snippet_text(hit.snippet, hit.spans, 80)
    assert text.plain == "[bold]x[/] retry [red]RETRY"
    assert styled(text) == ["retry", "RETRY"]


def test_a_narrow_cell_keeps_the_first_match_in_view() -> None:
    hit = make_hit("s", 0, "会话" * 30 + " the needle here " + "tail " * 20, ["needle"])
    text = snippet_text(hit.snippet, hit.spans, 24)
    assert cell_len(text.plain) <= 24
    assert text.plain.startswith("…") and text.plain.endswith("…")
    assert styled(text) == ["needle"]


def test_a_short_snippet_is_left_whole() -> None:
    text = snippet_text("ok", [(0, 2)], 10, style="dim")
    assert text.plain == "ok" and styled(text) == ["ok"]

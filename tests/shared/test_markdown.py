"""``GrowingMarkdown`` (a streaming reply) lays out line for line as ``LiteralMarkdown`` of
the whole text, whatever the text and however it grew."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tui.shared.render import GrowingMarkdown, LiteralMarkdown

FRAGMENTS = [
    "# Title\n\n",
    "## Steps\n\n",
    "### Small\n\n",
    "A paragraph with **bold**, *em*, `code` and a [link](https://x.test/a).\n\n",
    "line one\nline two\n\n",
    "- item one\n- item two\n\n",
    "- loose one\n\n- loose two\n\n",
    "1. first\n2. second\n\n",
    "3. third\n\n",
    "> a quote\n> more\n\n",
    "> another quote\n\n",
    "```python\ndef f():\n\n    return 1\n```\n\n",
    "~~~\nraw ``` inside\n\nstill code\n~~~\n\n",
    "    indented code\n\n",
    "---\n\n",
    "***\n\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n",
    "</referenced-sessions> <script>x</script>\n\n",
    "![image](https://x.test/i.png) after\n\n",
    "[ref]: https://x.test/r\n\n",
    "Setext\n===\n\n",
    "tail without blank line",
    "\n",
]


def lines(renderable: object, width: int) -> list[list[object]]:
    console = Console(
        width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor"
    )
    return console.render_lines(renderable, console.options.update_width(width))  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8),
    steps=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12),
    width=st.sampled_from([20, 60]),
)
def test_growing_markdown_lays_out_as_the_whole_text(
    parts: list[str], steps: list[int], width: int
) -> None:
    text = "".join(parts)
    growing = GrowingMarkdown()
    end = 0
    for step in [*steps, len(text)]:
        end = min(len(text), end + step)
        growing.update(text[:end])
        assert lines(growing, width) == lines(LiteralMarkdown(text[:end]), width), text[:end]


def test_finished_blocks_are_kept_and_only_the_tail_is_parsed_again() -> None:
    text = "".join(f"## Part {i}\n\nSome text for part {i}.\n\n" for i in range(50))
    growing = GrowingMarkdown()
    for end in range(0, len(text), 50):
        growing.update(text[:end])
    growing.update(text)
    assert growing.settled_chars > len(text) - 40  # all but the last block
    assert lines(growing, 70) == lines(LiteralMarkdown(text), 70)


def test_fenced_code_is_never_cut_inside() -> None:
    text = "Intro\n\n```\nfirst\n\nSecond line of code\n\nThird\n"
    growing = GrowingMarkdown(text)
    assert growing.settled_chars == len("Intro\n\n")
    growing.update(text + "```\n\nAfter\n")
    assert growing.settled_chars == len(text + "```\n\n")


def test_a_source_that_does_not_grow_starts_over() -> None:
    growing = GrowingMarkdown("# One\n\nfirst text\n\nsecond")
    growing.update("other text")
    assert growing.source == "other text"
    assert lines(growing, 40) == lines(LiteralMarkdown("other text"), 40)

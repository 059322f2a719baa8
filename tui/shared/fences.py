"""Literal text inside Markdown code, whatever backticks it holds (no Rich, no Textual)."""

from __future__ import annotations

__all__ = ["code_fence", "code_span", "longest_backtick_run"]


def longest_backtick_run(text: str) -> int:
    """The length of the longest run of backticks in ``text``."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def code_fence(text: str) -> str:
    """A code fence (three backticks or more) longer than any backtick run in ``text``."""
    return "`" * max(3, longest_backtick_run(text) + 1)


def code_span(text: str) -> str:
    """``text`` as one Markdown code span: fenced by more backticks than it holds, padded
    with a space when it starts or ends with a backtick."""
    fence = "`" * (longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"

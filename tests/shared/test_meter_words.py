"""The context meter's words (``tui.shared.meter``): estimates marked, an assumed window
marked, the cost when priced, a draft's references first, the overflow said first."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.usage import DraftUsage, SessionUsage
from tui.shared.meter import (
    draft_words,
    format_bytes,
    format_cost,
    meter_line,
    meter_tooltip,
    overflow_words,
)

USAGE = SessionUsage(
    profile="work",
    input_tokens=5000,
    output_tokens=800,
    cost=None,
    next_request_tokens=12_345,
    context_window=128_000,
    next_request_exact=False,
    context_window_assumed=True,
    replies=3,
)


@pytest.mark.parametrize(
    ("cost", "words"),
    [
        (0.0, "$0"),
        (0.0004, "<$0.001"),
        (0.0048, "$0.005"),
        (0.0123, "$0.012"),
        (12.3456, "$12.346"),
        (1234.5, "$1,234.50"),
    ],
)
def test_format_cost(cost: float, words: str) -> None:
    assert format_cost(cost) == words


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KB"),
        (4200, "4.1 KB"),
        (41_984, "41 KB"),
        (1_258_291, "1.2 MB"),
    ],
)
def test_format_bytes(count: int, words: str) -> None:
    assert format_bytes(count) == words


def test_an_estimate_on_an_assumed_window() -> None:
    assert meter_line(USAGE, "m").text == "≈12k tokens next · 10% of 128k (assumed)"
    assert not meter_line(USAGE, "m").warning


def test_exact_tokens_a_set_window_and_the_cost() -> None:
    usage = replace(
        USAGE,
        next_request_exact=True,
        context_window=10_000,
        context_window_assumed=False,
        next_request_tokens=1500,
        cost=0.0048,
    )
    assert meter_line(usage, "m").text == "1.5k tokens next · 15% of 10k · $0.005 so far"


def test_a_tiny_share_is_not_zero() -> None:
    usage = replace(USAGE, next_request_tokens=3)
    assert meter_line(usage, "m").text == "≈3 tokens next · <1% of 128k (assumed)"
    assert meter_line(replace(usage, next_request_tokens=0), "m").text.endswith(
        "0% of 128k (assumed)"
    )


def test_a_draft_makes_the_count_an_estimate() -> None:
    usage = replace(USAGE, next_request_exact=True)
    assert meter_line(usage, "m").text.startswith("12k tokens next")
    assert meter_line(usage, "m", draft_tokens=10).text.startswith("≈12k tokens next")


def test_a_drafts_references_come_first_with_the_share_they_lead_to() -> None:
    draft = DraftUsage(references=3, snapshot_bytes=41_984, tokens=12_000)
    line = meter_line(USAGE, "m", draft=draft, draft_tokens=draft.tokens)
    assert draft_words(draft) == "3 references · 41 KB · ≈12k tokens"
    assert line.text == "3 references · 41 KB · ≈12k tokens · 19% of 128k (assumed)"
    one = DraftUsage(references=1, snapshot_bytes=900, tokens=230)
    assert draft_words(one) == "1 reference · 900 B · ≈230 tokens"


def test_over_the_window_it_says_by_how_much_first_and_warns() -> None:
    usage = replace(
        USAGE, next_request_tokens=1234, context_window=2000, context_window_assumed=False, cost=0.5
    )
    draft = DraftUsage(references=2, snapshot_bytes=8000, tokens=3766)
    line = meter_line(usage, "deepseek-chat", draft=draft, draft_tokens=draft.tokens)
    assert line.warning
    assert line.text == (
        "over the context window of deepseek-chat (2k) by ≈3k tokens"
        " · 2 references · 7.8 KB · ≈3.8k tokens · ≈5k tokens next · $0.500 so far"
    )
    # Exactly full still fits; one token more does not.
    full = replace(usage, next_request_tokens=2000)
    assert not meter_line(full, "m").warning
    assert meter_line(replace(full, next_request_tokens=2001), "m").warning


def test_an_assumed_window_is_said_in_the_overflow_too() -> None:
    usage = replace(USAGE, next_request_tokens=144_000)
    assert overflow_words("echo-1", usage, 16_000) == (
        "over the context window of echo-1 (128k, assumed) by ≈16k tokens"
    )


def test_a_hostile_model_name_is_one_safe_line() -> None:
    usage = replace(USAGE, context_window=10, context_window_assumed=False)
    text = meter_line(usage, "[b]x[/b]\x1b[2J\nnext").text
    assert "\x1b" not in text and "\n" not in text
    assert text.startswith("over the context window of [b]x[/b]\\x1b[2J")
    tip = meter_tooltip(replace(usage, profile="p\x07"), "\x1b]8;;evil\x07")
    assert "\x1b" not in tip and "\x07" not in tip


def test_the_tooltip_spells_it_out() -> None:
    tip = meter_tooltip(USAGE, "m", draft_tokens=50)
    assert "Next request: 12,345 tokens (an estimate" in tip
    assert "The draft adds about 50 tokens." in tip
    assert "Context window: 128,000 tokens (assumed" in tip
    assert "Replies so far: 3, 5,000 tokens in, 800 out." in tip

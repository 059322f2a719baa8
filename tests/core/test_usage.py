"""The meter's arithmetic (issue 32): reported usage where known, estimates marked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.log import ASSISTANT_MESSAGE, Event
from core.profiles import Profile
from core.usage import (
    ReplyTotals,
    add_reply,
    estimate_tokens,
    format_tokens,
    next_request,
    reply_tokens,
)


def _reply(seq: int, usage: object, profile: str | None = None) -> Event:
    data: dict[str, object] = {
        "turn": 1,
        "step": 0,
        "message": {"role": "assistant", "content": []},
    }
    if usage is not None:
        data["usage"] = usage
    if profile is not None:
        data["profile"] = profile
    return Event(seq, ASSISTANT_MESSAGE, 0, data, "append")


def test_reported_tokens_are_exact_characters_are_estimates() -> None:
    assert reply_tokens(_reply(0, {"prompt_tokens": 10, "completion_tokens": 5}).data) == (
        10,
        5,
        True,
    )
    assert reply_tokens(_reply(0, {"prompt_chars": 10, "completion_chars": 5}).data) == (
        3,
        2,
        False,
    )
    assert reply_tokens(_reply(0, {"prompt_tokens": True, "completion_tokens": 5}).data) is None
    assert reply_tokens(_reply(0, {"prompt_tokens": -1, "completion_tokens": 5}).data) is None
    assert reply_tokens(_reply(0, None).data) is None


def test_each_reply_is_priced_at_the_profile_that_answered() -> None:
    cheap = Profile("cheap", price_input=1.0, price_output=1.0)
    dear = Profile("dear", price_input=10.0, price_output=10.0)
    unpriced = Profile("plain")
    profiles = {p.name: p for p in (cheap, dear, unpriced)}
    totals = ReplyTotals()
    add_reply(
        totals,
        _reply(1, {"prompt_tokens": 1_000_000, "completion_tokens": 0}, "dear").data,
        profiles,
        cheap,
    )
    add_reply(
        totals,
        _reply(2, {"prompt_tokens": 0, "completion_tokens": 1_000_000}, "plain").data,
        profiles,
        cheap,
    )
    add_reply(
        totals,
        _reply(3, {"prompt_tokens": 0, "completion_tokens": 1_000_000}, "gone").data,
        profiles,
        cheap,
    )
    assert totals.cost == 12.0 and totals.priced and totals.exact and totals.replies == 3
    assert (totals.input_tokens, totals.output_tokens) == (1_000_000, 2_000_000)


def test_next_request_uses_the_last_reported_usage_only_when_it_ends_the_surface() -> None:
    from core.providers.base import ProviderMessage

    messages = [ProviderMessage("user", "x" * 400)]
    exact = _reply(1, {"prompt_tokens": 700, "completion_tokens": 30})
    assert next_request([exact], messages) == (730, True)
    estimate = _reply(1, {"prompt_chars": 700, "completion_chars": 30})
    assert next_request([estimate], messages) == (104, False)
    assert next_request([], messages) == (104, False)


def test_estimates_count_utf8_bytes() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("日本語") == 3  # 9 bytes
    assert estimate_tokens("\ud800") == 1  # a lone surrogate is still counted, never an error


@given(st.integers(min_value=0, max_value=10**12))
def test_format_tokens_is_short_with_its_unit(count: int) -> None:
    shown = format_tokens(count)
    assert len(shown) <= 7 or count >= 10**9
    if count < 1000:
        assert shown == str(count)
    elif count < 999_500:  # from there it rounds to a million
        assert shown.endswith("k")
    else:
        assert shown.endswith("M")


def test_format_tokens_examples() -> None:
    assert [format_tokens(n) for n in (812, 4100, 4000, 41_400, 999_499, 1_200_000)] == [
        "812",
        "4.1k",
        "4k",
        "41k",
        "999k",
        "1.2M",
    ]

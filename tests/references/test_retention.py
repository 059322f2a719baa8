"""SPEC §4.7: retention, exact to the byte, checked against hand-computed outputs and a
deliberately naive reference implementation that re-serialises after every step."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.references import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    ProjectedMessage,
    RetainedSource,
    SessionReferenceError,
    omitted_marker,
    retain_source,
    stringify_tag_safe_json,
    truncate_head_tail,
)
from core.references.prompt import render_reference_prompt, render_reference_prompt_encoded
from core.references.retention import encode_message, retain_encoded
from core.references.tagsafe import tag_safe_json_size, tag_safe_utf8_parts, tag_safe_utf8_size
from tests.references.naive_retention import NaiveItem
from tests.references.naive_retention import naive_retain as naive_retain_items
from tests.references.plain_retention import plain_retain_source_after

P = ProjectedMessage
SHELL = (
    81  # len('{"sessionId":"s","label":"L","cwd":null,"capturedThroughSeq":7,"conversation":[]}')
)
ITEM = 25  # len('{"role":"user","text":""}'); an assistant item is 30


def retain(messages: list[ProjectedMessage], max_bytes: int) -> RetainedSource:
    return retain_source(
        session_id="s",
        label="L",
        cwd=None,
        captured_through_seq=7,
        messages=messages,
        max_bytes=max_bytes,
    )


def size(source: dict[str, Any]) -> int:
    return len(stringify_tag_safe_json(source).encode("utf-8"))


def texts(result: RetainedSource) -> list[str]:
    return [item["text"] for item in result.source["conversation"]]


def stats(result: RetainedSource) -> tuple[int, int, int, int, bool, bool]:
    s = result.stats
    return (
        s.original_messages,
        s.retained_messages,
        s.omitted_messages,
        s.omitted_bytes,
        s.truncated,
        s.compacted,
    )


# --------------------------------------------------------------------------- the marker


def test_marker_text() -> None:
    assert omitted_marker(5) == "\n[\u2026 omitted 5 UTF-8 bytes \u2026]"
    assert len(omitted_marker(5).encode()) == 32  # 31 fixed bytes + digits


# --------------------------------------------------------------------------- truncation


@pytest.mark.parametrize(
    ("text", "target", "expected", "omitted"),
    [
        # r=27: 14 head + 13 tail + 33-byte marker = 60; r=28 would give N=72 → 61 bytes.
        ("A" * 100, 60, "A" * 27 + omitted_marker(73), 73),
        ("A" * 100, 59, "A" * 26 + omitted_marker(74), 74),
        # r=1 still fits 34 (N drops to 99, one digit fewer); r=0 alone would also fit.
        ("A" * 100, 34, "A" + omitted_marker(99), 99),
        # not even r=0 fits: the text becomes empty and every byte is omitted
        ("A" * 100, 33, "", 100),
        ("A" * 100, 0, "", 100),
        # multibyte: the head is cut back to 14 bytes (7 é), the tail's leading
        # continuation byte is dropped (12 bytes, 6 é): 26 kept, 74 omitted, 59 ≤ 60.
        ("é" * 50, 60, "é" * 13 + omitted_marker(74), 74),
        # lone surrogates are 3 bytes each, never split, and kept as U+FFFD (r=16: 6 + 6)
        ("\udc00" * 20, 45, "\ufffd" * 4 + omitted_marker(48), 48),
        # 4-byte characters: r=22 keeps 8 of 11 head bytes and 8 of 11 tail bytes
        # (16 + 34 = 50 ≤ 52); r=23 would keep 12 + 8 and need 54.
        ("😀" * 30, 52, "😀" * 4 + omitted_marker(104), 104),
        # a text that fits is returned unchanged
        ("short", 5, "short", 0),
        ("short", 100, "short", 0),
    ],
)
def test_truncate_head_tail(text: str, target: int, expected: str, omitted: int) -> None:
    assert truncate_head_tail(text, target) == (expected, omitted)
    assert len(expected.encode("utf-8", "surrogatepass")) <= max(target, 0) or expected == text


def test_a_cut_never_joins_two_surrogate_halves() -> None:
    # A high surrogate ends the head and a low one starts the tail: kept as two U+FFFD,
    # never as the "😀" the two halves would spell once the JSON is read back.
    text = "a\ud83d" + "x" * 60 + "\ude00b"
    assert truncate_head_tail(text, 41) == ("a\ufffd\ufffdb" + omitted_marker(60), 60)
    result = retain([P("user", text)], 154)
    assert texts(result) == ["a\ufffdx\ufffdb" + omitted_marker(59)]
    assert stats(result) == (1, 1, 0, 59, True, False)
    rendered = stringify_tag_safe_json(result.source)
    assert "😀" not in json.loads(rendered)["conversation"][0]["text"]
    assert size(result.source) == 149
    rendered.encode("utf-8")  # strict: no lone surrogate left


def test_a_lone_surrogate_in_a_shortened_text_counts_three_bytes_as_u_fffd() -> None:
    # 3 + 60 + 3 bytes; r=7 keeps 4 head bytes ("\ufffdx") and 3 tail bytes ("\ufffd").
    text = "\udc00" + "y" * 60 + "\ud800"
    out, omitted = truncate_head_tail(text, 40)
    assert (out, omitted) == ("\ufffdy\ufffd" + omitted_marker(59), 59)
    assert len(out.encode("utf-8")) == 40
    # The un-shortened text keeps its lone surrogates, and they count 3 bytes each.
    assert truncate_head_tail(text, 66) == (text, 0)


def test_a_byte_order_mark_starting_the_head_or_tail_is_kept_and_counted() -> None:
    # SPEC §4.7: unlike the reference (whose TextDecoder drops a leading U+FEFF while
    # still counting it), the U+FEFF at the start of the kept head and of the kept tail
    # stays. r=13: 7 head bytes "\ufeffabcx", 6 tail bytes "\ufeffdef", 99 omitted.
    text = "\ufeffabc" + "x" * 100 + "\ufeffdef"
    out, omitted = truncate_head_tail(text, 46)
    assert (out, omitted) == ("\ufeffabcx\ufeffdef" + omitted_marker(99), 99)
    assert len(out.encode("utf-8")) == 46


def test_truncate_keeps_head_and_tail_in_their_places() -> None:
    text = "head-" + "x" * 200 + "-tail"
    out, omitted = truncate_head_tail(text, 50)
    kept = out[: out.index("\n[")]
    assert out.endswith(omitted_marker(omitted))
    assert text.startswith(kept[: (len(kept) + 1) // 2])
    assert text.endswith(kept[(len(kept) + 1) // 2 :])
    assert len(kept) + omitted == len(text)


def naive_truncate(text: str, target: int) -> tuple[str, int]:
    """Spec text, read literally: try every r from the largest down, by whole code points
    of the text as ``TextEncoder`` sees it (each lone surrogate replaced by U+FFFD)."""
    if len(text.encode("utf-8", "surrogatepass")) <= target:
        return text, 0
    text = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    sizes = [len(ch.encode("utf-8", "surrogatepass")) for ch in text]
    total = sum(sizes)

    def prefix_chars(limit: int, widths: list[int]) -> int:
        used = count = 0
        for width in widths:
            if used + width > limit:
                break
            used += width
            count += 1
        return count

    for r in range(target, -1, -1):
        h = prefix_chars((r + 1) // 2, sizes)
        t = prefix_chars(r // 2, sizes[::-1])
        head, tail = text[:h], text[len(text) - t :] if t else ""
        omitted = total - sum(sizes[:h]) - sum(sizes[len(sizes) - t :] if t else [])
        candidate = head + tail + omitted_marker(omitted)
        if len(candidate.encode("utf-8", "surrogatepass")) <= target:
            return candidate, omitted
    return "", total


TEXT_ALPHABET = st.sampled_from(
    ["a", "b", "é", "中", "😀", "<", "\n", '"', "\x01", "\ud800", "\udfff"]
)
texts_st = st.lists(TEXT_ALPHABET, min_size=1, max_size=60).map("".join)
long_texts = st.one_of(
    texts_st, st.tuples(texts_st, st.integers(2, 8)).map(lambda pair: pair[0] * pair[1])
)


@given(long_texts, st.integers(0, 300))
def test_truncate_matches_naive(text: str, target: int) -> None:
    total = len(text.encode("utf-8", "surrogatepass"))
    if total <= target:
        return  # retention never asks for a text that already fits
    assert truncate_head_tail(text, target) == naive_truncate(text, target)


@given(texts_st, st.integers(0, 90))
def test_shortened_text_is_valid_utf8(text: str, target: int) -> None:
    out, omitted = truncate_head_tail(text, target)
    if not omitted:
        assert out == text  # a text that fits is kept as it is, lone surrogates included
        return
    encoded = out.encode("utf-8")  # strict: raises on a split character or a lone surrogate
    assert len(encoded) <= target
    kept = out[: out.rfind("\n[…")] if out else out
    assert len(kept.encode()) + omitted == len(text.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------- retention, by hand


def test_fits_untouched() -> None:
    messages = [P("user", "hello"), P("assistant", "hi <there>")]
    result = retain(messages, 10_000)
    assert result.source == {
        "sessionId": "s",
        "label": "L",
        "cwd": None,
        "capturedThroughSeq": 7,
        "conversation": [
            {"role": "user", "text": "hello"},
            {"role": "assistant", "text": "hi <there>"},
        ],
    }
    assert list(result.source) == [
        "sessionId",
        "label",
        "cwd",
        "capturedThroughSeq",
        "conversation",
    ]
    assert stats(result) == (2, 2, 0, 0, False, False)
    # 81 + (25+5) + 1 + (30+10+5 for the escaped "<") = 157: one byte less fails to fit
    assert size(result.source) == 157
    assert retain(messages, 157).source == result.source
    assert retain(messages, 156).stats.omitted_messages == 1


def test_drop_order_skips_checkpoints_and_keeps_the_newest() -> None:
    messages = [
        P("user", "aaaa"),
        P("assistant", "bbbb"),
        P("user", "summary", checkpoint=True),
        P("user", "cccc"),
        P("assistant", "dddd"),
    ]
    # [summary, cccc, dddd] = 81 + 32 + 1 + 29 + 1 + 34 = 178
    result = retain(messages, 178)
    assert texts(result) == ["summary", "cccc", "dddd"]
    assert stats(result) == (5, 3, 2, 8, True, True)
    assert size(result.source) == 178
    # one byte less: "cccc" goes too, the checkpoint and the newest stay
    result = retain(messages, 177)
    assert texts(result) == ["summary", "dddd"]
    assert stats(result) == (5, 2, 3, 12, True, True)


def test_dropped_bytes_count_the_original_utf8_with_lone_surrogates() -> None:
    messages = [P("user", "é😀\ud800<"), P("assistant", "ok")]
    result = retain(messages, SHELL + 30 + 2)
    assert texts(result) == ["ok"]
    assert result.stats.omitted_bytes == 2 + 4 + 3 + 1


def test_shorten_counts_escapes_and_replaces_omitted_bytes() -> None:
    # 81 + 25 + 100 = 206; overflow 40 → target 60 → "A"*27 + marker(73), but the marker's
    # "\n" is 2 bytes in JSON so one byte still overflows → target 59 from the original.
    result = retain([P("user", "A" * 100)], 206 - 40)
    assert texts(result) == ["A" * 26 + omitted_marker(74)]
    assert stats(result) == (1, 1, 0, 74, True, False)  # 74, not 73 + 74
    assert size(result.source) == 166


def test_shorten_longest_earliest_on_ties() -> None:
    messages = [
        P("user", "X" * 100, checkpoint=True),
        P("user", "Y" * 100, checkpoint=True),
        P("assistant", "z"),
    ]
    full = SHELL + 125 + 1 + 125 + 1 + 31  # 364
    result = retain(messages, full - 40)
    # X (earliest of the two longest) → target 60; then Y (now longest) twice with
    # overflow 1: 99 raw bytes are still 100 in JSON, so 98 is needed.
    assert texts(result) == [
        "X" * 27 + omitted_marker(73),
        "Y" * 65 + omitted_marker(35),
        "z",
    ]
    assert stats(result) == (3, 3, 0, 108, True, True)
    assert size(result.source) == full - 40


def test_shorten_after_dropping_everything_droppable() -> None:
    messages = [P("user", "old"), P("assistant", "B" * 200)]
    # after the drop: 81 + 30 + 200 = 311, overflow 100 → target 100 → r=66 (N=134, 100
    # bytes, but 101 in JSON) → overflow 1 → target 99 → r=65, N=135.
    result = retain(messages, SHELL + 30 + 100)
    assert texts(result) == ["B" * 65 + omitted_marker(135)]
    assert stats(result) == (2, 1, 1, 3 + 135, True, False)


def test_r_zero_edge_empties_the_text() -> None:
    # overflow 80 → target 20: not even the marker fits, so the text becomes empty
    result = retain([P("user", "A" * 100)], 206 - 80)
    assert texts(result) == [""]
    assert stats(result) == (1, 1, 0, 100, True, False)


def test_empty_conversation_fits() -> None:
    result = retain([], SHELL)
    assert result.source["conversation"] == []
    assert stats(result) == (0, 0, 0, 0, False, False)


@pytest.mark.parametrize(
    ("messages", "max_bytes"),
    [
        ([], SHELL - 1),  # no item to shorten
        ([P("user", "A" * 100)], SHELL + ITEM - 1),  # emptied, still too big
        ([P("user", "A", checkpoint=True), P("user", "B")], SHELL + 2 * ITEM),
    ],
)
def test_budget_exceeded(messages: list[ProjectedMessage], max_bytes: int) -> None:
    with pytest.raises(SessionReferenceError) as info:
        retain(messages, max_bytes)
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED


def test_budget_exceeded_by_a_huge_label() -> None:
    with pytest.raises(SessionReferenceError) as info:
        retain_source(
            session_id="s",
            label="<" * 1000,
            cwd="/",
            captured_through_seq=None,
            messages=[P("user", "x")],
            max_bytes=5000,
        )
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED


# --------------------------------------------------------------------------- reference model


def naive_retain(
    messages: list[ProjectedMessage], max_bytes: int
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The shared quadratic reference, with the spec-literal truncation above."""
    items = [NaiveItem(m.role, m.text, m.text, m.checkpoint) for m in messages]
    header = {"sessionId": "s", "label": "L", "cwd": None, "capturedThroughSeq": 7}
    return naive_retain_items(items, max_bytes, header, naive_truncate)


conversations = st.lists(
    st.builds(
        P,
        st.sampled_from(["user", "assistant"]),
        long_texts,
        st.booleans(),
    ),
    max_size=7,
)


def full_size(messages: list[ProjectedMessage]) -> int:
    conversation = [{"role": m.role, "text": m.text} for m in messages]
    return size(
        {
            "sessionId": "s",
            "label": "L",
            "cwd": None,
            "capturedThroughSeq": 7,
            "conversation": conversation,
        }
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[ProjectedMessage], int]:
    """A conversation and a budget anywhere from "hopeless" to "fits untouched"."""
    messages = draw(conversations)
    full = full_size(messages)
    near_full = st.integers(0, max(0, full // 3)).map(lambda cut: full + 2 - cut)
    return messages, draw(st.one_of(st.integers(max(0, SHELL - 2), full + 2), near_full))


def check_against_naive(messages: list[ProjectedMessage], max_bytes: int) -> None:
    try:
        expected = naive_retain(messages, max_bytes)
    except SessionReferenceError as err:
        with pytest.raises(SessionReferenceError) as info:
            retain(messages, max_bytes)
        assert info.value.code == err.code == SESSION_REFERENCE_BUDGET_EXCEEDED
        return
    result = retain(messages, max_bytes)
    assert stringify_tag_safe_json(result.source) == stringify_tag_safe_json(expected[0])
    assert stats(result)[:4] == expected[1]
    assert size(result.source) <= max_bytes


@settings(max_examples=400, deadline=None)
@given(cases())
def test_matches_naive_reference_byte_for_byte(case: tuple[list[ProjectedMessage], int]) -> None:
    check_against_naive(*case)


# Fewer, longer texts with budgets just below their size: the head/tail path is exercised.
shortening_conversations = st.lists(
    st.builds(
        P,
        st.sampled_from(["user", "assistant"]),
        st.tuples(
            st.lists(
                st.sampled_from(["a", "b", "c", "é", "😀", "<", "\ud800"]), min_size=20, max_size=80
            ),
            st.integers(1, 5),
        ).map(lambda pair: "".join(pair[0]) * pair[1]),
        st.booleans(),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(shortening_conversations, st.integers(0, 400))
def test_matches_naive_reference_when_shortening(
    messages: list[ProjectedMessage], cut: int
) -> None:
    check_against_naive(messages, max(0, full_size(messages) - cut))


@given(cases())
def test_invariants(case: tuple[list[ProjectedMessage], int]) -> None:
    messages, max_bytes = case
    try:
        result = retain(messages, max_bytes)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_BUDGET_EXCEEDED
        return
    s = result.stats
    assert size(result.source) <= max_bytes
    assert s.retained_messages + s.omitted_messages == s.original_messages == len(messages)
    assert s.truncated == (s.omitted_messages > 0 or s.omitted_bytes > 0)
    assert s.compacted == any(m.checkpoint for m in messages)
    kept = result.source["conversation"]
    if messages:
        assert kept and kept[-1]["role"] == messages[-1].role  # the newest is never dropped
    assert sum(m.checkpoint for m in messages) <= len(kept)
    total_bytes = sum(len(m.text.encode("utf-8", "surrogatepass")) for m in messages)
    retained_bytes = 0
    for item in kept:
        text = item["text"]
        marker_at = text.rfind("\n[…")
        retained_bytes += len(
            (text[:marker_at] if marker_at >= 0 else text).encode("utf-8", "surrogatepass")
        )
    assert retained_bytes + s.omitted_bytes == total_bytes
    originals = {m.text for m in messages}
    for item in kept:
        if item["text"] not in originals:  # shortened: valid UTF-8 even from lone surrogates
            item["text"].encode("utf-8")  # strict


# --------------------------------------------------------------------------- scale


def test_two_hundred_thousand_messages_are_not_quadratic() -> None:
    messages = [P("user" if i % 2 else "assistant", f"message {i} <é>") for i in range(200_000)]
    messages[1000] = P("user", "checkpoint " * 50, checkpoint=True)
    started = time.perf_counter()
    result = retain(messages, 65_536)
    elapsed = time.perf_counter() - started
    assert size(result.source) <= 65_536
    assert result.source["conversation"][-1]["text"] == "message 199999 <é>"
    assert result.source["conversation"][0]["text"] == "checkpoint " * 50
    assert elapsed < 20  # generous: a quadratic drop loop would take hours


def test_many_checkpoints_shorten_through_the_heap() -> None:
    # Nothing can be dropped, so every item is shortened (then still too big).
    messages = [P("user", f"summary {i} " * 3, checkpoint=True) for i in range(100_000)]
    with pytest.raises(SessionReferenceError) as info:
        retain(messages, 65_536)
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED


# --------------------------------------------------------------------------- texts in UTF-8


def check_encoded(
    messages: list[ProjectedMessage], max_bytes: int, skipped: tuple[int, int] = (0, 0)
) -> None:
    """``retain_encoded`` then ``render_reference_prompt_encoded`` (prepare's lean path)
    give byte for byte what the plain algorithm on ``str`` (``plain_retain_source``, the
    skipped messages added to its stats) then ``render_reference_prompt`` do."""
    args: dict[str, Any] = {
        "session_id": "s<\ud800",
        "label": 'L"</referenced-sessions>',
        "cwd": "/é",
        "captured_through_seq": 7,
        "skipped_messages": skipped[0],
        "skipped_bytes": skipped[1],
        "max_bytes": max_bytes,
    }
    try:
        expected = plain_retain_source_after(messages=messages, **args)
    except SessionReferenceError as err:
        with pytest.raises(SessionReferenceError) as info:
            retain_encoded(messages=[encode_message(m) for m in messages], **args)
        assert info.value.code == err.code and str(info.value) == str(err)
        return
    lean = [retain_encoded(messages=[encode_message(m) for m in messages], **args)]
    assert lean[0].stats == expected.stats
    lean.append(retain_encoded(messages=[encode_message(m) for m in messages], **args))
    assert render_reference_prompt_encoded(lean) == render_reference_prompt(
        [expected.source, expected.source]
    )
    assert lean == []  # emptied as it was rendered


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(0, 3), st.integers(0, 10**6))
def test_encoded_matches_retain_source(
    case: tuple[list[ProjectedMessage], int], skipped: int, skipped_bytes: int
) -> None:
    check_encoded(case[0], case[1] + 120, (skipped, skipped_bytes if skipped else 0))


@settings(max_examples=100, deadline=None)
@given(shortening_conversations, st.integers(0, 400))
def test_encoded_matches_retain_source_when_shortening(
    messages: list[ProjectedMessage], cut: int
) -> None:
    check_encoded(messages, max(0, full_size(messages) + 120 - cut))


@pytest.mark.parametrize(
    "text",
    [
        "plain 中文 text",
        'a "quote"',
        "back\\slash",
        "tab\tnew\nline\x00\x1f\x7f",
        "<tag>",
        "\ud800 lone",
        "\udfff",
        "한국어 \ud7a3",
        "😀 \u2028 \u2029",
        "",
    ],
)
def test_encoded_texts_escape_as_stringify(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    expected = stringify_tag_safe_json(text)
    assert b"".join(tag_safe_utf8_parts(data)) == expected.encode()
    assert tag_safe_utf8_size(data) == tag_safe_json_size(text) == len(expected.encode())


def test_render_encoded_of_no_source() -> None:
    assert render_reference_prompt_encoded([]) == render_reference_prompt([])

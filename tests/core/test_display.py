"""Untrusted text never reaches the terminal with control characters in it."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from core.display import escape_control, relative_age, single_line
from core.timestamps import MAX_EPOCH_MS
from tests.terminal_safety import (
    ALWAYS_CATEGORIES,
    EXTRA_INVISIBLE,
    VS15,
    VS16,
    ZWJ,
    offending,
)

DANGEROUS = (
    {chr(c) for c in range(0x20) if c not in (0x09, 0x0A)}
    | {chr(c) for c in range(0x7F, 0xA0)}
    | {
        "\u202a",
        "\u202b",
        "\u202c",
        "\u202d",
        "\u202e",
        "\u2066",
        "\u2067",
        "\u2068",
        "\u2069",
        "\u200e",
        "\u200f",
        "\u061c",
        "\u2028",
        "\u2029",
    }
)


def test_escapes() -> None:
    assert escape_control("plain [bold]x[/]") == "plain [bold]x[/]"
    assert escape_control("a\x1b[31mb") == "a\\x1b[31mb"
    assert escape_control("bell\x07 nul\x00 csi\x9b") == "bell\\x07 nul\\x00 csi\\x9b"
    assert escape_control("rtl\u202eevil") == "rtl\\u202eevil"
    assert escape_control("line\nnext\ttab\r") == "line\nnext\ttab\\r"
    assert escape_control("lone \ud800") == "lone \\ud800"
    assert escape_control("ünï 😀") == "ünï 😀"
    assert single_line("a\nb\tc") == "a\\nb\\tc"
    assert single_line("abcdef", 4) == "abc…"


@given(st.text())
def test_no_dangerous_character_survives(text: str) -> None:
    multi = escape_control(text)
    one = single_line(text)
    assert not (set(multi) & DANGEROUS)
    assert not (set(one) & (DANGEROUS | {"\n", "\t"}))
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in one + multi)
    one.encode("utf-8")


def test_relative_age() -> None:
    now = 10_000_000_000
    assert relative_age(now, now) == "just now"
    assert relative_age(now - 59_000, now) == "just now"
    assert relative_age(now - 5 * 60_000, now) == "5m ago"
    assert relative_age(now - 3 * 3_600_000, now) == "3h ago"
    assert relative_age(now - 2 * 86_400_000, now) == "2d ago"
    assert relative_age(now - 15 * 86_400_000, now) == "2w ago"
    assert relative_age(now - 400 * 86_400_000, now) == "1y ago"
    assert relative_age(now + 50_000, now) == "just now"


def test_a_future_time_is_shown_as_its_date() -> None:
    now = 1_800_000_000_000
    assert relative_age(now + 59_000, now) == "just now"  # a little skew
    ahead = now + 400 * 86_400_000
    assert relative_age(ahead, now) == datetime.fromtimestamp(ahead / 1000).strftime("%Y-%m-%d")
    assert relative_age(MAX_EPOCH_MS, now) in ("9999-12-31", "9999-12-30")


# --------------------------------------------------------------------------- issue 12 §3

HOSTILE_ALPHABET = st.sampled_from(
    [
        "a",
        " ",
        "\n",
        "\t",
        "\x1b",
        "\x07",
        "\x9b",
        "\x7f",
        "\u202e",
        "\u2066",
        "\u200b",
        ZWJ,
        VS15,
        VS16,
        "\ufe00",
        "\U000e0041",
        "\U000e007f",
        "\U000e0100",
        "\ud83d",
        "\udce9",
        "\u2028",
        "\xad",
        "\u3164",
        "😀",
        "👩",
        "\U0001f3fd",
        "🌈",
        "❤",
        "漢",
        "\\",
    ]
)


@given(st.text(HOSTILE_ALPHABET) | st.text())
def test_no_hidden_or_reordering_character_is_ever_shown(text: str) -> None:
    from core.display import mask_control, remove_control

    multi = escape_control(text)
    one = single_line(text)
    assert offending(multi, keep="\n\t") == []
    assert offending(one) == []
    assert offending(single_line(text, 7)) == []
    assert offending(mask_control(text), keep="\t") == []
    assert len(mask_control(text)) == len(text)
    assert offending(remove_control(text)) == []
    assert escape_control(multi) == multi and single_line(one) == one  # idempotent
    one.encode("utf-8")


def test_the_table_covers_every_format_and_control_character() -> None:
    """The hard-coded class in core.display must cover what this Python's Unicode says."""
    import unicodedata

    from core.display import mask_control

    chars = [
        chr(code)
        for code in range(0x110000)
        if (unicodedata.category(chr(code)) in ALWAYS_CATEGORIES or code in EXTRA_INVISIBLE)
        and chr(code) not in "\t" + ZWJ
    ]
    masked = mask_control("x" + "x".join(chars))
    missed = [hex(ord(c)) for c, shown in zip(chars, masked[1::2], strict=True) if c == shown]
    assert missed == []


def test_tags_selectors_and_invisible_characters_become_visible() -> None:
    hidden = "title" + "".join(chr(0xE0000 + ord(c)) for c in "IGNORE") + "\U000e007f"
    assert escape_control(hidden) == (
        "title\\U000e0049\\U000e0047\\U000e004e\\U000e004f\\U000e0052\\U000e0045\\U000e007f"
    )
    assert escape_control("a\u200bb\u2060c\xadd\u3164e") == "a\\u200bb\\u2060c\\xadd\\u3164e"
    assert escape_control("x\ufe00\U000e0100") == "x\\ufe00\\U000e0100"
    assert escape_control("x\ufe0f\ufe0f") == "x\ufe0f\\ufe0f"  # a run could carry bytes
    assert escape_control("\ufe0f start") == "\\ufe0f start"
    assert escape_control("a\u200db") == "a\\u200db"


def test_ordinary_text_cjk_and_common_emoji_are_unchanged() -> None:
    for text in (
        "naïve café — «quotes» ½ ✓",
        "漢字かなカナ 한국어 العربية עברית",
        "❤️ ☺️ 1️⃣ 👍🏽 👨‍👩‍👧 🏳️‍🌈 👩🏽‍💻 🇫🇷",
        "tab\tand\nnewline",
    ):
        assert escape_control(text) == text


def test_terminal_json_escapes_and_parses_back_to_the_same_value() -> None:
    import json

    from core.display import terminal_json
    from core.jsoncodec import dumps_js

    value = {
        "t": "\x1b]52;c;aGk=\x07 \u202e \U000e0041 \x9b \x7f \ud800 😀 \u2028 \ufe0f",
        "k\x1b": ["é", "\u200d"],
    }
    out = terminal_json(value)
    assert out.isascii() or offending(out) == []
    assert not any(c in out for c in "\x1b\x07\u202e\U000e0041\x9b\x7f\u2028\ufe0f\u200d")
    assert json.loads(out) == value
    assert "😀" in out and "é" in out  # ordinary non-ASCII stays readable
    assert terminal_json(["plain"]) == dumps_js(["plain"])


@given(st.recursive(st.text(HOSTILE_ALPHABET) | st.text(), lambda c: st.lists(c, max_size=3)))
def test_terminal_json_is_lossless(value: object) -> None:
    import json

    from core.display import terminal_json
    from core.jsoncodec import dumps_js

    out = terminal_json(value)
    # A standard parser reads it exactly as it reads dumps_js's output (which already joins
    # two adjacent escaped lone surrogates into one character: JSON cannot tell them apart).
    assert json.loads(out) == json.loads(dumps_js(value))
    assert offending(out) == []

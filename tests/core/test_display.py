"""Untrusted text never reaches the terminal with control characters in it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.display import escape_control, relative_age, single_line

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

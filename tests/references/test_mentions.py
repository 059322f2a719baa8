"""SPEC §4.2: formatting and parsing mentions, and the spans the composer styles."""

from __future__ import annotations

import contextlib
import itertools
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from core.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    ParsedSessionReferenceText,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceSpan,
    decode_session_reference_uri,
    encode_session_reference_uri,
    find_session_reference_spans,
    format_session_reference_mention,
    parse_session_reference_text,
)
from core.surrogates import merge_surrogate_pairs
from tests.references.strategies import any_text, session_ids

T = encode_session_reference_uri("target")  # dsh-session:InRhcmdldCI
U = encode_session_reference_uri("other")


def parse(text: str) -> tuple[str, list[tuple[str, str | None]]]:
    parsed = parse_session_reference_text(text)
    return parsed.text, [(r.session_id, r.label) for r in parsed.references]


# --------------------------------------------------------------------------- format


def test_input_is_frozen_with_default_label() -> None:
    ref = SessionReferenceInput("x")
    assert ref.label is None
    with pytest.raises(AttributeError):
        ref.session_id = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (SessionReferenceInput("target"), f"@[target]({T})"),
        (SessionReferenceInput("target", "My chat"), f"@[My chat]({T})"),
        (SessionReferenceInput("target", "a]b\\c"), f"@[a\\]b\\\\c]({T})"),
        (SessionReferenceInput("target", "[x](y)"), f"@[[x\\](y)]({T})"),
        (SessionReferenceInput("a]b\\c"), "@[a\\]b\\\\c](dsh-session:ImFdYlxcYyI)"),
        (SessionReferenceInput("target", ""), f"@[]({T})"),
    ],
)
def test_format(ref: SessionReferenceInput, expected: str) -> None:
    assert format_session_reference_mention(ref) == expected


@given(session_ids, st.one_of(st.none(), any_text))
def test_format_then_parse_round_trips(session_id: str, label: str | None) -> None:
    mention = format_session_reference_mention(SessionReferenceInput(session_id, label))
    # (a surrogate pair in the id or the label is its character: SPEC 4.1)
    whole = merge_surrogate_pairs(session_id)
    shown = whole if label is None else merge_surrogate_pairs(label)
    parsed = parse_session_reference_text(f"see {mention}.")
    assert parsed == ParsedSessionReferenceText(
        f"see @{shown}.", (SessionReferenceInput(whole, shown),)
    )
    [span] = find_session_reference_spans(f"see {mention}.")
    assert (span.start, span.end, span.kind, span.session_id) == (
        4,
        4 + len(mention),
        "mention",
        whole,
    )


# --------------------------------------------------------------------------- parse


@pytest.mark.parametrize(
    ("text", "expected_text", "expected_refs"),
    [
        ("", "", []),
        ("plain text @ [x] (y)", "plain text @ [x] (y)", []),
        (f"@[Target]({T})", "@Target", [("target", "Target")]),
        (f"a @[x]({T}) b @[y]({U}) c", "a @x b @y c", [("target", "x"), ("other", "y")]),
        (f"@[x]({T})@[x]({T})", "@x@x", [("target", "x"), ("target", "x")]),  # dups kept
        # label escapes: any char may be escaped
        (f"@[a\\]b\\\\c\\d]({T})", "@a]b\\cd", [("target", "a]b\\cd")]),
        (f"@[line\nbreak]({T})", "@line\nbreak", [("target", "line\nbreak")]),
        (f"@[]({T})", "@", [("target", "")]),
        (f"@[[nested]({T})", "@[nested", [("target", "[nested")]),
        # bare tokens: no word boundary needed, payload ends at the first non-base64url char
        (T, "@target", [("target", "target")]),
        (f"x{T}y", "x@target", None),  # "InRhcmdldCIy" is not canonical → raises (below)
        (f"({T})", "(@target)", [("target", "target")]),
        (f"see {T}.", "see @target.", [("target", "target")]),
        (f"see {T}!?,;:", "see @target!?,;:", [("target", "target")]),
        (f"word{T} ", "word@target ", [("target", "target")]),
        (f"{T}\n{U}", "@target\n@other", [("target", "target"), ("other", "other")]),
        # "dsh-session:" followed by nothing or punctuation is ordinary text
        ("dsh-session:", "dsh-session:", []),
        ("dsh-session: x", "dsh-session: x", []),
        ("dsh-session:.", "dsh-session:.", []),
        ("see dsh-session:!", "see dsh-session:!", []),
        # a mention counts only with its closing ")"; otherwise its parts are text
        (f"@[x]({T}", "@[x](@target", [("target", "target")]),
        (f"@[x]({T} more)", "@[x](@target more)", [("target", "target")]),
        (f"@[x]({T}\n)", "@[x](@target\n)", [("target", "target")]),
        ("@[x](dsh-session:", "@[x](dsh-session:", []),
        ("@[x](dsh-session: )", "@[x](dsh-session: )", []),
        (f"@[x] ({T})", "@[x] (@target)", [("target", "target")]),
        (f"@[x]({T}", "@[x](@target", [("target", "target")]),
        (f"@[unterminated {T}", "@[unterminated @target", [("target", "target")]),
        (f"@[x\\]({T})", "@[x\\](@target)", [("target", "target")]),  # "]" escaped: no label end
        ("@[x]\\", "@[x]\\", []),
        ("@[x\\", "@[x\\", []),
        # other links are not mentions
        ("@[x](https://example.com)", "@[x](https://example.com)", []),
        ("[x](dsh-session:InRhcmdldCI)", "[x](@target)", [("target", "target")]),
        (f"@@[x]({T})", "@@x", [("target", "x")]),
    ],
)
def test_parse(text: str, expected_text: str, expected_refs: list[tuple[str, str]] | None) -> None:
    if expected_refs is None:
        with pytest.raises(SessionReferenceError):
            parse(text)
        return
    assert parse(text) == (expected_text, expected_refs)


@pytest.mark.parametrize(
    "text",
    [
        "@[x](dsh-session:)",  # a mention with an empty payload
        "@[x](dsh-session:!!)",
        "@[x](dsh-session:InRhcmdldCI=)",
        f"@[x]({T}(y)",  # the URI runs to the ")" and so holds "(y"
        "@[x](dsh-session:InRhcmdldCJ)",
        "dsh-session:InRhcmdldCJ",  # bare, not canonical
        "dsh-session:a",
        "dsh-session:dsh-session:",  # the payload "dsh-session" is not canonical
        f"{T}-",  # "-" and "_" belong to the payload alphabet
        f"{T}_",
        f"ok {T} then dsh-session:abc",
    ],
)
def test_malformed_references_raise(text: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        parse_session_reference_text(text)
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


# JavaScript's \s (SPEC §4.2), spelled out: Python's \s and str.isspace differ from it.
JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)


@pytest.mark.parametrize("space", sorted(JS_WHITESPACE))
def test_javascript_whitespace_ends_the_uri(space: str) -> None:
    # No ")" right after the URI: the parts are text and the URI is a bare token.
    assert parse(f"@[x]({T}{space})") == (f"@[x](@target{space})", [("target", "target")])


@pytest.mark.parametrize("other", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u180e", "\u200b"])
def test_other_spaces_do_not_end_the_uri(other: str) -> None:
    # The URI runs on to the ")", so the mention is there and its URI is malformed.
    with pytest.raises(SessionReferenceError) as info:
        parse_session_reference_text(f"@[x]({T}{other})")
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    [span] = find_session_reference_spans(f"@[x]({T}{other})")
    assert (span.kind, span.uri, span.valid) == ("mention", T + other, False)


def test_exactly_javascript_whitespace_ends_the_uri_over_all_of_unicode() -> None:
    ends = set()
    for code in [*range(0x3100), *range(0xFE00, 0x10000), 0x1F600, 0xE0041]:
        char = chr(code)
        if char == ")":
            continue
        [span, *_] = find_session_reference_spans(f"@[x]({T}{char})")
        if span.kind == "bare":
            ends.add(char)
    assert ends == JS_WHITESPACE


@pytest.mark.parametrize("newline", ["\n", "\r", "\u2028", "\u2029"])
def test_a_backslash_does_not_escape_a_line_break(newline: str) -> None:
    text = f"@[a\\{newline}b]({T})"
    assert parse(text) == (f"@[a\\{newline}b](@target)", [("target", "target")])
    assert [s.kind for s in find_session_reference_spans(text)] == ["bare"]
    # An escaped backslash before the line break is fine: the line break is plain text.
    assert parse(f"@[a\\\\{newline}b]({T})") == (f"@a\\{newline}b", [("target", f"a\\{newline}b")])


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x85", "\ufeff", "\ud800", "😀"])
def test_a_backslash_escapes_any_other_character(char: str) -> None:
    assert parse(f"@[a\\{char}b]({T})") == (f"@a{char}b", [("target", f"a{char}b")])


def test_a_mention_after_a_label_stopped_by_a_line_break_is_found() -> None:
    # The first label cannot go on at "\\\n"; the "@[" after it starts a mention of its own.
    text = f"@[a\\\nb @[c]({T}) @[d\\\n"
    assert parse(text) == ("@[a\\\nb @c @[d\\\n", [("target", "c")])
    [span] = find_session_reference_spans(text)
    assert (span.start, span.label) == (text.index("@[c]"), "c")


def test_parse_rejects_non_str() -> None:
    with pytest.raises(SessionReferenceError):
        parse_session_reference_text(None)  # type: ignore[arg-type]


def test_bare_token_with_weird_id() -> None:
    session_id = "x) \ud800 ]"
    uri = encode_session_reference_uri(session_id)
    assert parse(f"[{uri}]") == (f"[@{session_id}]", [(session_id, session_id)])


# --------------------------------------------------------------------------- spans


def test_spans_are_non_raising_and_mark_invalid() -> None:
    text = f"a @[Lbl\\]]({T}) b dsh-session:bad. @[z](dsh-session:!!) {U}"
    spans = find_session_reference_spans(text)
    assert spans == [
        SessionReferenceSpan(2, 2 + len(f"@[Lbl\\]]({T})"), "mention", "Lbl]", T, "target"),
        SessionReferenceSpan(
            text.index("dsh-session:bad"),
            text.index("dsh-session:bad") + len("dsh-session:bad"),
            "bare",
            None,
            "dsh-session:bad",
            None,
        ),
        SessionReferenceSpan(
            text.index("@[z]"), text.index("@[z]") + 20, "mention", "z", "dsh-session:!!", None
        ),
        SessionReferenceSpan(text.index(U), len(text), "bare", "other", U, "other"),
    ]
    assert [s.valid for s in spans] == [True, False, False, True]
    for span in spans:
        assert text[span.start : span.end].endswith(
            span.uri + (")" if span.kind == "mention" else "")
        )


def test_spans_match_parse_for_valid_text() -> None:
    text = f"x @[a]({T}) y {U}, z"
    spans = find_session_reference_spans(text)
    parsed = parse_session_reference_text(text)
    assert [(s.session_id, s.label) for s in spans] == [
        (r.session_id, r.label) for r in parsed.references
    ]


# --------------------------------------------------------------------------- fuzzing

FRAGMENTS = [
    "@",
    "@[",
    "[",
    "]",
    "](",
    "(",
    ")",
    "\\",
    " ",
    "\n",
    ".",
    "x",
    "é",
    "\ud800",
    "dsh-session:",
    "dsh-session",
    "InRhcmdldCI",
    "InRhcmdldCJ",
    "IiI",
    "-",
    "_",
    T,
    U,
    f"@[l]({T})",
    f"@[l\\]]({U})",
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join))
def test_parser_raises_only_session_reference_errors(text: str) -> None:
    spans = find_session_reference_spans(text)  # never raises
    for a, b in itertools.pairwise(spans):
        assert a.end <= b.start
    try:
        parsed = parse_session_reference_text(text)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE
        assert any(not s.valid for s in spans)
        return
    assert all(s.valid for s in spans)
    assert [(s.session_id, s.label) for s in spans] == [
        (r.session_id, r.label) for r in parsed.references
    ]
    # Rebuild the readable text from the spans: what lies between them is kept verbatim.
    rebuilt, pos = [], 0
    for span in spans:
        rebuilt += [text[pos : span.start], f"@{span.label}"]
        pos = span.end
    assert parsed.text == "".join([*rebuilt, text[pos:]])


# SPEC §4.2 read literally, as the one regular expression the reference scans with (its
# "u" flag: "." is any code point but a line terminator), with \s spelled out as in JS.
LITERAL_MENTION = re.compile(
    r"@\[((?:\\[^\n\r\u2028\u2029]|[^\\\]])*)\]\((dsh-session:[^"
    + "".join(sorted(JS_WHITESPACE))
    + r")]*)\)|(dsh-session:[A-Za-z0-9_-]+)"
)


def literal_parse(text: str) -> tuple[str, list[tuple[str, str]]]:
    text = merge_surrogate_pairs(text)  # SPEC §4.1: in user input a pair is its character
    refs: list[tuple[str, str]] = []

    def replace(m: re.Match[str]) -> str:
        session_id = decode_session_reference_uri(m.group(2) or m.group(3))
        label = session_id if m.group(1) is None else re.sub(r"\\(.)", r"\1", m.group(1))
        refs.append((session_id, label))
        return "@" + label

    return LITERAL_MENTION.sub(replace, text), refs


EDGE_FRAGMENTS = [
    *FRAGMENTS,
    *sorted(JS_WHITESPACE),
    "\x1c",
    "\x1f",
    "\x85",
    "\u200b",
    "\r",
    "\u2028",
    "\u2029",
    "\\\n",
    "\\\u2028",
    "😀",
    "\udc00",
]


@given(st.lists(st.sampled_from(EDGE_FRAGMENTS), max_size=14).map("".join))
@example(f"@[a\\\nb]({T})")
@example(f"@[\\\u2029@[l]({T})")
@example(f"@[x]({T}\ufeff)")
@example(f"@[x]({T}\x1c)")
@example(f"@[x]({T}\x85)")
@example("\ud800\udc00")  # a pair of EDGE_FRAGMENTS' lone surrogates: one character
def test_parser_agrees_with_the_literal_regular_expression(text: str) -> None:
    try:
        expected: object = literal_parse(text)
    except SessionReferenceError as err:
        expected = err.code
    try:
        got: object = parse(text)
    except SessionReferenceError as err:
        got = err.code
    assert got == expected


@given(any_text)
def test_parser_on_arbitrary_text(text: str) -> None:
    try:
        parse_session_reference_text(text)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE


@pytest.mark.parametrize(
    "text",
    [
        "@[" * 50_000,
        "@[" * 25_000 + f"](dsh-session:{'A' * 50_000}",
        "@[\\" * 30_000,
        "@[x\\\n" * 30_000,  # every label stops at a backslash before a line break
        "dsh-session:" * 20_000,
    ],
)
def test_adversarial_text_is_linear(text: str) -> None:
    # Quadratic scanning would take minutes here; the suite timeout would catch it.
    with contextlib.suppress(SessionReferenceError):
        parse_session_reference_text(text)
    find_session_reference_spans(text)

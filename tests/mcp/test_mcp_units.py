"""The pieces of ``dsh mcp`` that need no server: what reaches the SDK from the client,
what leaves for it, and the argument checks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.cli.common import CliError
from tui.mcp.inbound import lone_surrogates_replaced
from tui.mcp.server import wire_safe
from tui.mcp.sessions import MAX_LIMIT, check_limit


def test_a_line_without_an_escaped_surrogate_is_passed_as_it_is() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    assert lone_surrogates_replaced(line) is line
    assert lone_surrogates_replaced(b"not json \\ud800\n") == b"not json \\ud800\n"


def test_escaped_lone_surrogates_become_u_fffd_and_pairs_the_character() -> None:
    line = b'{"a":"\\ud800x","\\udc00":["\\ud83d\\ude80","\\\\ud800"]}\n'
    fixed = lone_surrogates_replaced(line)
    assert fixed.endswith(b"\n") and fixed.count(b"\n") == 1
    assert json.loads(fixed) == {"a": "\ufffdx", "\ufffd": ["\U0001f680", "\\ud800"]}
    fixed.decode("utf-8")  # valid UTF-8: the SDK's parser takes it


@given(st.recursive(st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_any_json_value_reaches_the_sdk_as_valid_utf8(value: object) -> None:
    line = json.dumps({"v": value}).encode("ascii") + b"\n"
    fixed = lone_surrogates_replaced(line)
    fixed.decode("utf-8")
    assert json.loads(fixed)["v"] == wire_safe(value)


def test_wire_safe_replaces_lone_surrogates_everywhere() -> None:
    value = {"k\ud800": ["a\udfff", ("b", 1, None)], "ok": "é🚀"}
    assert wire_safe(value) == {"k\ufffd": ["a\ufffd", ["b", 1, None]], "ok": "é🚀"}
    json.dumps(wire_safe(value), ensure_ascii=False).encode("utf-8")
    assert wire_safe("\ud83d\ude80") == "\U0001f680"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, "limit must be a positive number, not 0"),
        (-1, "limit must be a positive number, not -1"),
        (MAX_LIMIT + 1, f"limit must be at most {MAX_LIMIT}, not {MAX_LIMIT + 1}"),
        (True, "limit must be a whole number, not True"),
        ("3", "limit must be a whole number, not '3'"),
    ],
)
def test_check_limit_words_as_the_cli(value: object, words: str) -> None:
    with pytest.raises(CliError) as info:
        check_limit("limit", value)
    assert str(info.value) == words


def test_check_limit_passes_1_to_the_maximum() -> None:
    assert check_limit("limit", 1) == 1 and check_limit("limit", MAX_LIMIT) == MAX_LIMIT

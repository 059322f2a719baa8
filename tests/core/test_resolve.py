"""Naming sessions: exact id, exact unique title, unique id prefix."""

from __future__ import annotations

import pytest

from core.log import SessionHeader
from core.query import SessionTitle
from core.resolve import SessionNameError, resolve_session_name

H = [
    SessionHeader("abc123", 3),
    SessionHeader("abd456", 2),
    SessionHeader("xyz", 1),
    SessionHeader("dup", 0),
]
T = {
    "xyz": SessionTitle("Plans", 1, 1, {"kind": "user"}),
    "abd456": SessionTitle("abc123-ish", 1, 1, {"kind": "user"}),
    "dup": SessionTitle("Same", 1, 1, {"kind": "user"}),
    "abc123": SessionTitle("Same", 1, 1, {"kind": "user"}),
}


def test_exact_id_beats_everything() -> None:
    assert resolve_session_name("abc123", H, T).id == "abc123"


def test_exact_title() -> None:
    assert resolve_session_name("Plans", H, T).id == "xyz"
    assert resolve_session_name("abc123-ish", H, T).id == "abd456"


def test_unique_prefix() -> None:
    assert resolve_session_name("abd", H, T).id == "abd456"
    assert resolve_session_name("x", H, T).id == "xyz"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ab", "2 session ids start"),
        ("Same", "2 sessions are titled"),
        ("nope", "no session matches"),
        ("", "no session matches"),
    ],
)
def test_ambiguous_or_missing(name: str, message: str) -> None:
    with pytest.raises(SessionNameError, match=message):
        resolve_session_name(name, H, T)

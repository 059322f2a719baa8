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
        ("ab", r"'ab' names 2 sessions \(2 by id prefix\)"),
        ("Same", r"'Same' names 2 sessions \(2 by title\)"),
        ("nope", "no session matches"),
        ("", "no session matches"),
    ],
)
def test_ambiguous_or_missing(name: str, message: str) -> None:
    with pytest.raises(SessionNameError, match=message):
        resolve_session_name(name, H, T)


def test_title_of_one_and_id_prefix_of_another_is_ambiguous() -> None:
    headers = [SessionHeader("abc-1", 2), SessionHeader("zzz", 1)]
    titles = {"zzz": SessionTitle("abc", 1, 1, {"kind": "user"})}
    with pytest.raises(SessionNameError, match=r"\(1 by title, 1 by id prefix\)") as info:
        resolve_session_name("abc", headers, titles)
    assert [(h.id, title) for h, title in info.value.matches] == [("abc-1", None), ("zzz", "abc")]
    # Either one is still named by its full id.
    assert resolve_session_name("abc-1", headers, titles).id == "abc-1"
    assert resolve_session_name("zzz", headers, titles).id == "zzz"


def test_a_full_id_names_its_session_even_when_another_has_it_as_title() -> None:
    headers = [SessionHeader("x", 2), SessionHeader("y", 1)]
    titles = {"y": SessionTitle("x", 1, 1, {"kind": "user"})}
    assert resolve_session_name("x", headers, titles).id == "x"

"""The profile switch and the fork origin as a reader sees them (issue 32): one safe line
each from data that may be anything, else ``None`` (shown as any unknown event)."""

from __future__ import annotations

from typing import Any

import pytest

from core.log import SESSION_FORK, SESSION_PROFILE, Event, SessionHeader, user_message
from tests.terminal_safety import HOSTILE, assert_terminal_safe
from tui.shared.export import markdown_lines
from tui.shared.history import whole_history
from tui.shared.logevents import ForkOrigin, fork_line, fork_origin, log_event_line, profile_line


def logged(seq: int, kind: str, data: dict[str, Any], surface_op: Any = None) -> Event:
    return Event(seq, kind, 1_700_000_000_000 + seq, data, surface_op)


def test_a_profile_switch_reads_as_one_line() -> None:
    data = {"profile": "work", "provider": "openai", "model": "deepseek-chat"}
    assert profile_line(logged(3, SESSION_PROFILE, data)) == "profile: work (openai, deepseek-chat)"
    assert profile_line(logged(3, SESSION_PROFILE, {"profile": "bare"})) == "profile: bare"
    hostile = {"profile": f"p{HOSTILE}", "provider": HOSTILE, "model": 7}
    line = profile_line(logged(3, SESSION_PROFILE, hostile))
    assert line is not None and line.startswith("profile: p\\x1b[2J")
    assert_terminal_safe(line, "profile line")
    assert "\n" not in line and "\u2028" not in line


@pytest.mark.parametrize(
    "data",
    [{}, {"profile": None}, {"profile": 3}, {"profile": ["work"]}],
)
def test_a_profile_event_that_names_none_is_not_read(data: dict[str, Any]) -> None:
    assert profile_line(logged(1, SESSION_PROFILE, data)) is None
    assert log_event_line(logged(1, SESSION_PROFILE, data)) is None


def test_a_fork_origin_reads_as_one_line() -> None:
    fork = logged(0, SESSION_FORK, {"parent": {"id": f"a{HOSTILE}", "seq": 12}})
    assert fork_origin(fork) == ForkOrigin(f"a{HOSTILE}", 12)
    line = fork_line(fork)
    assert line is not None and line.endswith(" at seq 12") and line.startswith("forked from a")
    assert_terminal_safe(line, "fork line")
    assert fork_origin(None) is None
    assert fork_origin(logged(0, SESSION_PROFILE, {"parent": {"id": "a", "seq": 1}})) is None


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"parent": "a"},
        {"parent": {"id": "a"}},
        {"parent": {"id": 1, "seq": 1}},
        {"parent": {"id": "a", "seq": "1"}},
        {"parent": {"id": "a", "seq": True}},
        {"parent": {"id": "a", "seq": 1.0}},
    ],
)
def test_a_malformed_fork_event_claims_no_parent(data: dict[str, Any]) -> None:
    assert fork_origin(logged(0, SESSION_FORK, data)) is None
    assert log_event_line(logged(0, SESSION_FORK, data)) is None


def test_the_markdown_export_shows_both_in_the_order_written() -> None:
    log = [
        logged(0, SESSION_FORK, {"parent": {"id": "parent-1", "seq": 4}}),
        logged(1, "user/message", user_message("hello"), "append"),
        logged(2, SESSION_PROFILE, {"profile": "work", "provider": "openai", "model": "m"}),
        logged(3, "session/title", {"title": "t"}),
        logged(4, "other/thing", {"x": 1}),
    ]
    history, taken = whole_history(log)
    assert [e.seq for e in history] == [0, 1, 2]  # no title, no unknown type
    lines = list(markdown_lines(SessionHeader("s", 1_700_000_000_000), None, history, taken))
    body = [line for line in lines if line.startswith(("_", "## ", ">"))]
    assert body[0].startswith("_forked from parent-1 at seq 4 · ")
    assert body[1].startswith("## You · ") and body[2] == "> hello"
    assert body[3].startswith("_profile: work (openai, m) · ")

"""The small pieces behind the newcomer fixes, without a UI: the kept UI state, the atomic
write, the screenshot file, and the sidebar's order by last activity."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.log import SessionHeader
from tui.app.screenshot import save_screenshot_file
from tui.app.sidebar.sidebar import NEW_SESSION_LABEL, SessionEntry, by_last_activity
from tui.app.uistate import UiState, load_ui_state, save_ui_state, write_text_atomically


def test_ui_state_round_trip_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tui.json"
    assert load_ui_state(path) == UiState()
    save_ui_state(path, UiState(theme="nord"))
    assert load_ui_state(path) == UiState(theme="nord")
    for bad in ("", "[1, 2]", '{"theme": 3}', "{not json"):
        path.write_text(bad, encoding="utf-8")
        assert load_ui_state(path) == UiState()
    assert [p.name for p in path.parent.iterdir()] == ["tui.json"], "no temporary file left"


def test_open_sessions_round_trip_bounded_and_odd_ids(tmp_path: Path) -> None:
    path = tmp_path / "tui.json"
    state = UiState(theme="nord")
    for n in range(40):
        state = state.with_open_session(f"/db/{n}", f"s{n}")
    state = state.with_open_session("/db/odd", "id \udcff\x00 🚀")  # any str is an id
    save_ui_state(path, state)
    loaded = load_ui_state(path)
    assert loaded == state and loaded.theme == "nord"
    assert loaded.open_session("/db/odd") == "id \udcff\x00 🚀"
    assert loaded.open_session("/db/0") is None  # the least recently used are forgotten
    assert len(loaded.open_sessions) == 32
    path.write_text('{"theme": "nord", "open_sessions": {"/db": 3, "/x": "y"}}', "utf-8")
    assert load_ui_state(path) == UiState(theme="nord", open_sessions={"/x": "y"})


def test_atomic_write_keeps_the_old_file_when_it_fails(tmp_path: Path) -> None:
    path = tmp_path / "tui.json"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(path, "\udcff")  # cannot be encoded: fails mid-write
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["tui.json"]


def test_screenshot_never_overwrites_and_falls_back(tmp_path: Path) -> None:
    downloads = tmp_path / "Downloads"
    first = save_screenshot_file("<svg/>", "shot.svg", [downloads])
    second = save_screenshot_file("<svg>2</svg>", "shot.svg", [downloads])
    assert first == downloads / "shot.svg" and second == downloads / "shot (2).svg"
    assert first.read_text(encoding="utf-8") == "<svg/>"
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    fallback = save_screenshot_file("<svg/>", "shot.svg", [blocker / "Downloads", tmp_path])
    assert fallback == tmp_path / "shot.svg"
    with pytest.raises(OSError):
        save_screenshot_file("<svg/>", "shot.svg", [blocker / "Downloads"])


def test_order_by_last_activity_then_creation_then_id() -> None:
    def entry(sid: str, created: int, active: int | None) -> SessionEntry:
        return SessionEntry(SessionHeader(sid, created, None), None, active)

    entries = [
        entry("old-but-used", 1, 500),
        entry("new-empty", 400, None),
        entry("b-tie", 100, 300),
        entry("a-tie", 100, 300),
        entry("newer-tie", 200, 300),
    ]
    assert [e.header.id for e in by_last_activity(entries)] == [
        "old-but-used",
        "new-empty",
        "newer-tie",
        "a-tie",
        "b-tie",
    ]
    assert entries[1].label == NEW_SESSION_LABEL
    assert entries[0].label == "old-but-used"  # untitled, but used: its id

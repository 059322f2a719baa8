"""Pilot tests of the ``@`` picker (tui/app/composer/picker.py) in the composer: when it
opens and closes, picking a session, and lookups that are stale, failing or large."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import OptionList

from tests.ui.composer_harness import (
    CURRENT_ID,
    ComposerHarness,
    Seed,
    World,
    failing_source,
    make_world,
    slow_first,
)
from tests.ui.composer_helpers import (
    SIZE,
    is_open,
    labels,
    mention_for,
    screen_text,
    settle,
    type_text,
)
from tests.ui.composer_helpers import world as world
from tui.app.composer.picker import LOOKUP_FAILED_HINT, NO_MATCHES_HINT

# --------------------------------------------------------------------------- opening


@pytest.mark.parametrize(
    ("typed", "opens"),
    [
        ("@", True),
        ("hi @", True),
        ("one\n@", True),
        ("tab\t@", True),
        ("a@", False),
        ("mail a@b.c", False),
    ],
)
async def test_at_sign_opens_only_at_a_word_start(world: World, typed: str, opens: bool) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        if "\t" in typed:
            composer.set_draft(typed.removesuffix("@"))
            typed = "@"
        await type_text(pilot, typed)
        await settle(pilot)
        assert is_open(composer) is opens
        assert composer.picker.is_open is opens
        assert composer.has_focus


async def test_picker_lists_sessions_with_details(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        rows = composer.picker.row_texts
        assert labels(composer) == ["Alpha planning", "Beta release notes", "s-gamma", "Delta bugs"]
        assert "s-alpha" in rows[0] and "/work/app" in rows[0] and "5m ago" in rows[0]
        assert "no cwd" in rows[2] and "2d ago" in rows[2]
        assert rows[2].count("s-gamma") == 1  # the id is not repeated when it is the label
        assert composer.picker.highlighted == 0
        assert composer.picker.header_text == "0 of 3 references"
        # Placed above the composer, starting at the "@" column.
        picker_region = composer.picker.region
        assert picker_region.bottom <= composer.region.y
        assert picker_region.x == composer.cursor_screen_offset.x - 1


async def test_typing_filters_live(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        await type_text(pilot, "elt")
        await settle(pilot)
        assert labels(composer) == ["Delta bugs"]
        assert world.calls[-1] == "elt"
        await pilot.press("backspace")
        await settle(pilot)
        assert labels(composer) == ["Beta release notes", "Delta bugs"]
        await type_text(pilot, "zzz")
        await settle(pilot)
        assert labels(composer) == []
        assert composer.picker.hint == NO_MATCHES_HINT


async def test_the_current_session_is_never_listed(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@current")
        await settle(pilot)
        assert labels(composer) == []
        await pilot.press("escape")
        composer.clear_draft()
        await type_text(pilot, "@")
        await settle(pilot)
        assert CURRENT_ID not in [c.session_id for c in composer.picker.candidates]


async def test_picker_works_inside_nested_containers(world: World) -> None:
    app = ComposerHarness(world.source, nested=True)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "x @")
        await settle(pilot)
        picker = composer.picker
        assert is_open(composer) and len(picker.candidates) == 4
        assert picker.region.bottom <= composer.region.y
        assert picker.region.right <= SIZE[0]  # pushed left to stay on screen
        at_x = composer.cursor_screen_offset.x - 1
        assert picker.region.x == min(at_x, SIZE[0] - picker.region.width)
        await pilot.press("down", "tab")
        await pilot.pause()
        assert composer.draft == f"x {mention_for('s-beta', 'Beta release notes')} "


# --------------------------------------------------------------------------- closing


async def test_losing_focus_closes_the_picker(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        app.set_focus(None)
        await pilot.pause()
        assert not is_open(composer)
        assert not composer.picker.is_open


async def test_removing_the_composer_removes_its_picker(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        picker = composer.picker
        assert picker.parent is app.screen
        await composer.remove()
        await pilot.pause()
        assert not picker.is_attached


async def test_space_closes_the_picker(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@al")
        await settle(pilot)
        assert is_open(composer)
        await type_text(pilot, " ")
        await settle(pilot)
        assert not is_open(composer)
        assert not composer.picker.is_open
        assert composer.draft == "@al "


async def test_escape_closes_only_the_picker(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert not is_open(composer)
        assert app.escapes == 0
        assert composer.draft == "@"
        assert composer.has_focus
        await pilot.press("escape")  # closed: Esc is the app's (cancel / interrupt)
        await pilot.pause()
        assert app.escapes == 1


async def test_moving_the_cursor_out_of_the_query_closes(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "x @al")
        await settle(pilot)
        await pilot.press("left")  # still inside "@al": the query shrinks
        await settle(pilot)
        assert is_open(composer)
        assert world.calls[-1] == "a"
        await pilot.press("left", "left")  # now before the "@"
        await settle(pilot)
        assert not is_open(composer)


async def test_deleting_the_at_sign_closes(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "x @")
        await settle(pilot)
        await pilot.press("backspace")
        await settle(pilot)
        assert not is_open(composer)
        assert composer.draft == "x "


async def test_newline_closes_the_picker(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@a")
        await settle(pilot)
        await pilot.press("shift+enter")
        await settle(pilot)
        assert not is_open(composer)
        assert composer.draft == "@a\n"


async def test_enter_with_no_match_closes_and_sends(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "ping @nobody")
        await settle(pilot)
        assert is_open(composer) and labels(composer) == []
        await pilot.press("enter")
        await pilot.pause()
        assert not is_open(composer)
        assert app.submitted == ["ping @nobody"]


# --------------------------------------------------------------------------- picking


async def test_up_and_down_move_the_highlight_and_wrap(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.add_to_history("history must not be walked")
        await type_text(pilot, "@")
        await settle(pilot)
        picker = composer.picker
        await pilot.press("up")
        assert picker.highlighted == 3
        await pilot.press("down")
        assert picker.highlighted == 0
        await pilot.press("down", "down")
        assert picker.highlighted == 2
        await pilot.press("down", "down")
        assert picker.highlighted == 0
        assert composer.draft == "@"


@pytest.mark.parametrize("key", ["enter", "tab"])
async def test_enter_or_tab_inserts_the_mention(world: World, key: str) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "see @be")
        await settle(pilot)
        await pilot.press("down", "up")  # wraps twice and back to the only row
        await pilot.press(key)
        await settle(pilot)
        mention = mention_for("s-beta", "Beta release notes")
        assert composer.draft == f"see {mention} "
        assert composer.cursor_location == (0, len(composer.text))
        assert not is_open(composer)
        assert app.submitted == []
        assert composer.has_focus
        assert composer.reference_count == 1
        await type_text(pilot, "ok")
        assert composer.draft == f"see {mention} ok"


async def test_picked_mention_replaces_only_the_query(world: World) -> None:
    app = ComposerHarness(world.source, text="first line")
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.move_cursor(composer.document.end)
        await pilot.press("shift+enter")
        await type_text(pilot, "@gam")
        await settle(pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert composer.draft == f"first line\n{mention_for('s-gamma', 's-gamma')} "


async def test_mouse_click_on_a_row_inserts_it(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        rows = composer.picker.query_one(OptionList)
        assert await pilot.click(rows, offset=(3, 2))  # the third row
        await settle(pilot)
        assert composer.draft == f"{mention_for('s-gamma', 's-gamma')} "
        assert not is_open(composer)
        assert composer.has_focus


# --------------------------------------------------------------------------- lookups


async def test_a_stale_lookup_is_dropped(world: World) -> None:
    app = ComposerHarness(slow_first(world.source, 0.4))
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")  # the slow lookup of ""
        await type_text(pilot, "del")
        await settle(pilot)
        await asyncio.sleep(0.5)  # past the slow answer, had it not been cancelled
        await pilot.pause()
        assert labels(composer) == ["Delta bugs"]


async def test_a_stale_result_is_ignored_even_if_it_arrives(world: World) -> None:
    """The generation check alone drops an answer that was not cancelled in time."""
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@del")
        await settle(pilot)
        composer._lookup("", 0)  # an old generation
        await settle(pilot)
        assert labels(composer) == ["Delta bugs"]


async def test_a_failing_source_shows_a_hint(world: World) -> None:
    app = ComposerHarness(failing_source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@a")
        await settle(pilot)
        assert is_open(composer)
        assert labels(composer) == []
        assert composer.picker.hint == LOOKUP_FAILED_HINT
        assert LOOKUP_FAILED_HINT in screen_text(app)
        await type_text(pilot, "b")
        await settle(pilot)
        assert composer.picker.hint == LOOKUP_FAILED_HINT
        await pilot.press("escape")
        await pilot.pause()
        assert not is_open(composer)
        assert app.escapes == 0
        assert composer.draft == "@ab"


async def test_without_a_source_the_picker_is_empty(world: World) -> None:
    app = ComposerHarness(None)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        assert is_open(composer)
        assert labels(composer) == []
        assert composer.picker.hint == NO_MATCHES_HINT


async def test_ten_thousand_sessions(world: World) -> None:
    seeds = [
        Seed(f"bulk-{i:05d}", f"Topic {i}", f"/p/{i % 7}", age=i * 1000) for i in range(10_000)
    ]
    big = await make_world(seeds)
    app = ComposerHarness(big.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        assert len(composer.picker.candidates) == 50  # candidate_limit
        await type_text(pilot, "9999")
        await settle(pilot)
        assert labels(composer) == ["Topic 9999"]
        assert composer.picker.row_texts[0].startswith("Topic 9999")

"""Pilot tests of the composer and the ``@`` picker (tui/composer.py, tui/picker.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from core.references import (
    SessionReferenceCandidate,
    SessionReferenceInput,
    find_session_reference_spans,
    format_session_reference_mention,
)
from tests.ui.composer_harness import (
    CURRENT_ID,
    DAY,
    NOW_MS,
    ComposerHarness,
    Seed,
    World,
    failing_source,
    make_world,
    slow_first,
)
from tests.ui.conftest import workers_done
from tui.app.composer.composer import MENTION_LABEL_HIGHLIGHT, MENTION_URI_HIGHLIGHT, Composer
from tui.app.composer.picker import LOOKUP_FAILED_HINT, NO_MATCHES_HINT

SIZE = (100, 30)

_KEY_NAMES = {" ": "space", "\n": "ctrl+j", "@": "at"}


async def type_text(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (space and newline by their key names)."""
    await pilot.press(*(_KEY_NAMES.get(char, char) for char in text))


async def settle(pilot: Pilot[None]) -> None:
    """Let lookups finish and messages and the screen catch up."""
    await workers_done(pilot.app)
    await pilot.pause()


def screen_text(pilot_app: ComposerHarness) -> str:
    """The screenshot SVG with non-breaking spaces turned back into spaces."""
    return pilot_app.export_screenshot().replace("&#160;", " ")


def is_open(composer: Composer) -> bool:
    """A call, so that mypy does not narrow the property between key presses."""
    return composer.picker_open


def labels(composer: Composer) -> list[str]:
    return [candidate.label for candidate in composer.picker.candidates]


def mention_for(world_id: str, label: str) -> str:
    return format_session_reference_mention(SessionReferenceInput(world_id, label))


@pytest.fixture
async def world() -> World:
    return await make_world()


# --------------------------------------------------------------------------- sending


async def test_enter_submits_the_raw_draft(world: World) -> None:
    draft = f"look at {mention_for('s-beta', 'Beta release notes')} please"
    app = ComposerHarness(world.source, text=draft)
    async with app.run_test(size=SIZE) as pilot:
        app.composer.move_cursor(app.composer.document.end)
        await pilot.press("enter")
        await pilot.pause()
        assert app.submitted == [draft]
        assert app.composer.draft == draft  # the app clears it after a successful send


async def test_enter_on_a_blank_draft_sends_nothing(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        await type_text(pilot, "  ")
        await pilot.press("enter")
        await pilot.pause()
        assert app.submitted == []


async def test_send_disabled_posts_send_blocked(world: World) -> None:
    app = ComposerHarness(world.source, text="hello")
    async with app.run_test(size=SIZE) as pilot:
        app.composer.send_enabled = False
        await pilot.press("enter")
        await pilot.pause()
        assert app.submitted == []
        assert app.blocked == 1
        assert app.composer.draft == "hello"
        assert app.composer.check_action("submit", ()) is None  # Send shows dimmed
        app.composer.send_enabled = True
        assert app.composer.check_action("submit", ()) is True


@pytest.mark.parametrize("key", ["shift+enter", "ctrl+j"])
async def test_newline_keys_insert_a_newline(world: World, key: str) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        await type_text(pilot, "one")
        await pilot.press(key)
        await type_text(pilot, "two")
        await pilot.pause()
        assert app.composer.draft == "one\ntwo"
        assert app.submitted == []


async def test_set_and_clear_draft(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.set_draft("first\nsecond")
        assert composer.draft == "first\nsecond"
        assert composer.cursor_location == (1, 6)
        composer.clear_draft()
        await pilot.pause()
        assert composer.draft == ""


# --------------------------------------------------------------------------- history


async def test_history_walk_keeps_and_restores_the_draft(world: World) -> None:
    mention = mention_for("s-alpha", "Alpha planning")
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.add_to_history("oldest")
        composer.add_to_history(f"see {mention}")
        await type_text(pilot, "unsent")
        await pilot.press("up")
        assert composer.draft == f"see {mention}"
        assert composer.reference_count == 1  # a recalled mention is still a reference
        await pilot.press("up")
        assert composer.draft == "oldest"
        await pilot.press("up")  # no older entry: stays
        assert composer.draft == "oldest"
        await pilot.press("down")
        assert composer.draft == f"see {mention}"
        await pilot.press("down")
        assert composer.draft == "unsent"
        await pilot.press("down")  # not browsing any more: plain cursor movement
        assert composer.draft == "unsent"


async def test_history_needs_the_first_or_last_line(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.add_to_history("sent")
        await type_text(pilot, "a\nb")
        await pilot.press("up")  # from the second line: moves to the first
        assert composer.draft == "a\nb"
        assert composer.cursor_location[0] == 0
        await pilot.press("up")
        assert composer.draft == "sent"
        await pilot.press("down")
        assert composer.draft == "a\nb"


async def test_history_skips_blank_and_repeated_entries(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE):
        composer = app.composer
        for text in ("x", "x", "  ", "y"):
            composer.add_to_history(text)
        assert composer.sent_history == ["x", "y"]


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


# --------------------------------------------------------------------------- mentions


async def test_mentions_are_highlighted_as_a_unit(world: World) -> None:
    good = mention_for("s-alpha", "Alpha")
    bad = "@[Bad](dsh-session:!!)"
    app = ComposerHarness(world.source, text=f"a {good} b {bad}")
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await pilot.pause()
        highlights = composer._highlights[0]
        label_end = 2 + len("@[Alpha]")
        assert (2, label_end, MENTION_LABEL_HIGHLIGHT) in highlights
        assert (label_end, 2 + len(good), MENTION_URI_HIGHLIGHT) in highlights
        assert len(highlights) == 2  # the invalid mention is plain text
        assert composer.reference_count == 1


async def test_highlights_use_byte_columns(world: World) -> None:
    mention = mention_for("s-alpha", "Ünïcode ✓")
    app = ComposerHarness(world.source, text=f"é {mention}")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        highlights = app.composer._highlights[0]
        start = len("é ".encode())
        assert highlights[0] == (
            start,
            start + len("@[Ünïcode ✓]".encode()),
            MENTION_LABEL_HIGHLIGHT,
        )
        screenshot = app.export_screenshot()
        assert "Ünïcode" in screenshot


async def test_backspace_after_a_mention_removes_it_whole(world: World) -> None:
    mention = mention_for("s-beta", "Beta release notes")
    app = ComposerHarness(world.source, text=f"see {mention} and")
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.move_cursor((0, 4 + len(mention)))
        await pilot.press("backspace")
        await pilot.pause()
        assert composer.draft == "see  and"
        assert composer.cursor_location == (0, 4)
        assert composer.reference_count == 0
        await pilot.press("backspace")  # ordinary text: one character
        assert composer.draft == "see and"


async def test_backspace_after_the_trailing_space_deletes_only_the_space(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@alp")
        await settle(pilot)
        await pilot.press("enter", "backspace")
        mention = mention_for("s-alpha", "Alpha planning")
        assert composer.draft == mention
        await pilot.press("backspace")
        assert composer.draft == ""


async def test_editing_inside_a_mention_makes_it_plain_text(world: World) -> None:
    mention = mention_for("s-beta", "Beta release notes")
    app = ComposerHarness(world.source, text=mention)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.move_cursor(composer.document.end)
        await pilot.press("left", "backspace")  # one character out of the URI payload
        await pilot.pause()
        draft = composer.draft
        assert draft == mention[:-2] + ")"
        assert composer.reference_count == 0
        assert [span.valid for span in find_session_reference_spans(draft)] == [False]
        assert composer._highlights.get(0, []) == []
        # Now plain text: Backspace at its end removes one character only.
        await pilot.press("end", "backspace")
        assert composer.draft == mention[:-2]
        assert not any(span.valid for span in find_session_reference_spans(composer.draft))


async def test_typing_inside_a_mention_uri_breaks_it(world: World) -> None:
    mention = mention_for("s-beta", "Beta")
    app = ComposerHarness(world.source, text=mention)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.move_cursor((0, len(mention) - 3))  # inside the base64 payload
        await type_text(pilot, "x")
        await pilot.pause()
        assert composer.reference_count == 0
        assert not any(span.valid for span in composer.reference_spans)
        assert composer._highlights.get(0, []) == []


async def test_typing_inside_a_mention_label_just_relabels_it(world: World) -> None:
    """The label is free text: the mention stays a reference to the same session."""
    mention = mention_for("s-beta", "Beta")
    app = ComposerHarness(world.source, text=mention)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.move_cursor((0, len("@[Beta")))
        await type_text(pilot, "!")
        await pilot.pause()
        [span] = composer.reference_spans
        assert (span.label, span.session_id) == ("Beta!", "s-beta")


async def test_reference_count_and_limit_warning(world: World) -> None:
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        for query in ("alp", "bet", "alp"):  # a repeated session counts once
            await type_text(pilot, f"@{query}")
            await settle(pilot)
            await pilot.press("enter")
        assert composer.reference_count == 2
        await type_text(pilot, "@")
        await settle(pilot)
        assert composer.picker.header_text == "2 of 3 references"
        await type_text(pilot, "del")
        await settle(pilot)
        await pilot.press("tab")
        await type_text(pilot, "@")
        await settle(pilot)
        assert composer.reference_count == 3
        header = composer.picker.header_text
        assert header.startswith("3 of 3 references")
        assert "Limit reached: 3 references per message" in header
        assert "Limit reached: 3 references per message" in screen_text(app)


async def test_max_references_is_configurable(world: World) -> None:
    app = ComposerHarness(world.source, text=mention_for("s-alpha", "A") + " ")
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        composer.max_references = 1
        composer.move_cursor(composer.document.end)
        await type_text(pilot, "@")
        await settle(pilot)
        assert composer.picker.header_text == (
            "1 of 1 reference\nLimit reached: 1 reference per message"
        )


# --------------------------------------------------------------------------- hostile data


HOSTILE = (
    Seed("h-markup", "[bold]x[/]", "/tmp/[red]", age=2 * DAY),
    Seed("h-ansi", "\x1b[31mred\x1b[0m", None, age=3 * DAY),
    Seed("h-bidi", "safe\u202eexe.txt", "/a\u2066b", age=4 * DAY),
    Seed("h-\x07id", None, None, age=5 * DAY),
)


async def test_hostile_titles_are_shown_literally() -> None:
    hostile = await make_world(HOSTILE)
    app = ComposerHarness(hostile.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@")
        await settle(pilot)
        rows = "\n".join(composer.picker.row_texts)
        assert "[bold]x[/]" in rows
        assert "/tmp/[red]" in rows
        assert "\\x1b[31mred\\x1b[0m" in rows
        assert "safe\\u202eexe.txt" in rows
        assert "/a\\u2066b" in rows
        assert "h-\\x07id" in rows
        for raw in ("\x1b", "\u202e", "\u2066", "\x07"):
            assert raw not in rows
        screenshot = app.export_screenshot()
        assert "[bold]x[/]" in screenshot
        assert "\\x1b[31mred" in screenshot
        assert "\x1b" not in screenshot


async def test_a_hostile_label_is_inserted_safe() -> None:
    """The label is built by core.references.labels: control characters removed (issue 12 §4)."""
    hostile = await make_world(HOSTILE)
    app = ComposerHarness(hostile.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@h-ansi")
        await settle(pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert "\x1b" not in composer.draft
        spans = find_session_reference_spans(composer.draft)
        assert [(s.session_id, s.label) for s in spans] == [("h-ansi", "[31mred[0m")]


async def test_control_characters_in_the_draft_are_drawn_visibly(world: World) -> None:
    app = ComposerHarness(world.source, text="a\x1b[31mb\u202ec")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        line = app.composer.get_line(0).plain
        assert line == "a\u241b[31mb\ufffdc"
        assert app.composer.draft == "a\x1b[31mb\u202ec"  # the text itself is untouched


async def test_candidates_from_any_source_are_accepted(world: World) -> None:
    """The composer only needs the ``SessionReferenceCandidate`` shape from its source."""

    async def source(query: str) -> Sequence[SessionReferenceCandidate]:
        mention = mention_for("x", "X")
        return [SessionReferenceCandidate("x", "X", None, NOW_MS, mention)]

    app = ComposerHarness(source)
    async with app.run_test(size=SIZE) as pilot:
        await type_text(pilot, "@")
        await settle(pilot)
        assert "just now" in app.composer.picker.row_texts[0]


def test_picker_cells_cut_inside_an_emoji_sequence_stay_safe() -> None:
    """Cutting a label or cwd to its column must not leave a joiner or selector orphaned."""
    from tests.terminal_safety import assert_terminal_safe
    from tui.app.composer.picker import format_candidate_row

    family = "👨\u200d👩\u200d👧\u200d👦"
    for shift in range(8):
        text = "x" * shift + family * 12
        candidate = SessionReferenceCandidate("id", text, text, NOW_MS, "@[x](dsh-session:ImlkIg)")
        assert_terminal_safe(format_candidate_row(candidate, NOW_MS).plain, f"shift {shift}")

"""Pilot tests of the composer and the ``@`` picker (tui/composer.py, tui/picker.py): sending,
history, mentions, hostile data (opening, closing, picking and lookups of the picker:
``test_composer_picker``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from core.references import SessionReferenceCandidate, find_session_reference_spans
from tests.ui.composer_harness import DAY, NOW_MS, ComposerHarness, Seed, World, make_world
from tests.ui.composer_helpers import SIZE, mention_for, screen_text, settle, type_text
from tests.ui.composer_helpers import world as world
from tui.app.composer.composer import MENTION_LABEL_HIGHLIGHT, MENTION_URI_HIGHLIGHT

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

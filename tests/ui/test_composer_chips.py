"""Pilot tests of mention chips, the reference limit and the picker's layout (issue 13)."""

from __future__ import annotations

import html
import itertools
import re

from rich.cells import cell_len
from textual.pilot import Pilot

from core.references import SessionReferenceCandidate, SessionReferenceInput
from core.references import format_session_reference_mention as fmt
from tests.ui.composer_harness import NOW_MS, ComposerHarness, Seed, make_world
from tests.ui.conftest import make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_composer import settle, type_text
from tui.app.composer.picker import ROW_WIDTH, format_candidate_row
from tui.shared.runtime import Runtime

SIZE = (100, 30)


def mention_for(session_id: str, label: str) -> str:
    return fmt(SessionReferenceInput(session_id, label))


async def pick(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` (ending in an ``@`` query), let the picker list, take its first row."""
    await type_text(pilot, text)
    await settle(pilot)
    await pilot.press("enter")


async def test_a_picked_mention_is_one_chip_and_sends_in_full() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await pick(pilot, "see @bet")
        await type_text(pilot, "now")
        await pilot.pause()
        full = mention_for("s-beta", "Beta release notes")
        assert composer.shown_text == "see @Beta release notes now"
        assert "dsh-session" not in composer.text
        assert composer.draft == f"see {full} now"
        shown = screen_text(app)
        assert "@Beta release notes now" in shown
        assert "dsh-session" not in shown
        await pilot.press("enter")
        await pilot.pause()
        assert app.submitted == [f"see {full} now"]


async def test_the_cursor_never_stops_inside_a_chip() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await pick(pilot, "see @bet")
        await pilot.pause()
        chip_start = 4
        chip_end = len("see ") + 1 + len("Beta release notes")
        assert composer.cursor_location == (0, chip_end + 1)
        await pilot.press("left")
        assert composer.cursor_location == (0, chip_end)
        await pilot.press("left")  # over the whole chip
        assert composer.cursor_location == (0, chip_start)
        await pilot.press("right")
        assert composer.cursor_location == (0, chip_end)
        composer.move_cursor((0, chip_start + 3))  # even a direct move is snapped out
        assert composer.cursor_location[1] in (chip_start, chip_end)
        await pilot.press(
            "home", "shift+right", "shift+right", "shift+right", "shift+right", "shift+right"
        )
        assert composer.selection.end == (0, chip_end)


async def test_backspace_and_delete_remove_a_chip_whole() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "see @bet")
        await settle(pilot)
        await pilot.press("enter", "backspace")  # the trailing space
        assert composer.shown_text == "see @Beta release notes"
        await pilot.press("backspace")
        assert composer.shown_text == "see "
        assert composer.reference_count == 0
        await type_text(pilot, "@alp")
        await settle(pilot)
        await pilot.press("enter", "home", "right", "right", "right", "right", "delete")
        assert composer.shown_text == "see  "
        assert composer.draft == "see  "


async def test_typing_cannot_edit_a_chip_label() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await type_text(pilot, "@bet")
        await settle(pilot)
        await pilot.press("enter", "left", "left", "x")  # cursor at the chip start: before it
        assert composer.shown_text == "x@Beta release notes "
        assert composer.draft == "x" + mention_for("s-beta", "Beta release notes") + " "


async def test_copy_gives_the_full_mention_and_paste_makes_a_chip() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await pick(pilot, "@bet")
        composer.select_all()
        composer.action_copy()
        full = mention_for("s-beta", "Beta release notes")
        assert app.clipboard == full + " "
        composer.move_cursor(composer.document.end)
        composer.action_paste()
        await pilot.pause()
        assert composer.shown_text == "@Beta release notes @Beta release notes "
        assert composer.draft == f"{full} {full} "
        composer.select_all()
        composer.action_cut()
        assert app.clipboard == f"{full} {full} "
        assert composer.text == ""


async def test_a_saved_draft_comes_back_as_chips() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        full = mention_for("s-beta", "Beta release notes")
        composer.set_draft(f"about {full}")
        await pilot.pause()
        assert composer.shown_text == "about @Beta release notes"
        assert composer.draft == f"about {full}"


async def test_the_picker_refuses_a_reference_over_the_limit() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        for query in ("alp", "bet", "del"):
            await type_text(pilot, f"@{query}")
            await settle(pilot)
            await pilot.press("enter")
        assert composer.reference_count == 3
        before = composer.draft
        await type_text(pilot, "@gam")
        await settle(pilot)
        assert "Limit reached" in composer.picker.header_text
        await pilot.press("enter")
        await pilot.pause()
        assert composer.reference_count == 3
        assert composer.draft == before + "@gam"
        assert "Limit reached" in composer.picker.hint
        # A session already referenced may still be mentioned again.
        await pilot.press("backspace", "backspace", "backspace")
        await pick(pilot, "alp")
        assert composer.reference_count == 3
        assert composer.draft.count(mention_for("s-alpha", "Alpha planning")) == 2


# --------------------------------------------------------------------------- picker layout


async def test_picker_ages_are_whole_at_80_columns() -> None:
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=(80, 30)) as pilot:
        await type_text(pilot, "@")
        await settle(pilot)
        text = screen_text(app)
        for age in ("5m ago", "3h ago", "2d ago", "3d ago"):
            assert age in text, age
        assert "2…" not in text


def test_rows_are_measured_in_cells() -> None:
    """A CJK or emoji id or label takes two cells a character: every row is as wide."""
    rows = []
    for session_id, label in (
        ("plain-id", "Plain"),
        ("会议记录会议记录会议记录", "计划计划计划计划计划计划计划计划"),
        ("🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀", "Launch 🚀"),
    ):
        candidate = SessionReferenceCandidate(session_id, label, "/w", NOW_MS, "@[x](y)")
        rows.append(format_candidate_row(candidate, NOW_MS).plain)
    assert {cell_len(row) for row in rows} == {ROW_WIDTH}
    # Columns line up: the cwd starts at the same cell in every row.
    starts = {cell_len(row[: row.index("/w")]) for row in rows}
    assert len(starts) == 1


def test_narrow_rows_keep_the_age() -> None:
    candidate = SessionReferenceCandidate(
        "id-1", "A long label " * 4, "/a/b/c/d/e/f/g", NOW_MS, "m"
    )
    for width in (40, 60, 75):
        row = format_candidate_row(candidate, NOW_MS + 3 * 86_400_000, width).plain
        assert cell_len(row) == width
        assert row.endswith("3d ago")


async def test_wide_ids_in_the_picker_line_up() -> None:
    wide = await make_world(
        (
            Seed("会议记录会议记录", "计划", "/work/app"),
            Seed("plain", "Plain", "/work/app"),
        )
    )
    app = ComposerHarness(wide.source)
    async with app.run_test(size=SIZE) as pilot:
        await type_text(pilot, "@")
        await settle(pilot)
        rows = app.composer.picker.row_texts
        assert len(rows) == 2
        assert len({cell_len(row) for row in rows}) == 1


async def test_text_after_a_picked_mention_keeps_its_space_when_sent(runtime: Runtime) -> None:
    """Guard for '@hostiletrying': the picker adds the space, the transcript keeps it."""
    from tests.ui.test_app import send_idle, settle, wait_for

    app = make_app(runtime)
    async with app.run_test(size=(100, 32)) as pilot:
        await settle(app, pilot)
        await pilot.press(*"is @kub")
        await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 1)
        await pilot.press("tab", *"trying")
        assert app.composer.shown_text == "is @Kubernetes upgrade trying"
        await pilot.press("enter")
        await send_idle(app, pilot)
        assert "is @Kubernetes upgrade trying" in screen_text(app)
        # The SVG (snapshots, "Save screenshot") holds the space too, each span starting
        # where the one before it ends. Viewers that ignore SVG ``textLength`` (librsvg)
        # draw a bold span wider than its cells, so it can cover the next space: that, not
        # dsh, is how "@hostiletrying" was seen (and "billing differstoggle" in rsvg).
        lines = svg_lines(app.export_screenshot())
        sent = [spans for spans in lines if "trying" in "".join(t for _, _, t in spans)]
        assert any(
            "is @Kubernetes upgrade trying" in "".join(t for _, _, t in spans) for spans in sent
        )
        pairs = [
            (a, b)
            for spans in sent
            for a, b in itertools.pairwise(spans)
            if a[2].startswith("@Kubernetes")
        ]
        assert pairs, sent
        for (x, length, _), (next_x, _, next_text) in pairs:
            assert abs(x + length - next_x) < 0.01 and next_text.startswith(" trying"), pairs


def svg_lines(svg: str) -> list[list[tuple[float, float, str]]]:
    """The text spans of a Textual SVG screenshot, per row: (x, textLength, text)."""
    rows: dict[str, list[tuple[float, float, str]]] = {}
    pattern = r'<text [^>]*x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"[^>]*>([^<]*)</text>'
    for x, y, length, text in re.findall(pattern, svg):
        rows.setdefault(y, []).append(
            (float(x), float(length), html.unescape(text).replace("\xa0", " "))
        )
    return [sorted(spans) for _, spans in sorted(rows.items(), key=lambda item: float(item[0]))]


async def test_a_removed_composer_can_still_be_drawn() -> None:
    """The screen may draw a widget from its last map after the widget was removed (the app
    quitting), when its component styles are gone: that once ended the app with a KeyError
    ("No 'composer--mention-label' key in COMPONENT_CLASSES")."""
    world = await make_world()
    app = ComposerHarness(world.source)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.composer
        await pick(pilot, "see @bet")
        await pilot.pause()
        region = composer.region
        await composer.remove()
        lines = composer.render_lines(region.reset_offset)
        assert len(lines) == region.height
        assert {line.text.strip() for line in lines} == {""}

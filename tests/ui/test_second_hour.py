"""Pilot tests for a newcomer's second hour in the TUI (issue 31): the session list follows
a theme switch, a restart reopens the session left open, the footer drops whole items,
Esc and ``?`` in the sidebar, F2 selects the old title, the markdown export holds the whole
history, and a read-only session's composer says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.segment import Segment
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from core.config import DshConfig
from core.log import SESSION_TITLE, user_message
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.ui.conftest import DAY, FIXED_NOW, MINUTE, SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import send_idle, settle, wait_for
from tests.ui.test_busy import footer_keys, gated
from tui.app.app import DshApp
from tui.app.screens.help import HELP_KEYS, HelpScreen
from tui.app.screens.modals import ConfirmScreen, RenameScreen
from tui.app.transcript.cards import CheckpointCard
from tui.app.uistate import UiState, load_ui_state, save_ui_state
from tui.shared.runtime import Runtime, open_runtime
from tui.shared.times import local_minute


def help_text() -> str:
    return "\n".join(f"{key} {what}" for _, rows in HELP_KEYS for key, what in rows)


def exported(folder: Path) -> str:
    """The markdown export written in ``folder`` ('' while there is none)."""
    return "".join(path.read_text("utf-8") for path in folder.glob("dsh-*.md"))


def list_lines(app: DshApp) -> list[list[Segment]]:
    """The session list as drawn now: every line's segments (text and style)."""
    session_list = app.sidebar.option_list
    return [list(session_list.render_line(y)) for y in range(session_list.size.height)]


async def test_theme_switch_redraws_the_session_list(runtime: Runtime, tmp_path: Path) -> None:
    # The list as a fresh start in the light theme draws it ...
    state = tmp_path / "light.json"
    save_ui_state(state, UiState(theme="textual-light"))
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: app.theme == "textual-light")
        await pilot.pause()
        expected = list_lines(app)
    # ... is how it looks right after switching to it from the dark one.
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        dark = list_lines(app)
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        assert list_lines(app) != dark
        assert list_lines(app) == expected


async def test_a_restart_reopens_the_session_left_open(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state" / "tui.json"
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"  # the newest write
        app.switch_to("search-tuning")
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        await settle(app, pilot)
    # Another window writes to a different session meanwhile: still the one left open.
    await runtime.store.append("scratch", "message/user", user_message("later", id="later"))
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "search-tuning"
        assert app.sidebar.visible_ids[0] == "scratch"
    # Gone since: the newest write opens instead, and says nothing about it.
    await runtime.store.delete_session("search-tuning")
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "scratch"
        assert app.notice.visible_text == ""


async def test_the_session_left_open_is_kept_per_database(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state" / "tui.json"
    other = UiState().with_open_session("/elsewhere/other.sqlite3", "k8s-upgrade")
    save_ui_state(state, other)
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"  # another database's choice plays no part
        app.switch_to("scratch")
        await wait_for(pilot, lambda: app.current_id == "scratch")
        await settle(app, pilot)
    kept = load_ui_state(state)
    assert kept.open_session("/elsewhere/other.sqlite3") == "k8s-upgrade"
    assert kept.open_session(str(tmp_path / "ui.sqlite3")) == "scratch"


# --------------------------------------------------------------------------- footer


def footer_items(app: DshApp) -> tuple[list[str], str]:
    """The footer's items as each reads whole ("^n New"), in order, and the palette's."""
    footer = app.screen.query_one(Footer)
    keys = [k for k in footer.query(FooterKey) if not k.has_class("-command-palette")]
    palette = footer.query_one(".-command-palette", FooterKey)
    return [k.render().plain.strip() for k in keys], palette.render().plain.strip()


def check_footer(app: DshApp) -> None:
    """The bottom line shows whole items only, in order, with nothing cut and no stray
    letter; the palette key ends it; an item is left out only when it would not fit."""
    width = app.size.width
    line = screen_text(app).splitlines()[-1]
    items, palette = footer_items(app)
    assert line.rstrip().endswith(palette), (width, line)
    left = line.rstrip()[: -len(palette)].rstrip().rstrip("▏▕│").rstrip()
    shown = [item for item in items if item in left]
    assert " ".join(left.split()) == " ".join(" ".join(shown).split()), (width, line)
    assert shown == items[: len(shown)], (width, line)
    if len(shown) < len(items):  # the next item really would not have fitted
        assert len(left) + 2 + len(items[len(shown)]) + 2 + len(palette) > width, (width, line)


async def test_the_footer_drops_whole_items_at_every_width(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for width in range(60, 201):
            await pilot.resize_terminal(width, SIZE[1])
            await pilot.pause()
            check_footer(app)


async def test_while_a_reply_streams_the_keys_that_wait_are_hidden(runtime: Runtime) -> None:
    rt, provider = gated(runtime)
    app = make_app(rt)
    async with app.run_test(size=(200, 32)) as pilot:
        await settle(app, pilot)
        await pilot.press(*"slow one", "enter")
        await asyncio.wait_for(provider.started.wait(), 5)
        await wait_for(pilot, lambda: app.streaming)
        await wait_for(pilot, lambda: "compact_session" not in footer_keys(app))
        keys = footer_keys(app)
        for action in ("new_session", "compact_session", "delete_session", "answer_again"):
            assert action not in keys, action
        assert keys["rename_session"] and keys["cancel"]
        footer = screen_text(app).splitlines()[-1]
        assert "Answer again" not in footer and "Compact" not in footer, footer
        check_footer(app)
        provider.gate.set()
        await send_idle(app, pilot)
        await wait_for(pilot, lambda: footer_keys(app).get("compact_session") is True)
        check_footer(app)


# --------------------------------------------------------------------------- sidebar keys


async def test_esc_in_the_filter_clears_it_first_then_returns_to_the_composer(
    runtime: Runtime,
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+l", *"kubernetes!")
        assert app.sidebar.visible_ids == [] and app.sidebar.filter_input.has_focus
        await pilot.press("escape")
        assert app.sidebar.filter_input.value == ""
        assert len(app.sidebar.visible_ids) == 4
        assert app.sidebar.filter_input.has_focus  # the first Esc only cleared it
        await pilot.press("escape")
        assert app.composer.has_focus
        # From the list below a filter, too.
        await pilot.press("ctrl+l", *"shop", "down")
        assert app.sidebar.option_list.has_focus and len(app.sidebar.visible_ids) == 2
        await pilot.press("escape")
        assert app.sidebar.filter_input.value == "" and len(app.sidebar.visible_ids) == 4
        await pilot.press("escape")
        assert app.composer.has_focus


async def test_question_mark_in_the_list_opens_help_and_in_the_filter_types(
    runtime: Runtime,
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+l", "down")
        assert app.sidebar.option_list.has_focus
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert app.sidebar.filter_input.value == ""
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("ctrl+l", *"what?")
        assert app.sidebar.filter_input.value == "what?"
        assert not isinstance(app.screen, HelpScreen)
        assert "outside the composer and the session filter" in help_text()


async def test_f2_selects_the_old_title_so_typing_replaces_it(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f2")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.pause()
        field = app.screen.query_one("#rename-input", Input)
        assert field.value == "Checkout redesign" and field.has_focus
        assert (field.selection.start, field.selection.end) == (0, len(field.value))
        await pilot.press(*"Checkout v2", "enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, RenameScreen))
        await wait_for(pilot, lambda: app.sidebar.entry("checkout").title == "Checkout v2")  # type: ignore[union-attr]
    title = await runtime.query.read_title("checkout")
    assert title is not None and title.title == "Checkout v2"


# --------------------------------------------------------------------------- export


async def test_palette_markdown_export_after_f4_holds_the_whole_history(
    runtime: Runtime, tmp_path: Path
) -> None:
    app = make_app(runtime, cwd=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.click("#yes")
        await wait_for(pilot, lambda: bool(app.transcript.query(CheckpointCard)))
        await settle(app, pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Export as Markdown"].callback()
        await wait_for(pilot, lambda: bool(exported(tmp_path)))
    md = exported(tmp_path)
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    # The exchange the summary replaced, marked, in the app's (local) time; then the summary.
    assert headings[:2] == [
        f"## You · {local_minute(FIXED_NOW - 2 * DAY + MINUTE)} · compacted",
        f"## Assistant · {local_minute(FIXED_NOW - 2 * DAY + MINUTE + 5000)} · compacted",
    ]
    assert headings[2].startswith("## Compacted summary")
    assert "> Can we merge shipping and billing?" in md
    assert "one address form with a **billing differs** toggle" in md


# --------------------------------------------------------------------------- read-only


async def test_a_shared_session_s_composer_says_it_is_read_only(tmp_path: Path) -> None:
    db = tmp_path / "team.sqlite3"
    async with await SqliteSessionStore.open(db, user="alice") as alice:
        await alice.create_session("hers", cwd="/home/alice", created_at=FIXED_NOW - DAY)
        await alice.append("hers", SESSION_TITLE, {"title": "Alice's plan"})
        assert await alice.share("hers", "bob")
    async with (
        await SqliteSessionStore.open(db, user="bob") as bob,
        open_runtime(DshConfig(database=db), store=bob, provider=OfflineProvider()) as rt,
    ):
        await bob.create_session("his", cwd="/home/bob", created_at=FIXED_NOW - 2 * DAY)
        app = make_app(rt, initial_session="hers")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "hers" and not app.composer.send_enabled
            placeholder = app.composer.placeholder
            assert "Enter to send" not in placeholder, placeholder
            assert "read-only" in placeholder.lower() and "alice" in placeholder, placeholder
            assert "Read-only: shared with you by alice" in screen_text(app)
            app.switch_to("his")
            await wait_for(pilot, lambda: app.current_id == "his")
            await settle(app, pilot)
            assert "Enter to send" in app.composer.placeholder

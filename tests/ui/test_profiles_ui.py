"""Profiles in the app (issue 32): the header shows the open session's profile and model;
"Switch profile…" in the palette records a ``session/profile`` event and the next reply is
answered by that profile's model (a reply under way keeps its own); Ctrl+N follows the
default; a missing key is said at start, and at send nothing is stored and the draft stays;
a hostile recorded profile name is shown escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette

from core.log import SESSION_PROFILE, USER_MESSAGE, user_message
from core.profiles import Profile
from stores import SqliteSessionStore
from tests.ui.conftest import SIZE, make_app
from tests.ui.profile_harness import (
    NO_KEY_ENV,
    PROFILES,
    choose_in_palette,
    profile_events,
    profile_runtime,
    replies,
)
from tests.ui.snapshots import screen_text
from tests.ui.test_app import send_idle, settle, wait_for
from tui.app.app import DshApp
from tui.app.profiles import check_chat_key, check_key
from tui.app.statusbar import TitleBar


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_KEY_ENV, raising=False)


def header(app: DshApp) -> str:
    return app.screen.query_one("#title-bar", TitleBar).plain


async def send(app: DshApp, pilot: object, text: str) -> None:
    app.composer.focus()
    app.composer.set_draft(text)
    await pilot.press("enter")  # type: ignore[attr-defined]


async def test_the_header_shows_the_profile_and_the_palette_switches_it(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "checkout"
            assert "alpha (alpha-1)" in header(app)

            # The list: every configured profile, the current one marked.
            app.profiles.choose()
            await wait_for(
                pilot,
                lambda: (
                    isinstance(app.screen, CommandPalette) and bool(app.screen.query(CommandList))
                ),
            )
            hits = app.screen.query_one(CommandList)
            await wait_for(pilot, lambda: hits.option_count == 5)
            rows = [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]
            assert [row.splitlines()[0] for row in rows] == [
                "alpha (alpha-1)  ✓ current",
                "beta (beta-1)",
                "keyless (keyless-model)",
                "offline (echo-1)",
                "tiny (tiny-1)",
            ]
            assert rows[0].endswith("The profile this session uses now")
            assert rows[1].endswith("Use it from the next message")
            assert rows[2].endswith(f"no API key: set {NO_KEY_ENV} (or choose another profile).")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
            assert await profile_events(rt, "checkout") == []  # looking records nothing

            await choose_in_palette(app, pilot, "Switch profile", "beta")
            await wait_for(pilot, lambda: "beta (beta-1)" in header(app))
            assert "alpha" not in header(app)
            recorded = await profile_events(rt, "checkout")
            assert [e.data for e in recorded] == [
                {"profile": "beta", "provider": "offline", "model": "beta-1"}
            ]

            await send(app, pilot, "Which model answers?")
            await send_idle(app, pilot)
            reply = (await replies(rt, "checkout"))[-1]
            assert reply.data["profile"] == "beta"
            assert reply.data["message"]["source"]["model"] == "beta-1"
            assert "beta-1" in screen_text(app)  # the transcript names the model that answered

        # Reopened later, the session still answers with its recorded profile.
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "checkout"
            assert "beta (beta-1)" in header(app)


async def test_a_reply_under_way_keeps_its_profile(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path, offline_delay=0.05) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await send(app, pilot, "first")
            await wait_for(pilot, lambda: app.streaming)
            app.profiles.switch("beta")
            await wait_for(pilot, lambda: "beta (beta-1)" in header(app))
            assert app.streaming  # the header changed at once, the reply goes on
            await send_idle(app, pilot)
            await send(app, pilot, "second")
            await send_idle(app, pilot)
            first, second = (await replies(rt, "checkout"))[-2:]
            assert (first.data["profile"], first.data["message"]["source"]["model"]) == (
                "alpha",
                "alpha-1",
            )
            assert (second.data["profile"], second.data["message"]["source"]["model"]) == (
                "beta",
                "beta-1",
            )


async def test_a_new_session_follows_the_default_profile(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            app.profiles.switch("beta")
            await wait_for(pilot, lambda: "beta (beta-1)" in header(app))
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.current_id not in (None, "checkout"))
            new_id = app.current_id
            assert new_id is not None
            await settle(app, pilot)
            assert "alpha (alpha-1)" in header(app)
            await send(app, pilot, "hello")
            await send_idle(app, pilot)
            assert await profile_events(rt, new_id) == []  # it records nothing: it follows
            reply = (await replies(rt, new_id))[-1]
            assert reply.data["profile"] == "alpha"
            assert reply.data["message"]["source"]["model"] == "alpha-1"


def test_check_key_is_one_line_or_none() -> None:
    """The check every way of sending calls first (retry and edit too)."""
    work = Profile("work", provider="openai", model="m", api_key_env="WORK_KEY")
    assert check_key(work, {}) == (
        "Profile 'work': no API key: set WORK_KEY (or choose another profile)."
    )
    assert check_key(work, {"WORK_KEY": "  "}) is not None  # blank is not a key
    assert check_key(work, {"WORK_KEY": "sk-1"}) is None
    assert check_key(Profile("offline", builtin=True), {}) is None
    assert check_key(None) is None and check_chat_key(None) is None


async def test_switching_with_no_session_open_starts_one_on_that_profile(
    tmp_path: Path,
) -> None:
    """With no session open, the default profile cannot be the only way to begin (its key
    may be missing): the choice starts a new session answered by the profile chosen."""
    async with profile_runtime(tmp_path, seeded=False) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.chat is None
            entry = app.profiles.system_command()
            assert entry.help.startswith("Start a new session answered by another profile")
            await choose_in_palette(app, pilot, "Switch profile", "beta")
            await wait_for(pilot, lambda: app.chat is not None and "beta (beta-1)" in header(app))
            (session,) = await rt.store.list_headers()
            assert app.current_id == session.id
            recorded = await profile_events(rt, session.id)
            assert [e.data for e in recorded] == [
                {"profile": "beta", "provider": "offline", "model": "beta-1"}
            ]
            await send(app, pilot, "Which model answers?")
            await send_idle(app, pilot)
            reply = (await replies(rt, session.id))[-1]
            assert reply.data["profile"] == "beta"
            assert len(await rt.store.list_headers()) == 1  # the send used that session


# --------------------------------------------------------------------------- missing keys

KEYLESS_DEFAULT = PROFILES.replace('default_profile = "alpha"', 'default_profile = "keyless"')


async def on_alpha(store: SqliteSessionStore) -> None:
    await store.append(
        "checkout", SESSION_PROFILE, {"profile": "alpha", "provider": "offline", "model": "alpha-1"}
    )


async def test_a_missing_key_at_start_is_said_and_offline_sessions_still_work(
    tmp_path: Path,
) -> None:
    async with profile_runtime(tmp_path, KEYLESS_DEFAULT, before=on_alpha) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            notice = app.notice.visible_text
            assert f"Profile 'keyless': no API key: set {NO_KEY_ENV}" in notice
            assert app.current_id == "checkout"  # on alpha: it can send
            assert "alpha (alpha-1)" in header(app)
            await send(app, pilot, "still here?")
            await send_idle(app, pilot)
            reply = (await replies(rt, "checkout"))[-1]
            assert reply.data["message"]["source"]["model"] == "alpha-1"
            # Another session follows the default: the header says its key is missing.
            await app.open_session("k8s-upgrade")
            await settle(app, pilot)
            assert "keyless (keyless-model) no API key" in header(app)


async def test_with_the_key_set_nothing_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NO_KEY_ENV, "sk-test")
    async with profile_runtime(tmp_path, KEYLESS_DEFAULT) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.notice.visible_text == ""
            assert "no API key" not in header(app)


async def test_a_send_on_a_keyless_profile_stores_nothing_and_keeps_the_draft(
    tmp_path: Path,
) -> None:
    async def unanswered(store: SqliteSessionStore) -> None:  # a reply that failed to store
        await store.append(
            "checkout", USER_MESSAGE, user_message("no reply yet"), surface_op="append"
        )

    async with profile_runtime(tmp_path, before=unanswered) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.check_action("answer_again", ()) is True
            app.profiles.switch("keyless")
            await wait_for(pilot, lambda: "keyless (keyless-model)" in header(app))
            assert "no API key" in app.notice.visible_text  # said when switching too
            before = await rt.store.read_events("checkout")
            app.notice.clear()
            app.composer.focus()
            await pilot.press(*"keep me")
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert await rt.store.read_events("checkout") == before
            assert app.composer.draft == "keep me"
            assert app.notice.visible_text == (
                f"Profile 'keyless': no API key: set {NO_KEY_ENV} (or choose another profile)."
                " Your message was not sent."
            )
            assert not app.busy
            # Answer again (Ctrl+R, from the palette) checks first too.
            app.notice.clear()
            app.action_answer_again()
            assert app.notice.visible_text.startswith("Profile 'keyless': no API key")
            await pilot.pause(0.2)
            assert not app.busy and await rt.store.read_events("checkout") == before


async def test_no_session_is_created_for_a_message_the_default_cannot_send(
    tmp_path: Path,
) -> None:
    async with profile_runtime(tmp_path, KEYLESS_DEFAULT, seeded=False) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.chat is None
            assert "no API key" in app.notice.visible_text  # at start
            app.composer.focus()
            await pilot.press(*"first words")
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert await rt.store.list_headers() == []
            assert app.composer.draft == "first words"


# --------------------------------------------------------------------------- hostile names

HOSTILE = "[b]evil[/b]\x1b[31m\u202e\nname"


async def hostile_profile(store: SqliteSessionStore) -> None:
    await store.append(
        "checkout",
        SESSION_PROFILE,
        {"profile": HOSTILE, "provider": "[i]x[/i]", "model": "\x07bell"},
    )


async def test_a_hostile_recorded_profile_is_shown_escaped(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path, before=hostile_profile) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "checkout"
            shown = header(app)
            # The default answers; the recorded name is shown as text, escaped, cut short.
            assert shown.startswith("dsh · alpha (alpha-1) not [b]evil[/b]\\x1b[31m")
            assert "\x1b" not in shown and "\u202e" not in shown and "\n" not in shown
            svg = app.export_screenshot()
            assert "\x1b" not in svg and "\u202e" not in svg
            assert "[b]evil[/b]" in svg  # literally: never parsed as markup
            notice = app.notice.visible_text
            assert notice.startswith("This session's profile '[b]evil[/b]\\x1b[31m")
            assert notice.endswith(
                "is not configured any more: it uses the default profile, alpha (alpha-1)."
            )
            # Said once: not again when the session is opened again.
            await app.open_session("k8s-upgrade")
            await app.open_session("checkout")
            await settle(app, pilot)
            assert "not configured" not in app.notice.visible_text
            assert "not [b]evil[/b]" in header(app)
            # Switching records a configured profile: the mark goes.
            app.profiles.switch("alpha")
            await wait_for(pilot, lambda: "not [b]evil" not in header(app))
            assert header(app).startswith("dsh · alpha (alpha-1) · ")


# --------------------------------------------------------------------------- elsewhere


async def test_a_switch_made_elsewhere_is_followed(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert "alpha (alpha-1)" in header(app)
            # Another process (dsh send --profile beta) records the switch.
            async with await SqliteSessionStore.open(tmp_path / "ui.sqlite3") as other:
                await other.append(
                    "checkout",
                    SESSION_PROFILE,
                    {"profile": "beta", "provider": "offline", "model": "beta-1"},
                )
            await wait_for(pilot, lambda: "beta (beta-1)" in header(app))
            assert app.chat is not None and app.chat.profile is not None
            assert app.chat.profile.name == "beta"

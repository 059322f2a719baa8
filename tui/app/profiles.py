"""Profiles in the app: which profile answers the open session, the header's words for it,
"Switch profile…" in the command palette, and the missing-key check before anything is
sent.

``check_key(profile)`` is the one check every way of sending calls first (a message,
answer again, retry, edit): it says in one line why nothing can be sent, or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from textual.app import SystemCommand
from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, SimpleProvider
from textual.content import Content
from textual.screen import Screen

from core.display import single_line
from core.engine import ChatSession
from core.profiles import Profile
from tui.app.busy import Busy
from tui.app.host import AppHost
from tui.app.meter import ContextMeter
from tui.app.statusbar import NO_PROFILE, ProfileShown
from tui.shared.errors import sentence

__all__ = [
    "ProfileChoices",
    "ProfileKeeper",
    "check_chat_key",
    "check_key",
    "profile_label",
]

NAME_CHARS = 24
"""How much of a recorded (unconfigured, so unchecked) profile name the app shows."""


def check_key(profile: Profile | None, env: Mapping[str, str] | None = None) -> str | None:
    """Why nothing can be sent on ``profile`` (its API key is not set), as one sentence;
    ``None`` when it can send. Call it before storing anything: a message that cannot be
    answered is not stored, and the draft stays in the composer."""
    if profile is None:
        return None
    missing = profile.missing_key(env)
    if missing is None:
        return None
    return sentence(single_line(missing, 200))


def check_chat_key(chat: ChatSession | None) -> str | None:
    """``check_key`` of the profile ``chat`` answers with."""
    return None if chat is None else check_key(chat.profile)


def profile_label(profile: Profile) -> str:
    """``work (deepseek-chat)``: a profile as lists show it, one safe line."""
    return f"{single_line(profile.name, 64)} ({single_line(profile.model, 40)})"


class ProfileKeeper:
    """The app's side of profiles: opens a session's chat on its profile, remembers the
    recorded profiles that are no longer configured (said once per session), and switches
    the open session's profile from the palette."""

    def __init__(self, app: AppHost, meter: ContextMeter) -> None:
        self._app = app
        self._meter = meter
        self._instead_of: dict[str, str] = {}
        self._told: set[str] = set()

    # -- opening -------------------------------------------------------------------------

    async def open_chat(self, session_id: str) -> ChatSession:
        """The chat of ``session_id`` on the profile its log names (or the default)."""
        runtime = self._app.runtime
        header = await runtime.store.read_header(session_id)
        chosen = await runtime.session_profile(session_id)
        chat = runtime.chat_for(header, chosen.profile)
        if chosen.note is not None and chosen.recorded is not None:
            self._instead_of[session_id] = chosen.recorded
        else:
            self._instead_of.pop(session_id, None)
        return chat

    async def follow(self) -> None:
        """The open session's profile was switched elsewhere (another window, ``dsh send
        --profile``): answer with that one from now on, as this window shows."""
        app = self._app
        chat = app.chat
        if chat is None or chat.profile is None:
            return
        chosen = await app.runtime.session_profile(chat.session_id)
        same = chosen.profile.name == chat.profile.name
        if app.chat is not chat or app.busy or (same and chosen.note is None):
            return
        if chosen.note is not None and chosen.recorded is not None:
            self._instead_of[chat.session_id] = chosen.recorded
        if not same:
            app.chat = app.runtime.chat_for(chat.header, chosen.profile)
            self._meter.refresh()
        app.update_title()
        self.tell_note(chat.session_id)

    def tell_note(self, session_id: str) -> None:
        """Once per session and run: its recorded profile is no longer configured, and
        which one answers instead."""
        recorded = self._instead_of.get(session_id)
        if recorded is None or session_id in self._told:
            return
        self._told.add(session_id)
        default = self._app.runtime.config.profile()
        self._say(
            f"This session's profile '{single_line(recorded, NAME_CHARS)}' is not configured"
            f" any more: it uses the default profile, {profile_label(default)}."
        )

    def tell_default_key(self) -> None:
        """At start: the default profile cannot send (its key is not set). Sessions on
        other profiles (offline ones) still work."""
        if getattr(self._app.runtime.store, "read_only", False):
            return  # nothing can be sent anyway, and the notice says why
        reason = check_key(self._app.runtime.config.profile())
        if reason is not None:
            self._say(reason)

    def _say(self, text: str) -> None:
        """A warning in the notice line, after what it already says (nothing is lost)."""
        notice = self._app.notice
        shown = notice.visible_text
        notice.show_notice(f"{shown} {text}" if shown else text, warning=True)

    # -- the header ----------------------------------------------------------------------

    def shown(self) -> ProfileShown:
        """The open session's profile as the header shows it (the default's with no
        session open)."""
        app = self._app
        if not app.has_runtime:
            return NO_PROFILE
        chat = app.chat
        profile = chat.profile if chat is not None else None
        if profile is None:
            profile = app.runtime.config.profile()
        instead_of = self._instead_of.get(chat.session_id) if chat is not None else None
        return ProfileShown(
            profile.name,
            profile.model,
            instead_of=instead_of,
            no_key=profile.missing_key() is not None,
        )

    # -- sending -------------------------------------------------------------------------

    def send_blocked(self) -> str | None:
        """Why a message cannot be sent now on the open session's profile (a new session
        would take the default's); ``None`` when it can."""
        app = self._app
        if not app.has_runtime:
            return None
        chat = app.chat
        profile = chat.profile if chat is not None else app.runtime.config.profile()
        return check_key(profile)

    # -- switching -----------------------------------------------------------------------

    def system_command(self) -> SystemCommand:
        """The palette's "Switch profile…" entry."""
        app = self._app
        if app.chat is None:
            help_text = "Start a new session answered by another profile than the default"
        else:
            current = app.chat.profile
            name = single_line(current.name, 64) if current is not None else "?"
            help_text = (
                f"Answer this session with another profile from the next message (now {name})"
            )
        return SystemCommand("Switch profile…", help_text, self.choose)

    def why_not_switch(self) -> str | None:
        """Why the open session's profile cannot be switched now (``None``: it can)."""
        app = self._app
        if getattr(app.runtime.store, "read_only", False):
            return f"{app.read_only_why()}: the profile cannot be switched."
        owner = app.foreign_owner
        if owner is not None:
            return app.foreign_notice(owner)
        if app.activity.state in (Busy.CREATING, Busy.COMPACTING):
            return "Wait a moment: the profile can be switched once this is done."
        return None

    def choose(self) -> None:
        """Open the list of configured profiles (the current one marked)."""
        app = self._app
        why = self.why_not_switch()
        if why is not None:
            app.notice.show_notice(why, warning=True)
            return
        # No session open: the choice starts one (a new session would take the default).
        profile = app.chat.profile if app.chat is not None else app.runtime.config.profile()
        current = profile.name if profile is not None else None
        choices = ProfileChoices(
            app.screen,
            [
                (profile, profile.name == current)
                for profile in sorted(app.runtime.config.profiles.values(), key=lambda p: p.name)
            ],
            self.switch,
        )
        # A ready-made SimpleProvider, as App.search_commands passes one (typed as a class).
        palette = CommandPalette(providers=[choices], placeholder="Switch profile…")  # type: ignore[list-item]
        app.push_screen(palette)

    def switch(self, name: str) -> None:
        """Switch the open session to profile ``name`` (from the next message on)."""
        why = self.why_not_switch()
        if why is not None:
            self._app.notice.show_notice(why, warning=True)
            return
        self._app.run_worker(
            partial(self._switch, self._app.chat, name), group="switch-profile", exclusive=True
        )

    async def _switch(self, chat: ChatSession | None, name: str) -> None:
        """Switch ``chat`` to profile ``name``; ``None``: start a new session on it."""
        app = self._app
        if chat is None:
            with app.faults("start a new session") as guard:
                chat = await app.ensure_session()
            if guard.failed or chat is None:
                return
        with app.faults("switch the profile") as guard:
            switched = await app.runtime.switch_profile(chat, name)
        if guard.failed:
            return
        self._instead_of.pop(chat.session_id, None)
        if app.current_id == chat.session_id:
            # A reply under way keeps the chat it started with; the next message uses this.
            app.chat = switched
            app.update_title()
            self._meter.refresh()
        profile = switched.profile
        assert profile is not None
        text = f"This session now uses {profile_label(profile)} from the next message on."
        reason = check_key(profile)
        if reason is not None:
            app.notice.show_notice(f"{text} {reason}", warning=True)
        else:
            app.notify(text)


class ProfileChoices(SimpleProvider):
    """The palette's list of profiles: ``work (deepseek-chat)``, the current one marked.
    Names and models are shown as plain ``Content``, never parsed as markup. (A
    ``SimpleProvider``: the palette takes it as it is, ready made.)"""

    def __init__(
        self,
        screen: Screen[Any],
        profiles: list[tuple[Profile, bool]],
        choose: Callable[[str], None],
    ) -> None:
        super().__init__(screen, [])
        self._profiles = profiles
        self._choose = choose

    def _rows(self) -> list[tuple[str, str, Callable[[], None]]]:
        rows: list[tuple[str, str, Callable[[], None]]] = []
        for profile, current in self._profiles:
            label = profile_label(profile) + ("  ✓ current" if current else "")
            missing = profile.missing_key()
            help_text = (
                "The profile this session uses now"
                if current
                else (
                    sentence(single_line(missing, 200))
                    if missing
                    else "Use it from the next message"
                )
            )
            rows.append((label, help_text, partial(self._choose, profile.name)))
        return rows

    async def discover(self) -> Hits:
        for label, help_text, callback in self._rows():
            yield DiscoveryHit(Content(label), callback, text=label, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, help_text, callback in self._rows():
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, Content(label), callback, text=label, help=help_text)

"""``dsh profiles`` and ``dsh new --profile``: the configured model set-ups, and a session
that starts on one of them.

A profile's key is never shown, read or written here: only the name of the variable that
holds it, and whether that variable is set (``Profile.missing_key``).
"""

from __future__ import annotations

import sys

from core.config import DshConfig
from core.display import single_line, terminal_json
from core.log import SESSION_PROFILE, NewEvent, SessionHeader, new_message_id, now_ms
from core.profiles import Profile
from tui.cli.subparsers import add_profiles_parser as add_parser
from tui.shared.logevents import NAME_CHARS
from tui.shared.runtime import Runtime, profile_event_data

__all__ = ["add_parser", "new_session_on", "print_profiles", "profile_rows"]


def _key_cell(profile: Profile) -> str:
    if profile.provider == "offline" or not profile.api_key_env:
        return "—"
    variable = single_line(profile.api_key_env)
    return variable if profile.missing_key() is None else f"{variable} (not set)"


def profile_rows(config: DshConfig) -> list[tuple[str, str, str, str, str]]:
    """One escaped row per profile, by name: name, provider, model, default, key."""
    return [
        (
            single_line(p.name, NAME_CHARS),
            single_line(p.provider, 40),
            single_line(p.model, 80),
            "yes" if p.name == config.default_profile else "",
            _key_cell(p),
        )
        for p in sorted(config.profiles.values(), key=lambda p: p.name)
    ]


def print_profiles(config: DshConfig, as_json: bool) -> int:
    """``dsh profiles``: needs the config only (no database is opened)."""
    if as_json:
        listed = [
            {
                "name": p.name,
                "provider": p.provider,
                "model": p.model,
                "default": p.name == config.default_profile,
            }
            for p in sorted(config.profiles.values(), key=lambda p: p.name)
        ]
        print(terminal_json(listed))
        return 0
    head = ("profile", "provider", "model", "default", "key")
    rows = profile_rows(config)
    if not sys.stdout.isatty():  # a pipe or a file: each row's cells by tabs, no padding
        for row in [head, *rows]:
            sys.stdout.write("\t".join(row) + "\n")
        return 0
    from tui.cli.output import print_aligned  # Rich loads only to draw

    print_aligned(head, rows)
    return 0


async def new_session_on(rt: Runtime, name: str, cwd: str | None) -> SessionHeader:
    """A new session that records profile ``name`` (one transaction: the session and its
    ``session/profile`` event, or nothing). An unknown name is a ``ProfileError`` before
    anything is created; a key not set is a note on stderr (nothing is sent yet)."""
    profile = rt.config.profile(name)
    header = SessionHeader(new_message_id(), now_ms(), cwd)
    made = await rt.store.import_session(
        header, [NewEvent(SESSION_PROFILE, profile_event_data(profile))]
    )
    missing = profile.missing_key()
    if missing is not None:
        print(f"dsh: note: {single_line(missing)}", file=sys.stderr)
    return made

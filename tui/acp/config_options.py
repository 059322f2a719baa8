"""The session's profile as an ACP session config option (``configOptions``).

ACP (schema v1.19, protocol version 1) offers two ways to let a client choose: session
modes (``session/set_mode``: how the agent works, e.g. "ask" or "code") and session config
options (``session/set_config_option``: any select, with a semantic ``category``; the one
for "which model answers" is ``"model"``). It has no session models (no ``session/set_model``
in this version). A profile is a model set-up, so it is the select option ``profile`` of
category ``model``: its options are the configured profiles, its current value the one the
session answers with. Select options need no client capability (only boolean ones do).
"""

from __future__ import annotations

from collections.abc import Mapping

from acp import RequestError
from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
)

from core.profiles import Profile
from tui.acp.text import client_label

__all__ = [
    "PROFILE_OPTION",
    "SessionConfigOption",
    "missing_key_error",
    "profile_options",
    "unknown_option_error",
    "unknown_profile_error",
]

INVALID_PARAMS = -32602
PROFILE_OPTION = "profile"
NAME_ECHO = 60
"""How much of a value the client sent an error echoes (a client may send megabytes)."""
DESCRIPTION_CHARS = 200

SessionConfigOption = SessionConfigOptionSelect | SessionConfigOptionBoolean
"""One entry of ``configOptions`` (the lists in the schema's responses are of these)."""


def _choice(profile: Profile) -> SessionConfigSelectOption:
    # Names are checked when the config is read; provider and model are config text.
    return SessionConfigSelectOption(
        value=profile.name,
        name=client_label(profile.name, NAME_ECHO),
        description=client_label(f"{profile.provider} · {profile.model}", DESCRIPTION_CHARS),
    )


def profile_options(
    profiles: Mapping[str, Profile], current: Profile, note: str | None = None
) -> list[SessionConfigOption]:
    """The session's config options: the ``profile`` select, its current value the profile
    that answers (``note``: why it is not the one the log records, shown as the option's
    description)."""
    description = "The model set-up that answers in this session (profiles in your dsh config)"
    if note is not None:
        description = client_label(note, DESCRIPTION_CHARS)
    return [
        SessionConfigOptionSelect(
            id=PROFILE_OPTION,
            name="Profile",
            description=description,
            category="model",
            type="select",
            current_value=current.name,
            options=[_choice(p) for p in profiles.values()],
        )
    ]


def unknown_option_error(config_id: str) -> RequestError:
    shown = client_label(config_id, NAME_ECHO)
    return RequestError(
        INVALID_PARAMS,
        f"unknown config option '{shown}': dsh has one, '{PROFILE_OPTION}'",
        {"configId": shown},
    )


def unknown_profile_error(value: object, profiles: Mapping[str, Profile]) -> RequestError:
    """The value of a ``session/set_config_option`` that names no configured profile."""
    choices = list(profiles)
    if isinstance(value, str):
        shown = client_label(value, NAME_ECHO)
        what = f"unknown profile '{shown}'"
    else:  # a boolean request (`"type": "boolean"`)
        shown = client_label(repr(value), NAME_ECHO)
        what = f"the {PROFILE_OPTION} option takes a profile name, not {shown}"
    return RequestError(
        INVALID_PARAMS,
        f"{what}: choose one of {', '.join(choices)}",
        {"configId": PROFILE_OPTION, "value": shown, "choices": choices},
    )


def missing_key_error(profile: Profile, session_id: str) -> RequestError | None:
    """The prompt's error when ``profile`` needs an API key that is not set (``None`` when
    the key is there or not needed): said before anything is stored."""
    missing = profile.missing_key()
    if missing is None:
        return None
    return RequestError(
        INVALID_PARAMS,
        f"{client_label(missing)} — nothing was sent",
        {"sessionId": session_id, "profile": profile.name, "keyEnv": profile.api_key_env},
    )

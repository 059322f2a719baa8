"""A config file with profiles for the agent subprocess, and reading what it stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.log import Event
from stores import SessionQuery, open_store

__all__ = ["ABSENT_KEY", "PROFILES", "profile_events", "replies", "surface", "write_config"]

ABSENT_KEY = "DSH_TEST_ACP_ABSENT_KEY"
"""An API key variable no test environment sets."""

PROFILES = """
[profiles.alpha]
provider = "offline"
model = "echo-alpha"

[profiles.beta]
provider = "offline"
model = "echo-beta"

[profiles.cloud]
provider = "openai"
model = "cloud-model"
base_url = "http://127.0.0.1:9"
api_key_env = "{key}"
"""


def write_config(tmp_path: Path, default: str = "alpha", extra: str = "") -> Path:
    """``$XDG_CONFIG_HOME/dsh/config.toml`` (the harness's config dir) with the profiles
    ``alpha`` and ``beta`` (offline, models ``echo-alpha``/``echo-beta``) and ``cloud``
    (needs ``ABSENT_KEY``); ``default`` is the default profile."""
    path = tmp_path / "config" / "dsh" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'default_profile = "{default}"\n' + PROFILES.format(key=ABSENT_KEY) + extra
    path.write_text(text, encoding="utf-8")
    return path


async def surface(db: Path | str, session_id: str) -> list[Event]:
    async with await open_store(db) as store:
        return list((await SessionQuery(store).read_surface(session_id)).events)


def replies(events: list[Event]) -> list[tuple[Any, Any]]:
    """``(profile, model)`` of every stored reply, in log order."""
    return [
        (e.data.get("profile"), e.data["message"]["source"].get("model"))
        for e in events
        if e.type == "assistant/message"
    ]


def profile_events(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.type == "session/profile"]

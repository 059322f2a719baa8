"""Profiles: named model set-ups (provider, model, key variable, system prompt, limits, prices).

```toml
default_profile = "work"
[profiles.work]
provider = "openai"
base_url = "https://api.deepseek.com"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"
system_prompt = "You are terse."     # or system_prompt_file = "~/prompts/work.md"
temperature = 0.2
max_output_tokens = 4096
context_window = 128000
price_input = 0.27                   # per million tokens, optional
price_output = 1.10
```

``offline`` is built in. The top-level ``provider``/``model``/``base_url``/``api_key_env``
settings (the single-model configuration of earlier versions) make the profile ``default``
when they name a provider other than the offline one. The default profile is
``default_profile`` (or ``$DSH_PROFILE``), else ``default`` when it exists, else ``offline``.
A session's profile is the latest ``session/profile`` event in its log; a session without one
follows the default.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import DshError
from core.jsoncodec import utf8_len

__all__ = [
    "BUILTIN_PROFILES",
    "DEFAULT_CONTEXT_WINDOW",
    "LEGACY_PROFILE",
    "MAX_SYSTEM_PROMPT_BYTES",
    "OFFLINE_PROFILE",
    "PROFILE_KEYS",
    "Profile",
    "ProfileError",
    "check_profile_name",
    "parse_profile",
]

OFFLINE_PROFILE = "offline"
LEGACY_PROFILE = "default"
DEFAULT_CONTEXT_WINDOW = 128_000
"""The context window assumed when a profile does not say (the meter marks it as assumed)."""
MAX_SYSTEM_PROMPT_BYTES = 256 * 1024
PROFILE_KEYS = frozenset(
    {
        "provider",
        "base_url",
        "model",
        "api_key_env",
        "system_prompt",
        "system_prompt_file",
        "temperature",
        "max_output_tokens",
        "context_window",
        "price_input",
        "price_output",
    }
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


class ProfileError(DshError):
    """A profile cannot be used (unknown, or its prompt file unreadable); one line."""


@dataclass(frozen=True, slots=True)
class Profile:
    """One model set-up. ``system_prompt`` ``None`` means dsh's built-in prompt."""

    name: str
    provider: str = "offline"
    model: str = "echo-1"
    base_url: str = "https://api.deepseek.com"
    api_key_env: str | None = None
    system_prompt: str | None = None
    system_prompt_file: Path | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    context_window: int | None = None
    price_input: float | None = None
    price_output: float | None = None
    builtin: bool = False

    @property
    def has_prices(self) -> bool:
        return self.price_input is not None and self.price_output is not None

    @property
    def window(self) -> int:
        """The context window, or ``DEFAULT_CONTEXT_WINDOW`` when the profile does not say."""
        return self.context_window or DEFAULT_CONTEXT_WINDOW

    def missing_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """One line saying the key is missing (``None`` when it is set or not needed)."""
        if self.provider == OFFLINE_PROFILE or not self.api_key_env:
            return None
        env = os.environ if env is None else env
        if (env.get(self.api_key_env) or "").strip():
            return None
        return (
            f"profile {self.name!r}: no API key: set {self.api_key_env} (or choose another profile)"
        )

    def system_text(self, builtin: str) -> str:
        """The system prompt: inline, else the file's text (read now), else ``builtin``."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.system_prompt_file is None:
            return builtin
        return read_prompt_file(self.system_prompt_file, self.name)

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        """What ``input_tokens`` and ``output_tokens`` cost at this profile's prices."""
        if self.price_input is None or self.price_output is None:
            return None
        return (input_tokens * self.price_input + output_tokens * self.price_output) / 1e6


BUILTIN_PROFILES: Mapping[str, Profile] = {
    OFFLINE_PROFILE: Profile(OFFLINE_PROFILE, builtin=True),
}


def check_profile_name(name: object, where: str = "profile") -> str:
    """``name`` when it is a usable profile name (letters, digits, ``.``, ``_``, ``-``; at
    most 64), else a ``ProfileError`` that shows it escaped."""
    if not isinstance(name, str) or not _NAME.match(name):
        shown = ascii(name) if isinstance(name, str) else type(name).__name__
        raise ProfileError(
            f"{where}: invalid profile name {shown}: use letters, digits, '.', '_' or '-'"
            " (at most 64, starting with a letter or digit)"
        )
    return name


def read_prompt_file(path: Path, profile: str) -> str:
    """A system prompt file's text: a regular UTF-8 file of at most
    ``MAX_SYSTEM_PROMPT_BYTES`` (a FIFO or device is refused, never waited on)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    where = f"profile {profile!r}: system_prompt_file {os.fspath(path)!r}"
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ProfileError(f"{where}: {reason}") from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProfileError(f"{where}: not a regular file")
        data = bytearray()
        while chunk := os.read(fd, 65536):
            data += chunk
            if len(data) > MAX_SYSTEM_PROMPT_BYTES:
                raise ProfileError(f"{where}: larger than {MAX_SYSTEM_PROMPT_BYTES} bytes")
    except OSError as err:
        raise ProfileError(f"{where}: {err.strerror or err}") from err
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ProfileError(f"{where}: not UTF-8 ({err.reason})") from err


def _number(where: str, key: str, value: object, *, low: float, high: float) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ProfileError(f"{where}: {key} must be a number from {low:g} to {high:g}")
    return float(value)


def _count(where: str, key: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 100_000_000:
        raise ProfileError(f"{where}: {key} must be a positive integer")
    return value


def _text(where: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ProfileError(f"{where}: {key} must be a non-empty string")
    if "\0" in value:
        raise ProfileError(f"{where}: {key} contains a NUL character")
    return value


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


def parse_profile(
    name: str, raw: Mapping[str, Any], where: str, providers: tuple[str, ...]
) -> Profile:
    """One ``[profiles.NAME]`` table, checked; every problem is one ``ProfileError`` line."""
    check_profile_name(name, where)
    at = f"{where}: profiles.{name}"
    unknown = set(raw) - PROFILE_KEYS
    if unknown:
        raise ProfileError(f"{at}: unknown setting {sorted(unknown)[0]!r}")
    provider = _text(at, "provider", raw.get("provider", "openai"))
    if provider not in providers:
        raise ProfileError(
            f"{at}: unknown provider {provider!r}: choose one of {', '.join(providers)}"
        )
    values: dict[str, Any] = {"provider": provider}
    if provider == OFFLINE_PROFILE:
        values["model"] = _text(at, "model", raw.get("model", "echo-1"))
    else:
        values["model"] = _text(at, "model", raw.get("model", "deepseek-chat"))
        values["api_key_env"] = _text(at, "api_key_env", raw.get("api_key_env", "DEEPSEEK_API_KEY"))
        if not _ENV_NAME.match(values["api_key_env"]):
            raise ProfileError(f"{at}: api_key_env must name an environment variable")
    if "base_url" in raw:
        base_url = _text(at, "base_url", raw["base_url"])
        if not base_url.startswith(("http://", "https://")):
            raise ProfileError(f"{at}: base_url must start with http:// or https://")
        values["base_url"] = base_url
    if "system_prompt" in raw and "system_prompt_file" in raw:
        raise ProfileError(f"{at}: give system_prompt or system_prompt_file, not both")
    if "system_prompt" in raw:
        prompt = raw["system_prompt"]
        if not isinstance(prompt, str):
            raise ProfileError(f"{at}: system_prompt must be a string")
        if utf8_len(prompt) > MAX_SYSTEM_PROMPT_BYTES:
            raise ProfileError(
                f"{at}: system_prompt is larger than {MAX_SYSTEM_PROMPT_BYTES} bytes"
            )
        values["system_prompt"] = prompt
    if "system_prompt_file" in raw:
        values["system_prompt_file"] = _expand(
            _text(at, "system_prompt_file", raw["system_prompt_file"])
        )
    if "temperature" in raw:
        values["temperature"] = _number(at, "temperature", raw["temperature"], low=0, high=2)
    for key in ("max_output_tokens", "context_window"):
        if key in raw:
            values[key] = _count(at, key, raw[key])
    for key in ("price_input", "price_output"):
        if key in raw:
            values[key] = _number(at, key, raw[key], low=0, high=1e6)
    if ("price_input" in values) != ("price_output" in values):
        raise ProfileError(f"{at}: give both price_input and price_output, or neither")
    return Profile(name, **values)

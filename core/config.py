"""Configuration: a TOML file in the user config directory, then environment overrides.

Precedence (lowest first): built-in defaults → ``config.toml`` → ``DSH_*`` environment
variables → command-line options (``--db``). Every problem becomes one ``ConfigError`` line.

```toml
provider = "offline"            # or "openai" (any OpenAI-compatible endpoint)
model = "deepseek-chat"
base_url = "https://api.deepseek.com"
api_key_env = "DEEPSEEK_API_KEY"
database = "~/somewhere/dsh.sqlite3"
reply_timeout = 600             # seconds for one whole reply
max_reply_bytes = 4194304       # the most a reply (or one event of it) may hold

[references]
max_references = 3
candidate_limit = 50
max_reference_bytes = 65536

[postgres]                      # a team store (database = "postgresql://…")
lock_timeout = 10               # seconds a statement waits for another connection's lock
statement_timeout = 120         # seconds one statement may run
pooler = false                  # true behind PgBouncer in transaction mode (found by itself too)
```
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.errors import DshError
from core.profiles import (
    LEGACY_PROFILE,
    OFFLINE_PROFILE,
    Profile,
    ProfileError,
    check_profile_name,
    parse_profile,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "PROVIDERS",
    "ConfigError",
    "DshConfig",
    "PostgresLimits",
    "ReferenceLimits",
    "database_location",
    "database_path",
    "default_config_path",
    "default_database_path",
    "default_location",
    "is_database_url",
    "load_config",
]

PROVIDERS = ("offline", "openai")
DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
OFFLINE_MODEL = "echo-1"


class ConfigError(DshError):
    """The configuration cannot be used; the message is one line naming the culprit."""


@dataclass(frozen=True, slots=True)
class ReferenceLimits:
    max_references: int = 3
    candidate_limit: int = 50
    max_reference_bytes: int = 65536


@dataclass(frozen=True, slots=True)
class PostgresLimits:
    """How long one statement on a PostgreSQL store may wait for another connection's lock,
    and run at all (seconds): a member holding a lock, or a query gone wrong, costs the
    others one clear error, never a hang."""

    lock_timeout: float = 10.0
    statement_timeout: float = 120.0
    pooler: bool = False
    """A transaction-pooling proxy (PgBouncer) stands between dsh and the server: settings
    per transaction, no prepared statements kept, other writers followed by polling. dsh
    also finds a pooler by itself when it refuses dsh's startup parameters."""


@dataclass(frozen=True, slots=True)
class DshConfig:
    provider: str = "offline"
    model: str | None = None
    base_url: str = DEFAULT_BASE_URL
    api_key_env: str = "DEEPSEEK_API_KEY"
    # A SQLite file, or a ``postgresql://`` URL (kept as the ``str`` the user wrote).
    database: Path | str = field(default_factory=lambda: default_database_path())
    references: ReferenceLimits = field(default_factory=ReferenceLimits)
    config_path: Path | None = None
    reply_timeout: float = 600.0
    max_reply_bytes: int = 4 * 1024 * 1024
    postgres: PostgresLimits = field(default_factory=PostgresLimits)
    # Every profile by name (``offline`` built in), and the one new sessions use.
    profiles: Mapping[str, Profile] = field(default_factory=lambda: _profiles_of(None))
    default_profile: str = OFFLINE_PROFILE

    @property
    def effective_model(self) -> str:
        if self.model:
            return self.model
        return OFFLINE_MODEL if self.provider == "offline" else DEFAULT_MODEL

    def profile(self, name: str | None = None) -> Profile:
        """The profile ``name`` (the default one when ``None``); an unknown name is a
        ``ProfileError`` listing the configured ones."""
        if name is None:
            name = self.default_profile
        found = self.profiles.get(name)
        if found is None:
            choices = ", ".join(sorted(self.profiles))
            raise ProfileError(f"unknown profile {name!r}: choose one of {choices}")
        return found

    def with_database(self, path: str | os.PathLike[str]) -> DshConfig:
        """The database given on the command line (``--db``): a relative path means the
        file in the current directory, as the user typed it in their shell; a
        ``postgresql://`` URL is taken as it is."""
        return replace(self, database=database_location(os.fspath(path), "--db", relative_ok=True))


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("DSH_CONFIG"):
        return _expand(env["DSH_CONFIG"])
    import platformdirs  # loaded only when the default is wanted (a command's start)

    return Path(platformdirs.user_config_dir("dsh")) / "config.toml"


def default_location() -> Path | str:
    """Where the sessions are when no ``--db`` or config says otherwise: ``$DSH_DB`` when
    set (a ``postgresql://`` URL as it is; a path with ``~`` and ``$VAR`` expanded, and a
    path still relative is a ``ConfigError``, as in the config), otherwise ``dsh.sqlite3``
    in the platform's user data directory (e.g. ``~/.local/share/dsh``). Only computes the
    location; opening the store creates missing parent directories."""
    override = os.environ.get("DSH_DB")
    if override:
        return database_location(override, "DSH_DB")
    return _user_database()


def default_database_path() -> Path:
    """The default SQLite file: :func:`default_location` when it is a path, else the
    platform's (``$DSH_DB`` names a server)."""
    location = default_location()
    if isinstance(location, Path):
        return location
    return _user_database()


def _user_database() -> Path:
    """``dsh.sqlite3`` in the platform's user data directory."""
    import platformdirs

    return Path(platformdirs.user_data_dir("dsh")) / "dsh.sqlite3"


DATABASE_URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(value: str | os.PathLike[str]) -> bool:
    """Whether a ``database`` setting names a server (a ``postgresql://`` URL), not a file."""
    return isinstance(value, str) and value[:13].lower().startswith(DATABASE_URL_SCHEMES)


def database_location(
    value: str, setting: str, env: Mapping[str, str] | None = None, *, relative_ok: bool = False
) -> Path | str:
    """A ``postgresql://`` URL as it is, else :func:`database_path` of ``value``."""
    if is_database_url(value):
        if "\0" in value:
            raise ConfigError(f"{setting}: the database URL contains a NUL character")
        return value
    return database_path(value, setting, env, relative_ok=relative_ok)


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


_VARIABLE = re.compile(r"\$(?:(\w+)|\{([^}]*)\})", re.ASCII)


def database_path(
    value: str, setting: str, env: Mapping[str, str] | None = None, *, relative_ok: bool = False
) -> Path:
    """``value`` with ``~``, ``~user``, ``$VAR`` and ``${VAR}`` expanded, as an absolute path.

    A relative path would silently give every working directory its own empty database, so
    it is a ``ConfigError`` naming ``setting`` (unless ``relative_ok``, for ``--db``: then it
    is made absolute against the current directory), as are an unknown user, an undefined
    variable and a NUL character.
    """
    env = os.environ if env is None else env
    if "\0" in value:
        raise ConfigError(f"{setting}: the database path contains a NUL character")
    home, rest = "", value
    if value.startswith("~"):  # the home directory is taken as is, never expanded again
        user, sep, rest = value[1:].partition("/")
        home = (env.get("HOME") if not user else None) or os.path.expanduser("~" + user)
        if home.startswith("~"):
            who = f"unknown user {user!r}" if user else "no home directory"
            raise ConfigError(f"{setting}: cannot expand {'~' + user!r} in {value!r} ({who})")
        home = home.rstrip("/") + sep if sep else home

    def variable(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if not name or name not in env:
            raise ConfigError(
                f"{setting}: the database path {value!r} uses {match.group(0)!r}, which is not set"
            )
        return env[name]

    path = home + _VARIABLE.sub(variable, rest)
    if "\0" in path:
        raise ConfigError(f"{setting}: the database path contains a NUL character")
    result = Path(path)
    if not result.is_absolute():
        if not relative_ok:
            raise ConfigError(
                f"{setting}: the database path {value!r} is relative; give an absolute path"
                " (~ and $VAR are expanded)"
            )
        result = Path.cwd() / result
    return result


_TOP_KEYS = {"provider", "model", "base_url", "api_key_env", "database", "references", "postgres"}
_TOP_KEYS |= {"profiles", "default_profile"}
_REPLY_KEYS = {"reply_timeout": "DSH_REPLY_TIMEOUT", "max_reply_bytes": "DSH_MAX_REPLY_BYTES"}
_TOP_KEYS |= set(_REPLY_KEYS)
_REF_KEYS = {"max_references", "candidate_limit", "max_reference_bytes"}
_PG_KEYS = {"lock_timeout": "DSH_PG_LOCK_TIMEOUT", "statement_timeout": "DSH_PG_STATEMENT_TIMEOUT"}
_ENV_STR = {
    "DSH_PROVIDER": "provider",
    "DSH_MODEL": "model",
    "DSH_BASE_URL": "base_url",
    "DSH_API_KEY_ENV": "api_key_env",
    "DSH_DB": "database",
    "DSH_PROFILE": "default_profile",
}
_ENV_INT = {
    "DSH_MAX_REFERENCES": "max_references",
    "DSH_CANDIDATE_LIMIT": "candidate_limit",
    "DSH_MAX_REFERENCE_BYTES": "max_reference_bytes",
}


MAX_CONFIG_BYTES = 1024 * 1024
"""A config file is a few lines; anything bigger (``/dev/zero``, a mistaken path) is refused."""


def _read_toml(path: Path) -> dict[str, Any]:
    """The parsed file, ``{}`` when it does not exist. Only a regular file is read (a FIFO
    would block, a device never end), and at most ``MAX_CONFIG_BYTES``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ConfigError(f"cannot read config file {path}: {reason}") from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"cannot read config file {path}: not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from err
    finally:
        os.close(fd)
    import tomllib  # only a config file that exists is parsed

    try:
        return tomllib.loads(b"".join(chunks).decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"invalid config file {path}: not UTF-8 ({err.reason})") from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"invalid config file {path}: {err}") from err


def _check_str(where: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string")
    return value


def _check_limit(where: str, key: str, value: object, field: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigError(f"{where}: {key} must be a positive integer") from None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a positive integer")
    if field == "max_references" and value > 3:
        raise ConfigError(f"{where}: {key} must be at most 3")
    return value


def _reply_limits(raw: Mapping[str, Any], where: str, env: Mapping[str, str]) -> dict[str, Any]:
    """``reply_timeout`` (positive seconds) and ``max_reply_bytes`` (positive int) from the
    file, then from ``DSH_REPLY_TIMEOUT`` / ``DSH_MAX_REPLY_BYTES``."""
    found: dict[str, Any] = {}
    for key, var in _REPLY_KEYS.items():
        for origin, name, value in ((where, key, raw.get(key)), ("environment", var, env.get(var))):
            if value is None or value == "":
                continue
            if key == "max_reply_bytes":
                found[key] = _check_limit(origin, name, value, key)
                continue
            found[key] = _seconds(origin, name, value)
    return found


def _seconds(origin: str, name: str, value: object) -> float:
    """A positive, finite number of seconds (a string from the environment is parsed)."""
    number: object = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if (
        not isinstance(number, int | float)
        or isinstance(number, bool)
        or not 0 < number < float("inf")
    ):
        raise ConfigError(f"{origin}: {name} must be a positive number of seconds")
    return float(number)


def _postgres_limits(raw: Mapping[str, Any], where: str, env: Mapping[str, str]) -> PostgresLimits:
    """``[postgres]`` ``lock_timeout``, ``statement_timeout`` and ``pooler`` from the file,
    then from ``DSH_PG_LOCK_TIMEOUT`` / ``DSH_PG_STATEMENT_TIMEOUT`` / ``DSH_PG_POOLER``."""
    section = raw.get("postgres", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: [postgres] must be a table")
    unknown = set(section) - set(_PG_KEYS) - {"pooler"}
    if unknown:
        raise ConfigError(f"{where}: unknown setting postgres.{sorted(unknown)[0]}")
    found: dict[str, Any] = {}
    if "pooler" in section:
        if not isinstance(section["pooler"], bool):
            raise ConfigError(f"{where}: postgres.pooler must be true or false")
        found["pooler"] = section["pooler"]
    if env.get("DSH_PG_POOLER"):
        flag = env["DSH_PG_POOLER"].strip().lower()
        if flag not in ("1", "0", "true", "false", "yes", "no"):
            raise ConfigError("environment: DSH_PG_POOLER must be 1 or 0")
        found["pooler"] = flag in ("1", "true", "yes")
    for key, var in _PG_KEYS.items():
        if section.get(key) is not None:
            found[key] = _seconds(where, f"postgres.{key}", section[key])
        if env.get(var):
            found[key] = _seconds("environment", var, env[var])
    return PostgresLimits(**found)


def load_config(
    env: Mapping[str, str] | None = None, *, config_path: Path | None = None
) -> DshConfig:
    """Build the effective configuration from the file and the environment."""
    env = os.environ if env is None else env
    path = config_path if config_path is not None else default_config_path(env)
    raw = _read_toml(path)
    where = str(path)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown setting {sorted(unknown)[0]!r}")
    values: dict[str, Any] = {}
    for key in ("provider", "model", "base_url", "api_key_env", "database", "default_profile"):
        if key in raw:
            values[key] = _check_str(where, key, raw[key])
    refs_raw = raw.get("references", {})
    if not isinstance(refs_raw, dict):
        raise ConfigError(f"{where}: [references] must be a table")
    unknown = set(refs_raw) - _REF_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown setting references.{sorted(unknown)[0]}")
    limits = {k: _check_limit(where, f"references.{k}", v, k) for k, v in refs_raw.items()}

    for var, key in _ENV_STR.items():
        if env.get(var):
            values[key] = _check_str("environment", var, env[var])
    for var, key in _ENV_INT.items():
        if env.get(var):
            limits[key] = _check_limit("environment", var, env[var], key)

    database_from = "DSH_DB" if env.get("DSH_DB") else f"{where}: database"
    database = (
        database_location(values["database"], database_from, env)
        if "database" in values
        else default_database_path()
    )
    provider = values.get("provider", "offline")
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}: choose one of {', '.join(PROVIDERS)}")
    base_url = values.get("base_url", DEFAULT_BASE_URL)
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
    model = values.get("model")
    api_key_env = values.get("api_key_env", "DEEPSEEK_API_KEY")
    legacy = (
        Profile(
            LEGACY_PROFILE,
            provider=provider,
            model=model or DEFAULT_MODEL,
            base_url=base_url,
            api_key_env=api_key_env,
        )
        if provider != "offline"
        else None
    )
    offline = Profile(
        OFFLINE_PROFILE,
        model=(model if provider == "offline" else None) or OFFLINE_MODEL,
        builtin=True,
    )
    try:
        profiles = _profiles_of(raw.get("profiles"), where, legacy=legacy, offline=offline)
        default = values.get("default_profile") or (
            LEGACY_PROFILE if LEGACY_PROFILE in profiles else OFFLINE_PROFILE
        )
        origin = (
            "environment: DSH_PROFILE" if env.get("DSH_PROFILE") else f"{where}: default_profile"
        )
        check_profile_name(default, origin)
    except ProfileError as err:
        raise ConfigError(str(err)) from None
    if default not in profiles:
        raise ConfigError(
            f"{origin}: {default!r} is not a profile: choose one of {', '.join(sorted(profiles))}"
        )
    return DshConfig(
        profiles=profiles,
        default_profile=default,
        provider=provider,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        database=database,
        references=ReferenceLimits(**limits),
        config_path=path,
        postgres=_postgres_limits(raw, where, env),
        **_reply_limits(raw, where, env),
    )


def _profiles_of(
    section: object,
    where: str = "config",
    *,
    legacy: Profile | None = None,
    offline: Profile | None = None,
) -> dict[str, Profile]:
    """``offline``, the top-level settings' ``default`` (when they name a provider), then
    every ``[profiles.NAME]`` table; raises ``ProfileError``."""
    profiles = {OFFLINE_PROFILE: offline or Profile(OFFLINE_PROFILE, builtin=True)}
    if legacy is not None:
        profiles[LEGACY_PROFILE] = legacy
    if section is None:
        return profiles
    if not isinstance(section, dict):
        raise ProfileError(f"{where}: [profiles] must be a table of tables")
    for name, table in section.items():
        check_profile_name(name, where)
        if not isinstance(table, dict):
            raise ProfileError(f"{where}: profiles.{name} must be a table")
        if name == OFFLINE_PROFILE:
            raise ProfileError(
                f"{where}: profiles.offline: 'offline' is built in; choose another name"
            )
        if name in profiles:
            raise ProfileError(
                f"{where}: profiles.{name} clashes with the top-level provider settings"
                " (they make the profile 'default')"
            )
        profiles[name] = parse_profile(name, table, where, PROVIDERS)
    return profiles

"""Profiles in the config file (issue 32): their shape, the built-in and legacy ones, and
one clear line for every mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, load_config
from core.profiles import MAX_SYSTEM_PROMPT_BYTES, ProfileError

WORK = """
default_profile = "work"
[profiles.work]
provider = "openai"
base_url = "https://api.deepseek.com"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"
system_prompt = "You are terse."
temperature = 0.2
max_output_tokens = 4096
context_window = 128000
price_input = 0.27
price_output = 1.10

[profiles.local]
provider = "offline"
model = "echo-local"
system_prompt_file = "{prompt}"
"""


def _config(tmp_path: Path, text: str, env: dict[str, str] | None = None):
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(env or {}, config_path=path)


def test_the_issue_shape_parses(tmp_path: Path) -> None:
    prompt = tmp_path / "p.md"
    prompt.write_text("Be local.\n", encoding="utf-8")
    config = _config(tmp_path, WORK.format(prompt=prompt))
    assert config.default_profile == "work"
    assert sorted(config.profiles) == ["local", "offline", "work"]
    work = config.profile()
    assert (work.provider, work.model, work.api_key_env) == (
        "openai",
        "deepseek-chat",
        "DEEPSEEK_API_KEY",
    )
    assert (work.temperature, work.max_output_tokens, work.context_window) == (0.2, 4096, 128000)
    assert work.cost(1_000_000, 1_000_000) == pytest.approx(1.37)
    assert work.system_text("builtin") == "You are terse."
    local = config.profile("local")
    assert local.system_text("builtin") == "Be local.\n"
    assert config.profile("offline").system_text("builtin") == "builtin"
    assert "sk-" not in repr(work)


def test_environment_picks_the_default(tmp_path: Path) -> None:
    prompt = tmp_path / "p.md"
    prompt.write_text("x", encoding="utf-8")
    config = _config(tmp_path, WORK.format(prompt=prompt), {"DSH_PROFILE": "local"})
    assert config.default_profile == "local"
    with pytest.raises(
        ConfigError, match="'nope' is not a profile: choose one of local, offline, work"
    ):
        _config(tmp_path, WORK.format(prompt=prompt), {"DSH_PROFILE": "nope"})


def test_no_profiles_means_offline_and_legacy_settings_are_default(tmp_path: Path) -> None:
    config = load_config({}, config_path=tmp_path / "missing.toml")
    assert config.default_profile == "offline"
    assert list(config.profiles) == ["offline"]
    legacy = load_config(
        {"DSH_PROVIDER": "openai", "DSH_MODEL": "m1"}, config_path=tmp_path / "missing.toml"
    )
    assert legacy.default_profile == "default"
    assert (legacy.profile().provider, legacy.profile().model) == ("openai", "m1")
    assert legacy.profile("offline").provider == "offline"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[profiles.offline]\nmodel = "x"\n', "'offline' is built in"),
        ('[profiles."bad name"]\nmodel = "x"\n', "invalid profile name 'bad name'"),
        ('[profiles."\\u001b[31m"]\nmodel = "x"\n', "invalid profile name '\\x1b[31m'"),
        ('[profiles.a]\nprovider = "claude"\n', "unknown provider 'claude'"),
        ("[profiles.a]\ncolour = 1\n", "unknown setting 'colour'"),
        ("[profiles.a]\ntemperature = 3\n", "temperature must be a number from 0 to 2"),
        ("[profiles.a]\ntemperature = nan\n", "temperature must be a number"),
        ("[profiles.a]\ncontext_window = 0\n", "context_window must be a positive integer"),
        ("[profiles.a]\nprice_input = 1\n", "give both price_input and price_output"),
        ('[profiles.a]\napi_key_env = "A B"\n', "api_key_env must name an environment variable"),
        ('[profiles.a]\nbase_url = "ftp://x"\n', "base_url must start with http"),
        ('[profiles.a]\nsystem_prompt = "a"\nsystem_prompt_file = "b"\n', "not both"),
        ("profiles = 3\n", "[profiles] must be a table"),
        ("[profiles]\na = 3\n", "profiles.a must be a table"),
        ('default_profile = "zz"\n', "'zz' is not a profile"),
        ('provider = "openai"\n[profiles.default]\nmodel = "x"\n', "clashes with the top-level"),
    ],
)
def test_every_mistake_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert "\x1b" not in str(caught.value)


def test_unknown_profile_lists_the_choices(tmp_path: Path) -> None:
    config = load_config({}, config_path=tmp_path / "missing.toml")
    with pytest.raises(ProfileError, match="unknown profile 'x': choose one of offline"):
        config.profile("x")


def test_prompt_file_problems_are_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    import os

    os.mkfifo(fifo)
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (MAX_SYSTEM_PROMPT_BYTES + 1))
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"\xff\xfe")
    for path, message in (
        (tmp_path / "missing.md", "No such file"),
        (fifo, "not a regular file"),
        (big, "larger than"),
        (latin, "not UTF-8"),
    ):
        config = _config(
            tmp_path, f'[profiles.p]\nprovider = "offline"\nsystem_prompt_file = "{path}"\n'
        )
        with pytest.raises(ProfileError, match=message):
            config.profile("p").system_text("builtin")


def test_missing_key_is_named_never_shown(tmp_path: Path) -> None:
    config = _config(tmp_path, '[profiles.w]\napi_key_env = "W_KEY"\n')
    profile = config.profile("w")
    assert (
        profile.missing_key({}) == "profile 'w': no API key: set W_KEY (or choose another profile)"
    )
    assert profile.missing_key({"W_KEY": "  "}) is not None
    assert profile.missing_key({"W_KEY": "sk-secret"}) is None
    assert config.profile("offline").missing_key({}) is None

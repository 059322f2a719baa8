"""Configuration: file, environment overrides, one clear error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config({}, config_path=tmp_path / "missing.toml")
    assert config.provider == "offline"
    assert config.effective_model == "echo-1"
    assert config.references.max_references == 3
    assert config.references.candidate_limit == 50
    assert config.references.max_reference_bytes == 65536
    assert config.database.name == "dsh.sqlite3"


def test_file_then_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'provider = "openai"\nmodel = "m1"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "MY_KEY"\ndatabase = "~/x.db"\n[references]\nmax_references = 2\n'
        "candidate_limit = 10\nmax_reference_bytes = 1000\n",
    )
    config = load_config({}, config_path=path)
    assert (config.provider, config.effective_model, config.api_key_env) == (
        "openai",
        "m1",
        "MY_KEY",
    )
    assert config.base_url == "http://127.0.0.1:9/v1"
    assert config.database == Path("~/x.db").expanduser()
    assert config.references.max_references == 2
    env = {"DSH_MODEL": "m2", "DSH_DB": str(tmp_path / "e.db"), "DSH_MAX_REFERENCE_BYTES": "77"}
    config = load_config(env, config_path=path)
    assert config.effective_model == "m2"
    assert config.database == tmp_path / "e.db"
    assert config.references.max_reference_bytes == 77
    assert config.with_database(tmp_path / "cli.db").database == tmp_path / "cli.db"


def test_openai_default_model(tmp_path: Path) -> None:
    config = load_config({"DSH_PROVIDER": "openai"}, config_path=tmp_path / "none.toml")
    assert config.effective_model == "deepseek-chat"
    assert config.base_url == "https://api.deepseek.com"


def test_config_path_from_environment(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "openai"\n')
    assert load_config({"DSH_CONFIG": str(path)}).provider == "openai"


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("provider = 'gpt'\n", {}, "unknown provider 'gpt'"),
        ("provider = \n", {}, "invalid config file"),
        ("colour = 'red'\n", {}, "unknown setting 'colour'"),
        ("[references]\nmax_references = 4\n", {}, "at most 3"),
        ("[references]\nmax_references = 0\n", {}, "positive integer"),
        ("[references]\ncandidate_limit = true\n", {}, "positive integer"),
        ("[references]\nbudget = 1\n", {}, "references.budget"),
        ("references = 3\n", {}, "must be a table"),
        ("model = 5\n", {}, "non-empty string"),
        ("base_url = 'ftp://x'\n", {}, "http:// or https://"),
        ("", {"DSH_MAX_REFERENCES": "lots"}, "DSH_MAX_REFERENCES must be a positive integer"),
        ("", {"DSH_PROVIDER": "nope"}, "unknown provider"),
    ],
)
def test_invalid_config_is_one_clear_line(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(env, config_path=path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)

"""The database path and the config file itself (issue 12 §7).

A relative ``database`` (also an unset ``$VAR/x.db`` or ``~nouser/x.db``, left unexpanded)
used to resolve against the current directory, so each directory silently got its own empty
database; a NUL gave a traceback; the config file was read without a bound from anything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.config import MAX_CONFIG_BYTES, ConfigError, database_path, load_config
from stores import default_database_path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(env: dict[str, str], path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(env, config_path=path)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x.db", "is relative"),
        ("./data/x.db", "is relative"),
        ("$DSH_TEST_UNSET/x.db", "'$DSH_TEST_UNSET', which is not set"),
        ("${DSH_TEST_UNSET}/x.db", "'${DSH_TEST_UNSET}', which is not set"),
        ("${}/x.db", "'${}', which is not set"),
        ("~dsh-no-such-user-zz/x.db", "unknown user 'dsh-no-such-user-zz'"),
        ("/tmp/a\\u0000b.db", "NUL character"),
    ],
)
def test_a_bad_database_in_the_file_is_one_line_naming_the_setting(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = write(tmp_path, f'database = "{value}"\n')
    message = config_error({"HOME": "/home/u"}, path)
    assert message.startswith(f"{path}: database: "), message
    assert expected in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [("x.db", "is relative"), ("$NOPE/x.db", "'$NOPE', which is not set")],
)
def test_a_bad_dsh_db_names_the_variable(tmp_path: Path, value: str, expected: str) -> None:
    message = config_error({"DSH_DB": value}, tmp_path / "none.toml")
    assert message.startswith("DSH_DB: ") and expected in message


def test_home_and_variables_are_expanded(tmp_path: Path) -> None:
    env = {"HOME": "/home/u", "DATA": "/srv/data", "DSH_DB": "${DATA}/e.db"}
    path = write(tmp_path, 'database = "~/dsh/x.db"\n')
    assert load_config({"HOME": "/home/u"}, config_path=path).database == Path("/home/u/dsh/x.db")
    assert load_config(env, config_path=path).database == Path("/srv/data/e.db")
    assert database_path("$DATA/x.db", "s", env) == Path("/srv/data/x.db")
    assert database_path("~", "s", env) == Path("/home/u")
    root = os.path.expanduser("~root")
    assert database_path("~root/x.db", "s", env) == Path(root) / "x.db"


def test_command_line_db_resolves_against_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config({}, config_path=tmp_path / "none.toml")
    assert config.with_database("x.db").database == tmp_path / "x.db"
    assert config.with_database(Path("sub/y.db")).database == tmp_path / "sub" / "y.db"
    monkeypatch.delenv("DSH_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError, match=r"^--db: .*'\$DSH_TEST_UNSET', which is not set"):
        config.with_database("$DSH_TEST_UNSET/x.db")


def test_the_store_default_applies_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_DB", "relative.db")
    with pytest.raises(ConfigError, match=r"^DSH_DB: .* is relative"):
        default_database_path()


def test_a_directory_as_config_file_is_one_line(tmp_path: Path) -> None:
    # A FIFO and /dev/zero (which hang or exhaust memory in-process on the old code) are
    # tested in a child process: tests/cli/test_cli_inputs.py.
    message = config_error({}, tmp_path)
    assert message == f"cannot read config file {tmp_path}: not a regular file"


def test_a_config_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    assert "larger than 1048576 bytes" in config_error({}, path)
    path.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 - 2) + b'provider = "openai"\n')
    assert load_config({}, config_path=path).provider == "openai"


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'model = "caf\xe9"\n')
    assert "not UTF-8" in config_error({}, path)


def test_a_home_holding_a_dollar_is_not_expanded_again() -> None:
    env = {"HOME": "/home/a$b", "D": "d"}
    assert database_path("~/$D/x.db", "s", env) == Path("/home/a$b/d/x.db")
    assert database_path("~", "s", {"HOME": "/"}) == Path("/")
    assert database_path("~/x.db", "s", {"HOME": "/"}) == Path("/x.db")


URL = "postgresql://alice@db.example:5433/team?sslmode=require"


def test_a_postgres_url_is_taken_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``database``, ``DSH_DB`` and ``--db`` accept a server URL (issue 16): it is not a
    relative path, and nothing in it is expanded."""
    assert load_config({}, config_path=write(tmp_path, f'database = "{URL}"')).database == URL
    socket_url = "postgres://bob@/dsh?host=/run/postgresql"
    config = load_config({"DSH_DB": socket_url}, config_path=tmp_path / "none.toml")
    assert config.database == socket_url
    assert config.with_database(URL).database == URL
    assert config.with_database("rel.db").database == Path.cwd() / "rel.db"
    monkeypatch.setenv("DSH_DB", URL)
    from stores import default_location, display_location

    assert default_location() == URL
    assert display_location("postgresql://alice:s3cret-pw@h/db") == "postgresql://alice@h/db"
    assert display_location(tmp_path / "x.db") == str(tmp_path / "x.db")

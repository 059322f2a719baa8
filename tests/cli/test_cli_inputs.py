"""Hostile inputs and configuration at the command line (issue 12 §7)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Run

MEMORY_CAP = 1024 * 1024 * 1024  # the child may not eat the machine if a read is unbounded


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_child(env_update: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``dsh ARGS`` in a child process, bounded in time and memory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(env_update)
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # the old code waited forever on a FIFO
        check=False,
        preexec_fn=_cap_memory,
    )


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_config_that_is_no_regular_file_is_one_line(
    dsh_env: Path, tmp_path: Path, kind: str
) -> None:
    if kind == "fifo":
        config = tmp_path / "config.fifo"
        os.mkfifo(config)
    else:
        config = Path(kind)
    result = run_child({"DSH_CONFIG": str(config)}, "--db", str(dsh_env), "sessions")
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"dsh: error: cannot read config file {config}: not a regular file\n"


def test_a_relative_dsh_db_is_refused_and_nothing_created(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("DSH_DB", "sessions.db")
    result = dsh("new", db=None)
    assert result.code == 1 and result.out == ""
    assert result.err == (
        "dsh: error: DSH_DB: the database path 'sessions.db' is relative; "
        "give an absolute path (~ and $VAR are expanded)\n"
    )
    assert list(workdir.iterdir()) == []


def test_an_undefined_variable_in_the_config_file_is_refused(
    dsh: Run, dsh_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSH_TEST_UNSET", raising=False)
    config = tmp_path / "config" / "dsh" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('database = "$DSH_TEST_UNSET/x.db"\n', encoding="utf-8")
    result = dsh("sessions", db=None)
    assert result.code == 1
    assert result.err.startswith(f"dsh: error: {config}: database: ")
    assert "'$DSH_TEST_UNSET', which is not set" in result.err
    assert not (tmp_path / "$DSH_TEST_UNSET").exists()


def test_a_relative_db_option_means_the_file_here(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    created = dsh("new", db=Path("here.db"))
    assert created.code == 0, created.err
    assert (tmp_path / "here.db").is_file()
    listed = dsh("sessions", "--json", db=tmp_path / "here.db")
    assert [row["id"] for row in json.loads(listed.out)] == [created.out.strip()]


HEADER = '{"type":"session","id":"imp","created_at":1700000000000,"cwd":null}'
EVENT = '{"seq":0,"type":"note","time":1700000000001,"data":{},"surface_op":null,"source_event_seqs":null}'


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            [HEADER, EVENT.replace('{"seq":0,', '{"seq":0,"seq":0,')],
            "line 2: invalid JSON (duplicate key 'seq')",
        ),
        (
            [HEADER, EVENT.replace('"data":{}', '"data":{"a":[{"x":1,"x":2}]}')],
            "line 2: invalid JSON (duplicate key 'x')",
        ),
        (
            [
                HEADER,
                EVENT,
                EVENT.replace('"seq":0', '"seq":1').replace("1700000000001", "1" + "0" * 30),
            ],
            "line 3: time 1000000000000000000000000000000 is out of range",
        ),
        (
            [HEADER.replace("1700000000000", str(2**63 - 1)), EVENT],
            "line 1: the header's created_at 9223372036854775807 is out of range",
        ),
    ],
)
def test_a_hostile_import_names_the_line_and_stores_nothing(
    dsh: Run, tmp_path: Path, lines: list[str], expected: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = dsh("import", str(path))
    assert result.code == 1 and result.out == ""
    assert result.err.startswith(f"dsh: error: cannot import {path}: {expected}"), result.err
    assert result.err.endswith("; nothing imported\n") and result.err.count("\n") == 1
    assert dsh("sessions", "--json").json() == []

"""The real ``dsh`` on a PostgreSQL URL (``--db``, ``DSH_DB``, the config's ``database``):
it works unchanged, and a server it cannot use is one clear line without the password."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.postgres import SCHEMA_VERSION
from tests.cli.conftest import Run
from tests.cli.test_cli import (
    test_full_flow_new_send_show_prepare_compact_reference as full_flow,
)
from tests.pgcluster import SECRET_PASSWORD, Cluster
from tests.storekinds import pg_schema_url

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    with pg_schema_url(pg_cluster) as url:
        yield url


def run_dsh(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``dsh`` in a child process with a clean environment (no DSH_* but ``env``)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
    base.update(
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        COLUMNS="100",
        **(env or {}),
    )
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dsh: error: ")
    return lines[0]


def test_the_cli_works_on_a_postgres_url(tmp_path: Path, pg_url: str) -> None:
    made = run_dsh(tmp_path, "--db", pg_url, "new", "--cwd", "/proj")
    assert made.returncode == 0, made.stderr
    sid = made.stdout.strip()
    sent = run_dsh(tmp_path, "send", sid, "hello from the team server", env={"DSH_DB": pg_url})
    assert sent.returncode == 0, sent.stderr
    # The config file's ``database`` takes the URL too.
    config = tmp_path / "config" / "dsh" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'database = "{pg_url}"\n')
    listed = run_dsh(tmp_path, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert sid in listed.stdout and "hello from the team server" in listed.stdout
    shown = run_dsh(tmp_path, "show", sid)
    assert "hello from the team server" in shown.stdout


def test_a_server_that_is_down_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://alice:{SECRET_PASSWORD}@/teamdb?host={tmp_path / 'no-server'}"
    line = one_error_line(run_dsh(tmp_path, "--db", url, "sessions"))
    assert "teamdb" in line and str(tmp_path / "no-server") in line
    assert "not running or refuses connections" in line
    assert SECRET_PASSWORD not in line


def test_a_refused_login_is_one_line_without_the_password(
    tmp_path: Path, pg_cluster: Cluster
) -> None:
    wrong = "Wr0ng-pass-word-typed"
    result = run_dsh(tmp_path, "sessions", env={"DSH_DB": pg_cluster.password_url(wrong)})
    line = one_error_line(result)
    assert "refused the login" in line and "password authentication failed" in line
    assert "/dsh" in line and str(pg_cluster.socket_dir) in line
    assert wrong not in result.stderr + result.stdout
    # The right password works, and what dsh prints names the server, not the password.
    right = pg_cluster.password_url(SECRET_PASSWORD)
    demo = run_dsh(tmp_path, "--db", right, "demo")
    assert demo.returncode == 0, demo.stderr
    assert "Demo data ready in postgresql://team@/dsh" in demo.stdout
    assert SECRET_PASSWORD not in demo.stdout + demo.stderr


def test_an_unknown_database_is_one_line(tmp_path: Path, pg_cluster: Cluster) -> None:
    line = one_error_line(run_dsh(tmp_path, "--db", pg_cluster.url("nosuchdb"), "sessions"))
    assert "no such database" in line and "nosuchdb" in line


def test_a_newer_schema_is_a_clear_error(tmp_path: Path, pg_cluster: Cluster, pg_url: str) -> None:
    assert run_dsh(tmp_path, "--db", pg_url, "sessions").returncode == 0
    schema = pg_url.rpartition("search_path=")[2]
    pg_cluster.psql(f"UPDATE {schema}.dsh_schema SET version = 99")
    line = one_error_line(run_dsh(tmp_path, "--db", pg_url, "sessions"))
    assert (
        f"schema version 99, newer than this dsh understands ({SCHEMA_VERSION}); upgrade dsh"
        in line
    )


def test_the_whole_cli_flow_runs_unchanged_on_postgres(dsh: Run, pg_url: str) -> None:
    """The SQLite flow test (new, send, show, prepare, compact, references), on a URL."""
    full_flow(functools.partial(dsh, db=pg_url))

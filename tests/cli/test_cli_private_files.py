"""What the CLI writes for its user is private and never written through a symlink (issue
31 point 7): ``dsh export -o`` and ``dsh replay --svg``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.log import user_message
from stores import SqliteSessionStore
from tests.cli.conftest import Run
from tests.shared.test_private_files import check_private, planted, umask_022

__all__ = ["umask_022"]  # the fixture, used here too

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("umask_022")]


def test_cli_exports_and_svg_are_private_and_never_follow_a_link(
    dsh: Run, dsh_env: Path, tmp_path: Path
) -> None:
    async def seed() -> None:
        async with await SqliteSessionStore.open(dsh_env) as store:
            await store.create_session("s")
            await store.append("s", "user/message", user_message("hi"), surface_op="append")

    asyncio.run(seed())
    export = tmp_path / "out" / "s.md"
    victim = planted(export, tmp_path)
    assert dsh("export", "s", "--format", "md", "-o", str(export)).code == 0
    check_private(export, victim)
    assert "hi" in export.read_text()
    log = tmp_path / "s.jsonl"
    log.write_text("old")
    log.chmod(0o644)
    assert dsh("export", "s", "--format", "json", "-o", str(log)).code == 0
    check_private(log)
    svg = tmp_path / "s.svg"
    svg.symlink_to(victim)
    result = dsh("replay", str(log), "--svg", str(svg), db=tmp_path / "never.sqlite3")
    assert result.code == 0, result.err
    check_private(svg, victim)


def test_the_acp_log_file_is_private_and_never_follows_a_link(tmp_path: Path) -> None:
    import subprocess

    from tests.acp.harness import dsh_command

    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")

    def acp(log: Path) -> subprocess.CompletedProcess[bytes]:
        command = [*dsh_command(), "--db", str(tmp_path / "db.sqlite3"), "acp", "--log", str(log)]
        return subprocess.run(command, input=b"", capture_output=True, env=env, timeout=60)

    link = tmp_path / "link.log"
    victim = planted(link, tmp_path)
    refused = acp(link)
    assert refused.returncode == 1 and refused.stdout == b""
    assert refused.stderr.decode() == (
        f"dsh: error: cannot open the log file {link}: it is a symbolic link\n"
    )
    assert victim.read_text() == "precious\n" and link.is_symlink()
    log = tmp_path / "acp.log"
    log.write_text("earlier\n")
    log.chmod(0o644)
    assert acp(log).returncode == 0
    check_private(log)
    assert log.read_text().startswith("earlier\n")

"""Drive a real ``dsh mcp`` subprocess with the official SDK's own client over stdio.

``open_mcp`` spawns ``dsh --db LOCATION mcp`` (the console script beside this interpreter)
with a clean environment (a temp config folder, no ``DSH_*`` from the caller), initializes
an SDK ``ClientSession`` and yields it with the file its stderr goes to.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, InitializeResult, TextContent

from tests.acp.harness import dsh_command

__all__ = ["McpHarness", "cli_error", "dsh_cli", "json_text", "open_mcp", "text_of"]

REPO = Path(__file__).resolve().parents[2]


@dataclass
class McpHarness:
    session: ClientSession
    init: InitializeResult
    stderr: Path

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        return await self.session.call_tool(tool, dict(arguments))

    async def ok(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        result = await self.call(tool, arguments)
        assert not result.is_error, text_of(result)
        return result

    async def error(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """The one line of a tool error."""
        result = await self.call(tool, arguments)
        assert result.is_error, result
        line = text_of(result)
        assert "\n" not in line and line.strip() == line and line, line
        assert "Error executing tool" not in line and "pydantic" not in line, line
        return line


def text_of(result: CallToolResult) -> str:
    (block,) = [c for c in result.content if isinstance(c, TextContent)][:1]
    return block.text


def _env(tmp_path: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    return {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        **(extra or {}),
    }


@asynccontextmanager
async def open_mcp(
    tmp_path: Path,
    db: Path | str,
    *,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> AsyncIterator[McpHarness]:
    command, *head = dsh_command()
    params = StdioServerParameters(
        command=command,
        args=[*head, "--db", str(db), *args, "mcp"],
        env=_env(tmp_path, env),
        cwd=str(REPO),
    )
    stderr = tmp_path / "mcp-stderr.log"
    with stderr.open("a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            yield McpHarness(session, init, stderr)


def dsh_cli(tmp_path: Path, db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``dsh`` command line on the same database and config, for comparison."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PG"))}
    base.update(_env(tmp_path, None))
    return subprocess.run(
        [*dsh_command(), "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def cli_error(result: subprocess.CompletedProcess[str]) -> str:
    """The words after ``dsh: error:`` of a failed command."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("dsh: error: "), line
    return line.removeprefix("dsh: error: ")


def json_text(result: CallToolResult) -> Any:
    return json.loads(text_of(result))

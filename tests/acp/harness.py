"""Drive a real ``dsh acp`` subprocess with the ACP package's client side.

``AcpHarness`` spawns ``dsh --db <tmp> acp`` with a clean environment (temp config dir, no
``DSH_*`` from the caller), connects a recording client and exposes the updates it received.
Sessions are seeded straight into the same SQLite file with ``SqliteSessionStore``.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.interfaces import Agent, Client
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    RequestPermissionResponse,
    SessionInfoUpdate,
    TextContentBlock,
    UserMessageChunk,
)

__all__ = ["AcpHarness", "RecordingClient", "dsh_command", "open_agent"]


def dsh_command() -> list[str]:
    """The installed ``dsh`` console script next to this interpreter (or ``python -m``)."""
    script = Path(sys.executable).with_name("dsh")
    if script.exists():
        return [str(script)]
    found = shutil.which("dsh")
    return [found] if found else [sys.executable, "-m", "tui.cli"]


@dataclass
class RecordingClient:
    """A client that records every ``session/update`` and refuses everything else."""

    updates: list[tuple[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
        raise AssertionError("dsh never asks for permission")

    def on_connect(self, conn: Agent) -> None:
        pass

    # -- reading what arrived ------------------------------------------------------------

    def of(self, session_id: str, kind: type | tuple[type, ...] | None = None) -> list[Any]:
        return [
            u for s, u in self.updates if s == session_id and (kind is None or isinstance(u, kind))
        ]

    def agent_text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for u in self.of(session_id, AgentMessageChunk)
            if isinstance(u.content, TextContentBlock)
        )

    def transcript(self, session_id: str) -> list[tuple[str, str]]:
        """Consecutive chunks of one kind and message id merged: ``[(kind, text), …]``."""
        out: list[tuple[str, str, str | None]] = []
        kinds: dict[type, str] = {
            UserMessageChunk: "user",
            AgentMessageChunk: "agent",
            AgentThoughtChunk: "thought",
        }
        for update in self.of(session_id, tuple(kinds)):
            kind = kinds[type(update)]
            text = update.content.text
            if out and out[-1][0] == kind and out[-1][2] == update.message_id:
                out[-1] = (kind, out[-1][1] + text, update.message_id)
            else:
                out.append((kind, text, update.message_id))
        return [(kind, text) for kind, text, _ in out]

    def titles(self, session_id: str) -> list[str | None]:
        return [u.title for u in self.of(session_id, SessionInfoUpdate)]

    def commands(self, session_id: str) -> list[list[str]]:
        return [
            [c.name for c in u.available_commands]
            for u in self.of(session_id, AvailableCommandsUpdate)
        ]

    async def wait_for(self, predicate: Callable[[], bool], seconds: float = 20.0) -> None:
        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), seconds)


@dataclass
class AcpHarness:
    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    client: RecordingClient
    init: InitializeResponse
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@asynccontextmanager
async def open_agent(
    tmp_path: Path,
    db: Path,
    *,
    env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> AsyncIterator[AcpHarness]:
    """Spawn ``dsh --db DB acp``, initialize it, and close it (stdin EOF) on exit."""
    client = RecordingClient()
    stderr_path = tmp_path / f"agent-stderr-{id(client)}.log"
    full_env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONUNBUFFERED": "1"}
    full_env.update(env or {})
    command, *args = dsh_command()
    with stderr_path.open("wb") as stderr:
        async with spawn_agent_process(
            cast(Client, client),
            command,
            *args,
            "--db",
            str(db),
            "acp",
            *extra_args,
            env=full_env,
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, process):
            init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="dsh-tests", version="1"),
                ),
                30,
            )
            yield AcpHarness(conn, process, client, init, stderr_path)

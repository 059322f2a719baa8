"""``dsh mcp``: serve the Model Context Protocol on standard input/output until the client
closes stdin.

Standard output carries protocol messages and nothing else: the SDK's stdio transport
serves the protocol from a private copy of file descriptor 1 and points fd 1 at stderr
while it runs, and the store is opened only then (inside the server's lifespan), so
nothing dsh, a library or a C extension prints can corrupt a frame. Logs go to stderr or
``--log FILE``. A store that cannot be opened ends the process with one ``dsh: error:``
line on stderr and status 1 (the CLI's), before any answer. Standard input reaches the
SDK through ``tui.mcp.inbound`` (an escaped lone surrogate read as U+FFFD).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio

from core.config import DshConfig
from core.providers.offline import OfflineProvider
from tui.mcp.inbound import surrogate_safe_stdin
from tui.mcp.server import build_server
from tui.shared.runtime import Runtime, open_runtime
from tui.shared.serverlog import configure_server_logging

__all__ = ["run_mcp", "serve"]


async def serve(config: DshConfig, *, version: str) -> None:
    """Serve one client on stdin/stdout until end of input."""

    @contextlib.asynccontextmanager
    async def runtime() -> AsyncIterator[Runtime]:
        # The server never asks a model: a fixed offline provider, so no key, profile or
        # provider setting can stop it.
        async with open_runtime(config, provider=OfflineProvider("mcp")) as rt:
            yield rt

    await build_server(runtime, version=version).run_stdio_async()


def run_mcp(config: DshConfig, *, version: str, log_file: str | None = None) -> int:
    """The ``dsh mcp`` command: 0 once the client closed the connection."""
    configure_server_logging(log_file)
    try:
        with surrogate_safe_stdin():
            anyio.run(lambda: serve(config, version=version))
    except KeyboardInterrupt:
        return 130
    except BaseExceptionGroup as group:  # the transport's task group wraps what failed
        raise _first_leaf(group) from None
    return 0


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception a (nested) group holds: what the CLI reports in one line."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first

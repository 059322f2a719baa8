"""``dsh acp``: run the agent on standard input/output until the client closes stdin.

Standard output carries protocol messages and nothing else: the process's file descriptor 1
is handed to the protocol writer and then pointed at stderr, so a stray ``print`` (ours, a
library's or a C extension's) lands in the log instead of corrupting a JSON-RPC frame.

At the end of input every request already read is finished and answered (a script may
write its requests and close stdin), then the process exits 0. SIGTERM and SIGHUP mean
stop: every reply in flight is interrupted — the engine stores what was received, marked
interrupted — its prompt is answered ``cancelled``, and the process exits 128 + the signal
number. A second signal ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from collections.abc import Iterator
from typing import BinaryIO, cast

from acp import Agent
from acp.agent.connection import AgentSideConnection

from core.config import DshConfig
from tui.acp.agent import DshAcpAgent
from tui.acp.transport import LineTransport
from tui.shared.runtime import OFFLINE_DELAY_ENV, offline_delay_from_env, open_runtime
from tui.shared.serverlog import configure_server_logging as _configure_logging
from tui.shared.signals import handle_stop_signals, stop_status

__all__ = ["OFFLINE_DELAY_ENV", "offline_delay_from_env", "run_acp", "serve"]

DRAIN_SECONDS = 10.0
"""After a stop signal, how long the replies in flight get to store what they received."""
STREAM_LIMIT = 50 * 1024 * 1024  # one JSON-RPC line may carry a long prompt


@contextlib.contextmanager
def _protocol_stdout() -> Iterator[BinaryIO]:
    """The real stdout for the protocol only; fd 1 and ``sys.stdout`` go to stderr meanwhile."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stream = os.fdopen(protocol_fd, "wb", buffering=0)
    try:
        yield stream
    finally:
        sys.stdout = saved_stdout
        with contextlib.suppress(OSError):
            os.dup2(protocol_fd, 1)
        with contextlib.suppress(OSError):
            stream.close()


class _FileWriteTransport(asyncio.WriteTransport):
    """Writes straight to a regular file (``dsh acp > out.jsonl``): the event loop's pipe
    transport refuses files, and a file write does not block for long."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._stream.write(data)

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._stream.flush()


def _feed_in_thread(reader: asyncio.StreamReader, stream: BinaryIO) -> None:
    """Feed ``reader`` from a file that cannot be watched by the loop (a regular file)."""
    loop = asyncio.get_running_loop()

    def pump() -> None:
        try:
            for line in iter(stream.readline, b""):
                loop.call_soon_threadsafe(reader.feed_data, line)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="dsh-acp-stdin", daemon=True).start()


def _watchable(fd: int) -> bool:
    """Whether the event loop can watch ``fd`` for reading: a pipe, a socket or a terminal.
    (A regular file, and a device such as /dev/null, which epoll refuses with EPERM only
    once the loop tries to watch it, are read in a thread instead.)"""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def _stdio(protocol_out: BinaryIO) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    if sys.stdin is None:  # started with standard input closed: an empty input
        reader.feed_eof()
    elif _watchable(sys.stdin.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:  # a regular file, /dev/null or another device the loop cannot watch
        _feed_in_thread(reader, sys.stdin.buffer)
    protocol = asyncio.streams.FlowControlMixin()
    transport: asyncio.WriteTransport
    try:
        transport, _ = await loop.connect_write_pipe(lambda: protocol, protocol_out)
    except ValueError:
        transport = _FileWriteTransport(protocol_out)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def serve(
    config: DshConfig, protocol_out: BinaryIO, *, offline_delay: float = 0.0
) -> int | None:
    """Serve one client on stdin/``protocol_out`` until end of input (``None``) or a stop
    signal (its number)."""
    loop = asyncio.get_running_loop()
    reader, writer = await _stdio(protocol_out)
    async with open_runtime(config, offline_delay=offline_delay) as runtime:
        agent = DshAcpAgent(runtime)
        transport = LineTransport(reader, writer, before_end=agent.settle)
        # The SDK looks handlers up by name; the methods dsh does not implement answer
        # "method not found", so the agent need not spell out the whole protocol. The
        # unstable part is on for ``session/fork`` (the only unstable method dsh has).
        conn = AgentSideConnection(
            cast(Agent, agent), transport, listening=False, use_unstable_protocol=True
        )
        listening = asyncio.ensure_future(conn.listen())  # ends at the end of input
        stopped: list[int] = []
        stopping: set[asyncio.Task[None]] = set()

        def on_stop_signal(signum: int) -> None:
            stopped.append(signum)
            agent.stop()
            stopping.add(loop.create_task(_stop(agent, listening)))

        try:
            with handle_stop_signals(on_stop_signal), contextlib.suppress(asyncio.CancelledError):
                await listening
        finally:
            await asyncio.shield(conn.close())
        return stopped[0] if stopped else None


async def _stop(agent: DshAcpAgent, listening: asyncio.Future[None]) -> None:
    """Give the interrupted replies time to be stored and answered, then stop reading."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(agent.settle(), DRAIN_SECONDS)
    listening.cancel()


def run_acp(config: DshConfig, *, log_file: str | None = None) -> int:
    """The ``dsh acp`` command: 0 after the client closed the connection, 128 + N after
    stop signal N."""
    delay = offline_delay_from_env(os.environ)
    _configure_logging(log_file)
    with _protocol_stdout() as protocol_out:
        try:
            signum = asyncio.run(serve(config, protocol_out, offline_delay=delay))
        except KeyboardInterrupt:
            return 130
    return 0 if signum is None else stop_status(signum)

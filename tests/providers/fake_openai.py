"""A scripted OpenAI-compatible HTTP/1.1 server on 127.0.0.1 for provider tests (stdlib only).

Queue responses with ``server.add(...)`` (or the ``sse``/``error`` helpers), point a provider at
``server.base_url`` and inspect ``server.requests`` afterwards. Every response closes its
connection, so each request is a fresh TCP connection and "the client hung up" is observable
as ``RecordedRequest.disconnected``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal

import pytest_asyncio

__all__ = [
    "DSH",
    "Drop",
    "FakeOpenAIServer",
    "Pause",
    "RecordedRequest",
    "ScriptedResponse",
    "chunk_json",
    "closed_port",
    "dsh_env",
    "fake_openai",
    "new_session",
    "read_log",
    "run_dsh",
    "sse_data",
]


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait this long before sending the next body part."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Drop:
    """Hang up abruptly here, without finishing the body (no terminating chunk)."""


BodyPart = bytes | Pause | Drop


@dataclass(slots=True)
class ScriptedResponse:
    """One canned answer. ``framing``: chunked, close-delimited, or Content-Length.

    ``body`` may be an endless iterator (a hostile server) with chunked or close framing.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Iterable[BodyPart] = ()
    framing: Literal["chunked", "close", "length"] = "chunked"
    head_delay: float = 0.0  # stall before the status line
    asked: asyncio.Event | None = None  # set when a request gets this response
    gate: asyncio.Event | None = None  # answer only once the test sets it


@dataclass(slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def sse_data(payload: object) -> bytes:
    """One SSE event: ``data: <json>`` (or a raw string such as ``[DONE]``) plus a blank line."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def chunk_json(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    finish: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` object the way DeepSeek/OpenAI stream them."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    chunk: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "deepseek-chat",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.received = asyncio.Event()  # set once the first request is recorded
        self._script: deque[ScriptedResponse] = deque()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(self._handlers)
        if self._server is not None:
            await self._server.wait_closed()

    # -- scripting ----------------------------------------------------------------------

    def add(self, response: ScriptedResponse) -> None:
        self._script.append(response)

    def sse(
        self,
        events: Iterable[object],
        *,
        done: bool = True,
        framing: Literal["chunked", "close"] = "chunked",
        headers: Mapping[str, str] | None = None,
        pause: float = 0.0,
    ) -> None:
        """Queue a 200 event stream: each item is a chunk dict, raw bytes, ``Pause`` or ``Drop``."""
        body: list[BodyPart] = []
        for event in events:
            if isinstance(event, bytes | Pause | Drop):
                body.append(event)
            else:
                body.append(sse_data(event))
            if pause:
                body.append(Pause(pause))
        if done:
            body.append(sse_data("[DONE]"))
        self.add(
            ScriptedResponse(
                headers={"Content-Type": "text/event-stream", **(headers or {})},
                body=body,
                framing=framing,
            )
        )

    def error(
        self, status: int, message: str | None = None, *, headers: Mapping[str, str] | None = None
    ) -> None:
        """Queue an error answer with an OpenAI-style ``{"error": {"message": ...}}`` body."""
        payload = {"error": {"message": message or _reason(status), "type": "test"}}
        self.add(
            ScriptedResponse(
                status=status,
                headers={"Content-Type": "application/json", **(headers or {})},
                body=[json.dumps(payload).encode()],
                framing="length",
            )
        )

    # -- the server ---------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        watcher: asyncio.Task[None] | None = None
        try:
            request = await self._read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            self.received.set()
            watcher = asyncio.create_task(self._watch_hangup(reader, request))
            response = self._script.popleft() if self._script else _unscripted()
            await self._respond(writer, response, request)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if watcher is not None:
                # Let the watcher see the client hang up after a complete answer.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(watcher), 1.0)
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            writer.transport.abort()
            self._writers.discard(writer)
            self._handlers.discard(task)

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        request_line = await reader.readline()
        if not request_line:
            return None
        method, path, _version = request_line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        return RecordedRequest(method, path, headers, body)

    async def _watch_hangup(self, reader: asyncio.StreamReader, request: RecordedRequest) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(1024):
                pass
        request.disconnected.set()

    async def _respond(
        self, writer: asyncio.StreamWriter, response: ScriptedResponse, request: RecordedRequest
    ) -> None:
        if response.asked is not None:
            response.asked.set()
        if response.gate is not None:
            await response.gate.wait()
        if response.head_delay:
            await asyncio.sleep(response.head_delay)
        head = [f"HTTP/1.1 {response.status} {_reason(response.status)}", "Connection: close"]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        if response.framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        elif response.framing == "length":
            size = sum(len(part) for part in response.body if isinstance(part, bytes))
            head.append(f"Content-Length: {size}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        for part in response.body:
            if isinstance(part, Pause):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(request.disconnected.wait(), part.seconds)
                if request.disconnected.is_set():
                    return
                continue
            if isinstance(part, Drop):
                writer.transport.abort()
                return
            if response.framing == "chunked":
                writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            else:
                writer.write(part)
            await writer.drain()
            if request.disconnected.is_set():
                return
        if response.framing == "chunked":
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _unscripted() -> ScriptedResponse:
    body = json.dumps({"error": {"message": "fake server: no scripted response left"}}).encode()
    return ScriptedResponse(status=599, body=[body], framing="length")


def dsh_env(db: Path, server: FakeOpenAIServer, *, api_key: str = "sk-test") -> dict[str, str]:
    """Environment for a real ``dsh`` process talking to ``server``: no inherited DSH_*
    settings or proxies, its own config dir, the openai provider at the fake server."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DSH_", "HTTP", "http", "ALL_", "all_"))
    }
    env.update(
        DSH_DB=str(db),
        DSH_PROVIDER="openai",
        DSH_BASE_URL=server.base_url,
        DSH_MODEL="fake-model",
        DEEPSEEK_API_KEY=api_key,
        XDG_CONFIG_HOME=str(db.parent / "config"),
    )
    return env


DSH = [sys.executable, "-m", "tui.cli"]
"""The ``dsh`` command of this checkout, as a child process."""


async def run_dsh(
    env: dict[str, str], *args: str, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """Run ``dsh ARGS`` to its end (60 s at most): exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        *DSH,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def new_session(env: dict[str, str]) -> str:
    """``dsh new``: the new session's id."""
    code, out, err = await run_dsh(env, "new")
    assert code == 0, err
    return out.strip()


async def read_log(env: dict[str, str], session: str) -> list[dict[str, Any]]:
    """The session's raw event log, as ``dsh show --json`` prints it."""
    code, out, err = await run_dsh(env, "show", session, "--json")
    assert code == 0, err
    events: list[dict[str, Any]] = json.loads(out)
    return events


def closed_port() -> int:
    """A local port with (very likely) nobody listening: bound once, then released."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest_asyncio.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAIServer]:
    """A started ``FakeOpenAIServer``; shut down (connections aborted) after the test."""
    server = FakeOpenAIServer()
    await server.start()
    try:
        yield server
    finally:
        await server.close()

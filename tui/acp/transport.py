"""JSON-RPC 2.0 lines on the agent's stdio, checked before the SDK's connection sees them.

The SDK's own newline transport hands every decoded line to the connection: a line that is
not an object (``[]``, ``42``, ``true``) raised inside its receive loop and ended ``dsh acp``,
and ``null`` read as the end of input. Here a line that is not JSON, or nests deeper than
event data may (``MAX_JSON_DEPTH``: parsers recurse per level), gets ``-32700`` and one
that is not a request, notification or response gets ``-32600`` (id ``null`` unless the
line had a usable id), and reading goes on.

The end of input is held back until every request passed up has been answered (and the
``before_end`` hook, the agent's background work, is done): the connection stops sending
notifications once it has seen the end, so a script that writes its requests and closes
stdin would otherwise get replies without their streamed updates.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from core.jsondepth import nests_deeper
from core.limits import MAX_JSON_DEPTH
from tui.acp.text import client_label, client_text

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "LineTransport", "with_details"]

log = logging.getLogger("dsh.acp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601

_TOO_LONG = object()
DEEP_LINE = f"the line nests deeper than {MAX_JSON_DEPTH} levels"


def _id_key(value: object) -> tuple[str, object] | None:
    """A hashable key for a JSON-RPC id (``None`` when the value is no valid id)."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    return None


def _invalid(message: object) -> tuple[str, object] | None:
    """Why ``message`` is not a JSON-RPC request, notification or response, and the id to
    answer with; ``None`` when it is one."""
    if not isinstance(message, dict):
        return f"a JSON-RPC message must be an object, not {_json_kind(message)}", None
    has_id = "id" in message
    raw_id = message.get("id")
    answer_id = raw_id if _id_key(raw_id) is not None else None
    if has_id and _id_key(raw_id) is None:
        return "the id must be a string, an integer or null", None
    if "method" in message:
        if not isinstance(message["method"], str):
            return "the method must be a string", answer_id
        params = message.get("params")
        if "params" in message and params is not None and not isinstance(params, (dict, list)):
            return "params must be an object or an array", answer_id
        return None
    if has_id and ("result" in message or "error" in message):
        return None  # a response to one of our requests
    return "neither a request nor a response (no method, no result or error)", answer_id


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array (batches are not supported)"


def with_details(error: Mapping[str, Any]) -> dict[str, Any]:
    """An error object whose ``data.details`` holds the human message (clients such as Toad
    show only ``details``), every text made safe to show."""
    out = dict(error)
    message = client_text(str(out.get("message", "")))
    out["message"] = message
    data = out.get("data")
    details = message
    if isinstance(data, Mapping):
        data = dict(data)
        errors = data.get("errors")
        if out.get("code") == INVALID_PARAMS and isinstance(errors, list) and errors:
            details = f"{message}: " + "; ".join(_validation_line(e) for e in errors[:5])
        elif out.get("code") == METHOD_NOT_FOUND and isinstance(data.get("method"), str):
            details = f"{message}: {client_label(data['method'])}"
        existing = data.get("details")
        data["details"] = client_text(existing) if isinstance(existing, str) else details
    elif data is None:
        data = {"details": details}
    else:
        data = {"details": details, "value": data}
    out["data"] = data
    return out


def _validation_line(error: object) -> str:
    if not isinstance(error, Mapping):
        return client_label(str(error))
    where = ".".join(str(part) for part in error.get("loc", ()) or ())
    text = str(error.get("msg", "invalid"))
    return client_label(f"{where}: {text}" if where else text)


class LineTransport:
    """The ``acp`` ``Transport`` for ``dsh acp``: one JSON-RPC message per line."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        before_end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._before_end = before_end
        self._write_lock = asyncio.Lock()
        self._unanswered: Counter[tuple[str, object]] = Counter()
        self._answered = asyncio.Event()
        self._closed = False
        self.ended = asyncio.Event()
        """Set when the client closed its end of the input."""

    # -- sending -------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            key = _id_key(message.get("id"))
            if key is not None and self._unanswered[key] > 0:
                self._unanswered[key] -= 1
                if self._unanswered[key] == 0:
                    del self._unanswered[key]
                self._answered.set()
            error = message.get("error")
            if isinstance(error, Mapping):
                message = {**message, "error": with_details(error)}
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._write_lock:
            if self._closed:
                raise ConnectionError("the connection is closed")
            self._writer.write(data)
            await self._writer.drain()

    async def _answer_error(self, request_id: object, code: int, message: str, why: str) -> None:
        error = {"code": code, "message": message, "data": {"details": f"{message}: {why}"}}
        try:
            await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})
        except (ConnectionError, RuntimeError) as err:
            log.warning("could not answer an invalid message: %s", err)

    # -- receiving -----------------------------------------------------------------------

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is _TOO_LONG:
                await self._answer_error(
                    None, INVALID_REQUEST, "Invalid request", "the line is too long"
                )
                continue
            assert isinstance(line, bytes)
            if not line:
                self.ended.set()
                await self._settle()
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except RecursionError:  # json.loads recurses once per level
                await self._answer_error(None, PARSE_ERROR, "Parse error", DEEP_LINE)
                continue
            except ValueError:  # not JSON, or not UTF-8
                await self._answer_error(
                    None, PARSE_ERROR, "Parse error", "the line is not valid JSON"
                )
                continue
            if nests_deeper(line, MAX_JSON_DEPTH):  # JSON, but deeper than dsh reads
                await self._answer_error(None, PARSE_ERROR, "Parse error", DEEP_LINE)
                continue
            problem = _invalid(message)
            if problem is not None:
                why, answer_id = problem
                await self._answer_error(answer_id, INVALID_REQUEST, "Invalid request", why)
                continue
            if "method" in message and "id" in message:
                key = _id_key(message["id"])
                assert key is not None
                self._unanswered[key] += 1
            return dict(message)

    async def _settle(self) -> None:
        """Wait until every request read has its response and the agent is done."""
        while True:
            while self._unanswered:
                self._answered.clear()
                await self._answered.wait()
            if self._before_end is not None:
                await self._before_end()
            if not self._unanswered:
                return

    async def _read_line(self) -> bytes | object:
        """The next line (``b""`` at the end of input), or ``_TOO_LONG`` for a line over
        the limit (then skipped up to its end)."""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial
        except asyncio.LimitOverrunError as exc:
            await self._reader.readexactly(exc.consumed)
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return _TOO_LONG
            except asyncio.IncompleteReadError:
                return _TOO_LONG
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)

    async def close(self) -> None:
        async with self._write_lock:
            self._closed = True

"""Server-sent events decoded incrementally and linearly, every line and event bounded
(``_TooLarge``)."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Final

import httpx

from core.providers.openai.settings import DEFAULT_MAX_REPLY_BYTES

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


class _TooLarge(Exception):
    """One event, line or body is larger than ``max_reply_bytes``."""


async def _sse_messages(
    response: httpx.Response, max_event_bytes: int
) -> AsyncGenerator[tuple[str, str], None]:
    decoder = _SSEDecoder(max_event_bytes)
    async for chunk in response.aiter_bytes():
        for message in decoder.feed(chunk):
            yield message
    for message in decoder.close():
        yield message


class _SSEDecoder:
    """Incremental server-sent-events parser: bytes in, ``(event type, data)`` out.

    Handles LF/CR/CRLF line ends split across chunks, comments, multi-line data and UTF-8
    split across chunks. An unterminated last event is still delivered (lenient at EOF).
    Linear in its input: bytes are scanned once and a line is decoded once, when complete.
    A line or an event's data over ``max_event_bytes`` raises ``_TooLarge`` (memory bound).
    """

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._scan = 0  # where to look for the next line end in the buffer
        self._started = False
        self._skip_lf = False  # the last line ended with a CR at a chunk border
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        return self._consume(chunk, final=False)

    def close(self) -> list[tuple[str, str]]:
        out = self._consume(b"", final=True)
        if self._buffer:
            out.extend(self._line(bytes(self._buffer)))
            self._buffer.clear()
        out.extend(self._line(b""))
        return out

    def _consume(self, chunk: bytes, *, final: bool) -> list[tuple[str, str]]:
        buffer = self._buffer
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer += chunk
        if not self._started:
            if not final and len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                return []  # maybe a BOM split across chunks
            self._started = True
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
        out: list[tuple[str, str]] = []
        start = 0
        end = len(buffer)
        while True:
            match = _LINE_END.search(buffer, self._scan)
            if match is None:
                break
            if match.group() == b"\r" and match.end() == end and not final:
                self._skip_lf = True  # a CRLF may be split here: drop a leading LF next time
            out.extend(self._line(bytes(buffer[start : match.start()])))
            start = self._scan = match.end()
        if start:
            del buffer[:start]
            self._scan = 0
        if len(buffer) > self._max:
            raise _TooLarge
        self._scan = len(buffer)
        return out

    def _line(self, raw: bytes) -> list[tuple[str, str]]:
        if not raw:
            data, event = "\n".join(self._data), self._event
            self._data, self._event, self._data_size = [], "", 0
            return [(event or "message", data)] if data else []
        if raw[:1] == b":":
            return []
        line = raw.decode("utf-8", "replace")
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_size += len(raw) + 1
            if self._data_size > self._max:
                raise _TooLarge
            self._data.append(value)
        elif field == "event":
            self._event = value
        return []

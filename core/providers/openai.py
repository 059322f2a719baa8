"""A ``ModelProvider`` for any OpenAI-compatible chat-completions endpoint (DeepSeek by default).

Streams over server-sent events. Failures become ``ProviderError`` with a ``kind`` a UI can
explain; rate limits, 5xx answers and unreachable hosts are retried with backoff, but only
until the first event has been yielded, so a caller never sees a reply twice.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final, TypeVar

import httpx

from core.providers.base import (
    Finish,
    ProviderError,
    ProviderErrorKind,
    ProviderMessage,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "OpenAICompatibleProvider",
]

DEFAULT_BASE_URL: Final = "https://api.deepseek.com"
DEFAULT_MODEL: Final = "deepseek-chat"
DEFAULT_API_KEY_ENV: Final = "DEEPSEEK_API_KEY"

_RETRYABLE: Final[frozenset[ProviderErrorKind]] = frozenset({"rate_limited", "server", "network"})
_ERROR_BODY_LIMIT: Final = 64 * 1024
_MESSAGE_LIMIT: Final = 300
_LINE_END: Final = re.compile(r"\r\n|\r|\n")
_WHITESPACE: Final = re.compile(r"\s+")

_T = TypeVar("_T")


class _Cancelled(Exception):
    """The caller's cancel event fired while we were waiting."""


class OpenAICompatibleProvider:
    """Streams chat completions from ``{base_url}/chat/completions``.

    ``api_key_env`` only names the variable in the "missing key" message; reading the
    environment is the caller's job. An injected ``client`` is used as is and never closed.
    """

    name: str = "openai"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        retry_after_cap: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.url = chat_completions_url(base_url)
        self.api_key_env = api_key_env
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_cap = retry_after_cap
        self._api_key = api_key or None
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self._injected_client = client
        self._own_client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleProvider(url={self.url!r}, model={self.model!r})"

    # -- public API ---------------------------------------------------------------------

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Yield deltas, then ``Usage`` (if sent) and one ``Finish``.

        When ``cancel`` is set the response is closed and the generator simply ends.
        """
        key = self._api_key
        if key is None:
            raise ProviderError(f"no API key: set {self.api_key_env}", "missing_key")
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.text} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        inner = self._attempts(body, key)
        try:
            while cancel is None or not cancel.is_set():
                try:
                    event = await _unless_cancelled(anext(inner), cancel)
                except (StopAsyncIteration, _Cancelled):
                    return
                yield event
        finally:
            await inner.aclose()

    async def complete(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> str:
        """The whole reply text (reasoning dropped); for titles and summaries."""
        parts: list[str] = []
        async with aclosing(self.stream(messages, cancel=cancel)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
        return "".join(parts)

    async def aclose(self) -> None:
        """Close the HTTP client this provider created (an injected one stays open)."""
        client, self._own_client = self._own_client, None
        if client is not None:
            await client.aclose()

    # -- one request, with retries ------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._injected_client is not None:
            return self._injected_client
        if self._own_client is None:
            self._own_client = httpx.AsyncClient(timeout=self._timeout)
        return self._own_client

    async def _attempts(
        self, body: Mapping[str, Any], key: str
    ) -> AsyncGenerator[StreamEvent, None]:
        headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        client = self._client()
        attempt = 0
        while True:
            attempt += 1
            emitted = False
            try:
                async with client.stream(
                    "POST", self.url, json=body, headers=headers, timeout=self._timeout
                ) as response:
                    if response.status_code == 200:
                        async for event in self._read_reply(response):
                            emitted = True
                            yield event
                        return
                    error, retry_after = await self._status_error(response, attempt)
            except httpx.TimeoutException as err:
                what = "connecting to" if isinstance(err, httpx.ConnectTimeout) else "waiting for"
                raise self._error(f"timed out {what} {self._host}", "timeout") from err
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as err:
                raise self._error(
                    f"invalid base URL {self.base_url!r}: {err}", "bad_request"
                ) from err
            except (httpx.TransportError, httpx.DecodingError) as err:
                if emitted:
                    raise self._error(
                        f"the connection to {self._host} dropped mid-reply ({_describe(err)})",
                        "protocol",
                    ) from err
                error = self._error(
                    f"cannot reach {self._host}: {_describe(err)}{_after(attempt)}", "network"
                )
                if attempt > self.max_retries:
                    raise error from err
                retry_after = None
            if error.kind not in _RETRYABLE or attempt > self.max_retries:
                raise error
            await asyncio.sleep(self._delay(attempt, retry_after))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return max(0.0, min(retry_after, self.retry_after_cap))
        return float(min(self.backoff_base * 2 ** (attempt - 1), self.backoff_max))

    async def _status_error(
        self, response: httpx.Response, attempt: int
    ) -> tuple[ProviderError, float | None]:
        status = response.status_code
        detail = _server_message(await _read_limited(response), self._api_key)
        suffix = f": {detail}" if detail else ""
        host = self._host
        kind: ProviderErrorKind
        if status in (401, 403):
            kind = "auth"
            message = (
                f"API key rejected by {host} (HTTP {status}); check {self.api_key_env}{suffix}"
            )
        elif status == 404:
            kind = "not_found"
            message = f"model {self.model!r} or endpoint {self.url} not found (HTTP 404){suffix}"
        elif status == 429:
            kind = "rate_limited"
            message = f"rate limited by {host} (HTTP 429){_after(attempt)}{suffix}"
        elif status >= 500:
            kind = "server"
            message = f"server error from {host} (HTTP {status}){_after(attempt)}{suffix}"
        elif status == 408:
            kind = "timeout"
            message = f"{host} timed out the request (HTTP 408){suffix}"
        elif 400 <= status < 500:
            kind = "bad_request"
            message = f"request rejected by {host} (HTTP {status}){suffix}"
        else:
            kind = "protocol"
            message = f"unexpected HTTP {status} from {self.url}{suffix}"
        retry_after = _retry_after(response.headers.get("retry-after"))
        return self._error(message, kind, status=status), retry_after

    # -- the reply body -----------------------------------------------------------------

    async def _read_reply(self, response: httpx.Response) -> AsyncGenerator[StreamEvent, None]:
        content_type = response.headers.get("content-type", "")
        if "json" in content_type and "event-stream" not in content_type:
            # A server that ignored "stream": true and answered with one completion.
            raw = await _read_limited(response, limit=None)
            for event in self._completion_events(self._decode_json(raw)):
                yield event
            return
        finish_reason: str | None = None
        async with aclosing(_sse_messages(response)) as messages:
            async for event_type, data in messages:
                if data == "[DONE]":
                    yield Finish(finish_reason or "stop")
                    return
                chunk = self._decode_json(data)
                if event_type == "error" and "error" not in chunk:
                    chunk = {"error": chunk}
                events, reason = self._chunk_events(chunk)
                finish_reason = reason or finish_reason
                for event in events:
                    yield event
        if finish_reason is None:
            raise self._error(
                f"the stream from {self._host} ended before the reply was complete", "protocol"
            )
        yield Finish(finish_reason)

    def _decode_json(self, data: str | bytes) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except ValueError as err:
            raise self._error(
                f"malformed JSON in the stream from {self._host}", "protocol"
            ) from err
        if not isinstance(value, dict):
            raise self._error(f"unexpected JSON in the stream from {self._host}", "protocol")
        return value

    def _chunk_events(self, chunk: Mapping[str, Any]) -> tuple[list[StreamEvent], str | None]:
        self._raise_embedded_error(chunk)
        events: list[StreamEvent] = []
        reason: str | None = None
        choice = _first_choice(chunk)
        if choice is not None:
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                events.extend(_deltas(delta))
            if isinstance(choice.get("finish_reason"), str):
                reason = choice["finish_reason"]
        usage = chunk.get("usage")
        if isinstance(usage, Mapping) and usage:
            events.append(Usage(dict(usage)))
        return events, reason

    def _completion_events(self, completion: Mapping[str, Any]) -> list[StreamEvent]:
        self._raise_embedded_error(completion)
        choice = _first_choice(completion)
        message = choice.get("message") if choice is not None else None
        if choice is None or not isinstance(message, Mapping):
            raise self._error(f"no reply in the answer from {self._host}", "protocol")
        events = _deltas(message)
        usage = completion.get("usage")
        if isinstance(usage, Mapping) and usage:
            events.append(Usage(dict(usage)))
        reason = choice.get("finish_reason")
        events.append(Finish(reason if isinstance(reason, str) else "stop"))
        return events

    def _raise_embedded_error(self, chunk: Mapping[str, Any]) -> None:
        error = chunk.get("error")
        if error is None:
            return
        detail = _server_message(json.dumps({"error": error}), self._api_key)
        suffix = f": {detail}" if detail else ""
        raise self._error(f"{self._host} reported an error mid-stream{suffix}", "server")

    # -- helpers ------------------------------------------------------------------------

    @property
    def _host(self) -> str:
        try:
            return httpx.URL(self.url).netloc.decode("ascii", "replace") or self.url
        except (httpx.InvalidURL, TypeError):
            return self.url

    def _error(
        self, message: str, kind: ProviderErrorKind, *, status: int | None = None
    ) -> ProviderError:
        return ProviderError(_one_line(message, self._api_key), kind, status=status)


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``; a base that already names the endpoint is kept."""
    base = base_url.strip().rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return f"{base}/chat/completions"


async def _unless_cancelled(awaitable: Awaitable[_T], cancel: asyncio.Event | None) -> _T:
    """Await ``awaitable``, or cancel it and raise ``_Cancelled`` once ``cancel`` is set.

    The awaitable always runs to its end (result, error or cancellation) before we return,
    so a generator behind it is never left running.
    """
    if cancel is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        await asyncio.wait({task})
        _forget(task)
        raise
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task})
    _forget(task)  # the caller asked to stop; whatever the work ended with is moot
    raise _Cancelled


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # mark it retrieved so asyncio does not log it


async def _sse_messages(response: httpx.Response) -> AsyncGenerator[tuple[str, str], None]:
    decoder = _SSEDecoder()
    async for chunk in response.aiter_bytes():
        for message in decoder.feed(chunk):
            yield message
    for message in decoder.close():
        yield message


class _SSEDecoder:
    """Incremental server-sent-events parser: bytes in, ``(event type, data)`` out.

    Handles LF/CR/CRLF line ends split across chunks, comments, multi-line data and UTF-8
    split across chunks. An unterminated last event is still delivered (lenient at EOF).
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._started = False
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        return self._consume(self._utf8.decode(chunk), final=False)

    def close(self) -> list[tuple[str, str]]:
        out = self._consume(self._utf8.decode(b"", final=True), final=True)
        if self._pending:
            out.extend(self._line(self._pending))
            self._pending = ""
        out.extend(self._line(""))
        return out

    def _consume(self, text: str, *, final: bool) -> list[tuple[str, str]]:
        buffer = self._pending + text
        if not self._started and buffer:
            self._started = True
            buffer = buffer.removeprefix("\ufeff")
        held = ""
        if not final and buffer.endswith("\r"):
            buffer, held = buffer[:-1], "\r"  # may be the first half of a CRLF
        lines = _LINE_END.split(buffer)
        self._pending = lines.pop() + held
        out: list[tuple[str, str]] = []
        for line in lines:
            out.extend(self._line(line))
        return out

    def _line(self, line: str) -> list[tuple[str, str]]:
        if not line:
            data, event = "\n".join(self._data), self._event
            self._data, self._event = [], ""
            return [(event or "message", data)] if data else []
        if line.startswith(":"):
            return []
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return []


def _first_choice(chunk: Mapping[str, Any]) -> Mapping[str, Any] | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
            return choice
    return None


def _deltas(delta: Mapping[str, Any]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    reasoning = delta.get("reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        events.append(ReasoningDelta(reasoning))
    content = delta.get("content")
    if isinstance(content, str) and content:
        events.append(TextDelta(content))
    return events


async def _read_limited(response: httpx.Response, limit: int | None = _ERROR_BODY_LIMIT) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if limit is not None and len(body) >= limit:
            break
    return bytes(body)


def _server_message(raw: bytes | str, api_key: str | None) -> str:
    """The human part of an error body: ``error.message`` and friends, else short plain text."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    message: object = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("code")
        elif isinstance(error, str):
            message = error
        if not message:
            message = value.get("message") or value.get("detail")
    elif value is None and not text.lstrip().startswith("<"):
        message = text  # plain text, not an HTML error page
    if not isinstance(message, str):
        return ""
    return _one_line(message, api_key)


def _one_line(text: str, api_key: str | None) -> str:
    if api_key:
        text = text.replace(api_key, "***")
    text = _WHITESPACE.sub(" ", text).strip()
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 1].rstrip() + "…"
    return text


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds (decimals tolerated) or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _after(attempt: int) -> str:
    return f" after {attempt} attempts" if attempt > 1 else ""


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__

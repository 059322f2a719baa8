"""A ``ModelProvider`` for any OpenAI-compatible chat-completions endpoint (DeepSeek by default).

Streams over server-sent events. Failures become ``ProviderError`` with a ``kind`` a UI can
explain; rate limits, 5xx answers and unreachable hosts are retried with backoff, but only
until the first event has been yielded, so a caller never sees a reply twice.

A hostile or broken server cannot hang or flood a reply: ``reply_timeout`` bounds the whole
reply, ``max_reply_bytes`` bounds its text and every single event or body, and decoding is
linear. The key is a ``Secret`` sent by an ``httpx.Auth`` that writes the header on the
request itself, so no frame holds it in a local; every message passes through ``redact``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Generator, Mapping, Sequence
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
    Waiting,
)
from core.secrets import (
    Secret,
    clean_api_key,
    install_log_redaction,
    redact,
    redact_url,
    url_secrets,
)
from core.surrogates import merge_surrogate_pairs

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MODEL",
    "DEFAULT_REPLY_TIMEOUT",
    "OpenAICompatibleProvider",
    "chat_completions_url",
    "wire_text",
]

DEFAULT_BASE_URL: Final = "https://api.deepseek.com"
DEFAULT_MODEL: Final = "deepseek-chat"
DEFAULT_API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
DEFAULT_REPLY_TIMEOUT: Final = 600.0
DEFAULT_MAX_REPLY_BYTES: Final = 4 * 1024 * 1024

_RETRYABLE: Final[frozenset[ProviderErrorKind]] = frozenset({"rate_limited", "server", "network"})
_ERROR_BODY_LIMIT: Final = 64 * 1024
_MESSAGE_LIMIT: Final = 300
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_WHITESPACE: Final = re.compile(r"\s+")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_BOM: Final = b"\xef\xbb\xbf"

_T = TypeVar("_T")


class _Cancelled(Exception):
    """The caller's cancel event fired while we were waiting."""


class _DeadlineReached(Exception):
    """``reply_timeout`` passed while we were waiting."""


class _TooLarge(Exception):
    """One event, line or body is larger than ``max_reply_bytes``."""


class _BearerAuth(httpx.Auth):
    """Writes ``Authorization: Bearer …`` on the request as it is sent, and nowhere else."""

    def __init__(self, key: Secret) -> None:
        self._key = key

    def __repr__(self) -> str:
        return "_BearerAuth(***)"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = "Bearer " + self._key.reveal()
        yield request


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
        api_key: str | Secret | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        retry_after_cap: float = 30.0,
        reply_timeout: float = DEFAULT_REPLY_TIMEOUT,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        client: httpx.AsyncClient | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        install_log_redaction()
        for credential in url_secrets(base_url):
            Secret(credential)  # remembered: redact() hides it in any text from now on
        self.model = model
        self.base_url = base_url
        try:
            self.url: str | None = chat_completions_url(base_url)
        except (httpx.InvalidURL, TypeError, ValueError):
            self.url = None  # reported when the model is asked, like a missing key
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_cap = retry_after_cap
        self.reply_timeout = reply_timeout
        self.max_reply_bytes = max_reply_bytes
        key = api_key if isinstance(api_key, Secret) else clean_api_key(api_key, api_key_env)
        self._auth = _BearerAuth(key) if key is not None else None
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self._injected_client = client
        self._own_client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        shown = redact_url(self.url or self.base_url)
        return f"OpenAICompatibleProvider(url={shown!r}, model={self.model!r})"

    # -- public API ---------------------------------------------------------------------

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Yield deltas (and ``Waiting`` before a retry), then ``Usage`` (if sent) and one
        ``Finish``. Every failure is a ``ProviderError``; the deltas already yielded stand.

        When ``cancel`` is set the response is closed and the generator simply ends.
        """
        if self._auth is None:
            raise ProviderError(f"no API key: set {self.api_key_env}", "missing_key")
        if self.url is None:
            raise self._error(f"invalid base URL {redact_url(self.base_url)!r}", "bad_request")
        body: dict[str, Any] = {
            "model": wire_text(self.model),
            "messages": [{"role": m.role, "content": wire_text(m.text)} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            body["max_tokens"] = self.max_output_tokens
        deadline = asyncio.get_running_loop().time() + self.reply_timeout
        inner = self._attempts(body, deadline)
        try:
            while cancel is None or not cancel.is_set():
                try:
                    event = await _next_before(anext(inner), cancel, deadline)
                except (StopAsyncIteration, _Cancelled):
                    return
                except _DeadlineReached:
                    raise self._error(
                        f"no complete reply from {self._host} within {self.reply_timeout:g} s "
                        "(reply_timeout)",
                        "timeout",
                    ) from None
                except ProviderError:
                    raise
                except Exception as err:  # a bug or a surprise below us: never a traceback
                    raise self._error(
                        f"unexpected failure talking to {self._host}: "
                        f"{type(err).__name__}: {_describe(err)}",
                        "protocol",
                    ) from err
                yield event
        finally:
            # Closing a broken stream must not mask the error that broke it.
            with contextlib.suppress(Exception):
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
        self, body: Mapping[str, Any], deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        assert self.url is not None and self._auth is not None
        client = self._client()
        attempt = 0
        while True:
            attempt += 1
            emitted = False
            try:
                async with client.stream(
                    "POST",
                    self.url,
                    json=body,
                    headers={"Accept": "text/event-stream"},
                    auth=self._auth,
                    timeout=self._timeout,
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
                    f"invalid base URL {redact_url(self.base_url)!r}: {err}", "bad_request"
                ) from err
            except httpx.LocalProtocolError as err:  # our own request is malformed: no retry
                raise self._error(
                    f"could not send the request to {self._host}: {_describe(err)}",
                    "bad_request",
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
            delay = self._delay(attempt, retry_after)
            reason = str(error)
            if retry_after is not None and retry_after > delay:
                reason += f" (the server asked to wait {retry_after:.0f} s)"
            if asyncio.get_running_loop().time() + delay >= deadline:
                # Waiting would only end in the deadline: say why now, not after the wait.
                raise self._error(
                    f"{reason}; not retrying: waiting {delay:g} s more would pass "
                    f"reply_timeout ({self.reply_timeout:g} s)",
                    error.kind,
                    status=error.status,
                )
            yield Waiting(delay, reason)
            await asyncio.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return max(0.0, min(retry_after, self.retry_after_cap))
        return float(min(self.backoff_base * 2 ** (attempt - 1), self.backoff_max))

    async def _status_error(
        self, response: httpx.Response, attempt: int
    ) -> tuple[ProviderError, float | None]:
        status = response.status_code
        raw, _ = await _read_limited(response, _ERROR_BODY_LIMIT)
        detail = _server_message(raw)
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
            message = (
                f"model {self.model!r} or endpoint {redact_url(self.url or '')} not found "
                f"(HTTP 404){suffix}"
            )
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
            message = f"unexpected HTTP {status} from {redact_url(self.url or '')}{suffix}"
        retry_after = _retry_after(response.headers.get("retry-after"))
        return self._error(message, kind, status=status), retry_after

    # -- the reply body -----------------------------------------------------------------

    async def _read_reply(self, response: httpx.Response) -> AsyncGenerator[StreamEvent, None]:
        limit = self.max_reply_bytes
        content_type = response.headers.get("content-type", "")
        if "json" in content_type and "event-stream" not in content_type:
            # A server that ignored "stream": true and answered with one completion.
            raw, complete = await _read_limited(response, limit)
            if not complete:
                raise self._too_large("body")
            for event in self._completion_events(self._decode_json(raw)):
                yield event
            return
        finish_reason: str | None = None
        size = 0
        messages = _sse_messages(response, limit)
        try:
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
                    if isinstance(event, TextDelta | ReasoningDelta):
                        size += len(event.text.encode("utf-8", "surrogatepass"))
                        if size > limit:
                            raise self._too_large("reply")
                    yield event
        except _TooLarge:
            raise self._too_large("event") from None
        finally:
            await messages.aclose()
        if finish_reason is None:
            raise self._error(
                f"the stream from {self._host} ended before the reply was complete", "protocol"
            )
        yield Finish(finish_reason)

    def _too_large(self, what: str) -> ProviderError:
        return self._error(
            f"the {what} from {self._host} is larger than max_reply_bytes "
            f"({self.max_reply_bytes} bytes); the rest was not read",
            "protocol",
        )

    def _decode_json(self, data: str | bytes) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as err:
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
        try:
            detail = _server_message(json.dumps({"error": error}))
        except (ValueError, TypeError, RecursionError):
            detail = ""
        suffix = f": {detail}" if detail else ""
        raise self._error(f"{self._host} reported an error mid-stream{suffix}", "server")

    # -- helpers ------------------------------------------------------------------------

    @property
    def _host(self) -> str:
        try:
            url = httpx.URL(self.url or self.base_url)
            return url.netloc.decode("ascii", "replace") or redact_url(str(url))
        except (httpx.InvalidURL, TypeError, ValueError):
            return redact_url(self.base_url)

    def _error(
        self, message: str, kind: ProviderErrorKind, *, status: int | None = None
    ) -> ProviderError:
        return ProviderError(_one_line(message), kind, status=status)


def chat_completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions`` with the endpoint in the path, before any query;
    a base that already names the endpoint is kept."""
    url = httpx.URL(base_url.strip())
    path = url.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return str(url.copy_with(path=path))


def wire_text(text: str) -> str:
    """``text`` as it may go over the wire: valid UTF-8, a surrogate pair as its character
    (SPEC §4.1: the model receives 🚀, not two U+FFFD), each lone surrogate as U+FFFD.

    Only what is sent changes; the session log keeps the text exactly.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", merge_surrogate_pairs(text))
    return text


async def _next_before(
    awaitable: Awaitable[_T], cancel: asyncio.Event | None, deadline: float
) -> _T:
    """Await ``awaitable``; cancel it and raise ``_Cancelled`` once ``cancel`` is set, or
    ``_DeadlineReached`` once the loop clock passes ``deadline``.

    The awaitable always runs to its end (result, error or cancellation) before we return,
    so a generator behind it is never left running.
    """
    loop = asyncio.get_running_loop()
    remaining = deadline - loop.time()
    if remaining <= 0:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise _DeadlineReached
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        await asyncio.wait(
            {task} if waiter is None else {task, waiter},
            timeout=remaining,
            return_when=asyncio.FIRST_COMPLETED,
        )
    except BaseException:
        task.cancel()
        await asyncio.wait({task})
        _forget(task)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task})
    _forget(task)  # we stop waiting; whatever the work ended with is moot
    if cancel is not None and cancel.is_set():
        raise _Cancelled
    raise _DeadlineReached


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # mark it retrieved so asyncio does not log it


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


async def _read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether that was all of it."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


def _server_message(raw: bytes | str) -> str:
    """The human part of an error body: ``error.message`` and friends, else short plain text."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
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
    return _one_line(message)


def _one_line(text: str) -> str:
    """Secrets redacted (before any cut, so no part of one survives), one line, bounded."""
    text = _WHITESPACE.sub(" ", redact(text)).strip()
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

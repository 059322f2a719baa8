"""``OpenAICompatibleProvider``: the request, its retries with backoff until the first
event, the reply read under its deadline and bounds, errors with a ``kind``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

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
from core.providers.openai.deadlines import _Cancelled, _DeadlineReached, _next_before
from core.providers.openai.errors import (
    _after,
    _describe,
    _one_line,
    _read_limited,
    _retry_after,
    _server_message,
)
from core.providers.openai.settings import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MODEL,
    DEFAULT_REPLY_TIMEOUT,
)
from core.providers.openai.sse import _sse_messages, _TooLarge
from core.providers.openai.wire import _deltas, _first_choice, chat_completions_url, wire_text
from core.secrets import Secret, clean_api_key, install_log_redaction, redact_url, url_secrets

_RETRYABLE: Final[frozenset[ProviderErrorKind]] = frozenset({"rate_limited", "server", "network"})
_ERROR_BODY_LIMIT: Final = 64 * 1024


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

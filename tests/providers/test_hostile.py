"""Hostile or broken servers on 127.0.0.1: a reply always ends, bounded, with what was shown kept.

Limits are tiny here so each test is quick; the behaviour, not the timing, is asserted
(waits are bounded by generous ``wait_for`` timeouts only).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from core.engine import ChatSession, ReplyDelta, ReplyFinished, ReplyWaiting
from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, USER_MESSAGE, message_text
from core.providers.base import ReasoningDelta, TextDelta, Waiting
from core.providers.openai import OpenAICompatibleProvider
from core.references import SessionReferenceService
from stores import MemorySessionStore, SessionQuery
from tests.providers.fake_openai import (
    BodyPart,
    FakeOpenAIServer,
    Pause,
    ScriptedResponse,
    chunk_json,
    sse_data,
)
from tests.providers.test_openai import collect, make_provider, text_of

SSE = {"Content-Type": "text/event-stream"}


def stream(body: Iterator[BodyPart] | list[BodyPart]) -> ScriptedResponse:
    return ScriptedResponse(headers=SSE, body=body)


def slowloris() -> Iterator[BodyPart]:
    yield sse_data(chunk_json("shown "))
    for byte in itertools.cycle(b": still here\n"):
        yield bytes([byte])
        yield Pause(0.05)


def keep_alive_forever() -> Iterator[BodyPart]:
    yield sse_data(chunk_json("shown "))
    while True:
        yield b": keep-alive\n\n"
        yield Pause(0.01)


def content_forever() -> Iterator[BodyPart]:
    while True:
        yield sse_data(chunk_json("x" * 500))


async def test_slowloris_ends_at_reply_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(stream(slowloris()))
    provider = make_provider(fake_openai, reply_timeout=0.6, read_timeout=5.0)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert text_of(events) == "shown "
    assert error is not None and error.kind == "timeout"
    assert "within 0.6 s (reply_timeout)" in str(error)


async def test_endless_keep_alive_comments_end_at_reply_timeout(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.add(stream(keep_alive_forever()))
    provider = make_provider(fake_openai, reply_timeout=0.5, read_timeout=5.0)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert text_of(events) == "shown "
    assert error is not None and error.kind == "timeout"


async def test_endless_content_ends_at_max_reply_bytes(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(stream(content_forever()))
    provider = make_provider(fake_openai, max_reply_bytes=20_000)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert error is not None and error.kind == "protocol"
    assert "max_reply_bytes (20000 bytes)" in str(error)
    assert 0 < len(text_of(events)) <= 20_000


async def test_one_huge_sse_line_is_refused_at_max_reply_bytes(
    fake_openai: FakeOpenAIServer,
) -> None:
    line = b"data: " + b'"' + b"y" * 3_000_000
    pieces: list[BodyPart] = [sse_data(chunk_json("shown"))]
    pieces += [line[i : i + 65536] for i in range(0, len(line), 65536)]
    fake_openai.add(stream(pieces))
    provider = make_provider(fake_openai, max_reply_bytes=100_000)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert events == [TextDelta("shown")]
    assert error is not None and error.kind == "protocol" and "max_reply_bytes" in str(error)


async def test_one_event_of_many_data_lines_is_bounded(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(stream([sse_data(chunk_json("shown")), *[b"data: zzzz\n"] * 50_000]))
    provider = make_provider(fake_openai, max_reply_bytes=100_000)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert events == [TextDelta("shown")]
    assert error is not None and "max_reply_bytes" in str(error)


async def test_a_huge_plain_json_body_is_refused(fake_openai: FakeOpenAIServer) -> None:
    text = "z" * 300_000
    completion = {"choices": [{"index": 0, "message": {"content": text}}]}
    fake_openai.add(
        ScriptedResponse(
            headers={"Content-Type": "application/json"},
            body=[json.dumps(completion).encode()],
            framing="length",
        )
    )
    provider = make_provider(fake_openai, max_reply_bytes=100_000)
    events, error = await asyncio.wait_for(collect(provider), 10)
    assert events == []
    assert error is not None and error.kind == "protocol" and "max_reply_bytes" in str(error)


async def test_a_plain_json_body_within_the_limit_still_works(
    fake_openai: FakeOpenAIServer,
) -> None:
    completion = {"choices": [{"index": 0, "message": {"content": "ok"}}]}
    body = json.dumps(completion).encode()
    fake_openai.add(
        ScriptedResponse(
            headers={"Content-Type": "application/json"}, body=[body], framing="length"
        )
    )
    events, error = await collect(make_provider(fake_openai, max_reply_bytes=len(body)))
    assert error is None and text_of(events) == "ok"


async def test_reasoning_counts_towards_the_reply_size(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json(reasoning="r" * 600) for _ in range(10)])
    events, error = await collect(make_provider(fake_openai, max_reply_bytes=2_000))
    assert error is not None and "max_reply_bytes" in str(error)
    assert sum(len(e.text) for e in events if isinstance(e, ReasoningDelta)) <= 2_000


async def test_deeply_nested_json_is_a_protocol_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(stream([sse_data(chunk_json("shown")), b"data: " + b"[" * 100_000 + b"\n\n"]))
    events, error = await asyncio.wait_for(collect(make_provider(fake_openai)), 10)
    assert events == [TextDelta("shown")]
    assert error is not None and error.kind == "protocol"
    assert "malformed JSON" in str(error)


async def test_long_retry_after_is_announced_with_the_real_wait(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.error(429, "slow down", headers={"Retry-After": "91"})
    fake_openai.sse([chunk_json("ok", finish="stop")])
    events, error = await collect(make_provider(fake_openai, retry_after_cap=0.2))
    assert error is None and text_of(events) == "ok"
    [waiting] = [e for e in events if isinstance(e, Waiting)]
    assert waiting.seconds == 0.2
    assert "HTTP 429" in waiting.reason and "asked to wait 91 s" in waiting.reason
    assert events[0] == waiting  # said before the wait, not after


async def test_a_wait_that_would_pass_the_reply_deadline_fails_at_once(
    fake_openai: FakeOpenAIServer,
) -> None:
    """A Retry-After longer than what is left of ``reply_timeout``: no silent wait that can
    only end in a timeout, but the error now, saying why."""
    fake_openai.error(429, "slow down", headers={"Retry-After": "91"})
    fake_openai.sse([chunk_json("never", finish="stop")])
    events, error = await collect(
        make_provider(fake_openai, retry_after_cap=30.0, reply_timeout=5.0)
    )
    assert not [e for e in events if isinstance(e, Waiting)]
    assert error is not None and error.kind == "rate_limited" and error.status == 429
    assert "asked to wait 91 s" in str(error) and "reply_timeout (5 s)" in str(error)
    assert len(fake_openai.requests) == 1


# -- through the engine: what was shown is stored ------------------------------------------


async def chat_on(
    provider: OpenAICompatibleProvider, store: MemorySessionStore | None = None
) -> tuple[ChatSession, MemorySessionStore]:
    store = store or MemorySessionStore()
    query = SessionQuery(store)
    header = await store.create_session("s")
    return ChatSession(store, query, SessionReferenceService(query), provider, header), store


async def test_engine_stores_text_shown_before_deep_nesting(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.add(stream([sse_data(chunk_json("shown")), b"data: " + b"[" * 100_000 + b"\n\n"]))
    provider = make_provider(fake_openai)
    chat, store = await chat_on(provider)
    updates: list[Any] = [u async for u in chat.send("hi")]
    await provider.aclose()
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "error" and finished.error is not None
    assert finished.error.kind == "protocol"
    reply = [e for e in await store.read_events("s") if e.type == ASSISTANT_MESSAGE][-1]
    assert message_text(reply.data["message"]) == "shown"
    assert reply.data["finish"] == "error"


async def test_engine_says_it_is_waiting(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(429, headers={"Retry-After": "91"})
    fake_openai.sse([chunk_json("ok", finish="stop")])
    provider = make_provider(fake_openai, retry_after_cap=0.1)
    chat, _ = await chat_on(provider)
    updates: list[Any] = [u async for u in chat.send("hi")]
    await provider.aclose()
    waits = [u for u in updates if isinstance(u, ReplyWaiting)]
    assert len(waits) == 1 and waits[0].seconds == 0.1 and "91 s" in waits[0].reason
    assert updates.index(waits[0]) < next(
        i for i, u in enumerate(updates) if isinstance(u, ReplyDelta)
    )


async def test_chunks_are_stored_while_the_stream_stalls(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("seen "), chunk_json("already"), Pause(30), chunk_json("late")])
    provider = make_provider(fake_openai, read_timeout=60.0)
    chat, store = await chat_on(provider)
    interrupt = asyncio.Event()
    shown: list[str] = []

    async def run() -> list[Any]:
        out = []
        async for update in chat.send("hi", interrupt=interrupt):
            out.append(update)
            if isinstance(update, ReplyDelta):
                shown.append(update.text)
        return out

    task = asyncio.create_task(run())

    async def chunks_stored() -> list[str]:
        while True:
            events = await store.read_events("s")
            texts = [e.data["chunk"]["text"] for e in events if e.type == ASSISTANT_CHUNK]
            if "".join(texts) == "seen already":
                return texts
            await asyncio.sleep(0.02)

    try:
        texts = await asyncio.wait_for(chunks_stored(), 10)  # the server is still stalled
        assert not task.done()
        assert texts == ["seen ", "already"] == shown
    finally:
        interrupt.set()
        updates = await asyncio.wait_for(task, 10)
        await provider.aclose()
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "interrupted"


async def test_surrogates_send_and_compact_and_the_log_keeps_them(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("got it", finish="stop")])
    fake_openai.sse([chunk_json("a summary", finish="stop")])
    provider = make_provider(fake_openai)
    chat, store = await chat_on(provider)
    updates: list[Any] = [u async for u in chat.send("caf\udce9")]
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "completed", finished.error
    result = await chat.compact()
    await provider.aclose()
    assert result.summary == "a summary"
    for request in fake_openai.requests:
        request.body.decode("utf-8")  # valid UTF-8 on the wire
        contents = [m["content"] for m in request.json["messages"]]
        assert "caf\ufffd" in contents
    first_user = next(e for e in await store.read_events("s") if e.type == USER_MESSAGE)
    assert message_text(first_user.data) == "caf\udce9"  # the log keeps the text exactly


# -- anything that goes wrong inside the provider is a ProviderError -------------------------


class _BreaksAfterFirstChunk(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk
            raise RuntimeError(f"transport bug near Bearer {SECRET_KEY}\nsecond line")

    async def aclose(self) -> None:
        await self.inner.aclose()


class BrokenTransport(httpx.AsyncHTTPTransport):
    """Real HTTP to the fake server, but the body stream fails with a non-httpx exception."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_BreaksAfterFirstChunk(response.stream),
            extensions=response.extensions,
        )


SECRET_KEY = "sk-" + "transport-bug-" + "1234"


async def test_an_unexpected_exception_is_a_one_line_provider_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("shown"), Pause(0.3), chunk_json("never")])
    async with httpx.AsyncClient(transport=BrokenTransport()) as client:
        provider = make_provider(fake_openai, api_key=SECRET_KEY, client=client)
        events, error = await asyncio.wait_for(collect(provider), 10)
    assert events == [TextDelta("shown")]
    assert error is not None and error.kind == "protocol"
    assert str(error).startswith("unexpected failure talking to 127.0.0.1:")
    assert "RuntimeError: transport bug near Bearer *** second line" in str(error)
    assert SECRET_KEY not in str(error)

"""``OpenAICompatibleProvider`` against a real HTTP server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from core.providers.base import (
    Finish,
    ModelProvider,
    ProviderError,
    ProviderMessage,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
    Waiting,
)
from core.providers.openai import OpenAICompatibleProvider, chat_completions_url
from tests.providers.fake_openai import (
    Drop,
    FakeOpenAIServer,
    Pause,
    ScriptedResponse,
    chunk_json,
    closed_port,
    sse_data,
)

KEY = "sk-test-secret-0123456789"
MESSAGES = [
    ProviderMessage("system", "Be brief."),
    ProviderMessage("user", "Hello?"),
]
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def make_provider(server: FakeOpenAIServer | str, **overrides: Any) -> OpenAICompatibleProvider:
    base_url = server if isinstance(server, str) else server.base_url
    options: dict[str, Any] = {
        "base_url": base_url,
        "api_key": KEY,
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
        "max_retries": 2,
        "backoff_base": 0.01,
        "retry_after_cap": 1.0,
    }
    options.update(overrides)
    return OpenAICompatibleProvider(**options)


async def collect(
    provider: OpenAICompatibleProvider, *, cancel: asyncio.Event | None = None
) -> tuple[list[StreamEvent], ProviderError | None]:
    """All events, and the error that ended the stream (checked to be one clean line)."""
    events: list[StreamEvent] = []
    try:
        async for event in provider.stream(MESSAGES, cancel=cancel):
            events.append(event)
    except ProviderError as err:
        message = str(err)
        assert KEY not in message
        assert "\n" not in message and message.strip() == message and message
        return events, err
    finally:
        await provider.aclose()
    return events, None


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- the happy path ---------------------------------------------------------------------


async def test_streams_reasoning_text_usage_and_finish(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse(
        [
            chunk_json(reasoning="Think"),
            chunk_json(reasoning="ing."),
            chunk_json("Hel"),
            chunk_json("lo!"),
            chunk_json(finish="stop"),
            {"id": "x", "choices": [], "usage": USAGE},
        ]
    )
    events, error = await collect(make_provider(fake_openai, model="deepseek-reasoner"))

    assert error is None
    assert events == [
        ReasoningDelta("Think"),
        ReasoningDelta("ing."),
        TextDelta("Hel"),
        TextDelta("lo!"),
        Usage(USAGE),
        Finish("stop"),
    ]
    [request] = fake_openai.requests
    assert request.method == "POST"
    assert request.path == "/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.json == {
        "model": "deepseek-reasoner",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_usage_in_the_finishing_chunk_and_openrouter_reasoning(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse(
        [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"choices": [{"index": 0, "delta": {"reasoning": "hmm", "content": None}}]},
            chunk_json("ok", finish="length", usage=USAGE),
        ]
    )
    events, error = await collect(make_provider(fake_openai))
    assert error is None
    assert events == [ReasoningDelta("hmm"), TextDelta("ok"), Usage(USAGE), Finish("length")]


def test_provider_satisfies_the_protocol() -> None:
    provider: ModelProvider = OpenAICompatibleProvider(api_key=KEY)
    assert isinstance(provider, ModelProvider)
    assert provider.name == "openai"
    assert provider.model == "deepseek-chat"
    assert KEY not in repr(provider)


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://api.deepseek.com", "https://api.deepseek.com/chat/completions"),
        ("https://api.deepseek.com/", "https://api.deepseek.com/chat/completions"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"),
        ("http://h:8000/v1/chat/completions", "http://h:8000/v1/chat/completions"),
    ],
)
def test_chat_completions_url(base: str, url: str) -> None:
    assert chat_completions_url(base) == url


async def test_base_url_with_v1_and_trailing_slash(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("hi", finish="stop")])
    events, error = await collect(make_provider(f"{fake_openai.base_url}/v1/"))
    assert error is None
    assert text_of(events) == "hi"
    assert fake_openai.requests[0].path == "/v1/chat/completions"


async def test_done_ends_the_stream_even_if_the_server_keeps_going(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse(
        [chunk_json("a"), sse_data("[DONE]"), Pause(5.0), chunk_json("never")], done=False
    )
    started = time.monotonic()
    events, error = await collect(make_provider(fake_openai))
    assert error is None
    assert events == [TextDelta("a"), Finish("stop")]  # [DONE] without finish_reason → "stop"
    assert (
        time.monotonic() - started < 4.5
    )  # under the 5 s the server pauses: it did not wait for it
    await asyncio.wait_for(fake_openai.requests[0].disconnected.wait(), 2.0)


async def test_finish_reason_without_done_is_a_complete_reply(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("a"), chunk_json(finish="stop")], done=False, framing="close")
    events, error = await collect(make_provider(fake_openai))
    assert error is None
    assert events == [TextDelta("a"), Finish("stop")]


async def test_sse_comments_multiline_data_crlf_and_split_chunks(
    fake_openai: FakeOpenAIServer,
) -> None:
    first = json.dumps(chunk_json("héllo "))
    second = json.dumps(chunk_json("wörld", finish="stop"), indent=1)  # spans several lines
    multi_line = "".join(f"data: {line}\r\n" for line in second.splitlines())
    stream = (
        b": connected\r\n\r\n"
        + b"event: message\r\nid: 1\rretry: 1000\n"
        + f"data:{first}\r\n\r\n".encode()
        + b":keep-alive\n\n"
        + multi_line.encode()
        + b"\r\n"
        + b"data: [DONE]\r\n\r\n"
    )
    # Split into tiny pieces so CRLFs and multi-byte UTF-8 characters straddle chunk borders.
    pieces: list[bytes | Pause | Drop] = [stream[i : i + 3] for i in range(0, len(stream), 3)]
    fake_openai.sse(pieces, done=False)
    events, error = await collect(make_provider(fake_openai))
    assert error is None
    assert events == [TextDelta("héllo "), TextDelta("wörld"), Finish("stop")]


async def test_a_plain_json_completion_is_accepted(fake_openai: FakeOpenAIServer) -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "whole", "reasoning_content": "r"},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }
    fake_openai.add(
        ScriptedResponse(
            headers={"Content-Type": "application/json"},
            body=[json.dumps(completion).encode()],
            framing="length",
        )
    )
    events, error = await collect(make_provider(fake_openai))
    assert error is None
    assert events == [ReasoningDelta("r"), TextDelta("whole"), Usage(USAGE), Finish("stop")]


async def test_complete_collects_the_text(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json(reasoning="x"), chunk_json("A title"), chunk_json("!")])
    provider = make_provider(fake_openai)
    try:
        assert await provider.complete(MESSAGES) == "A title!"
    finally:
        await provider.aclose()


# -- HTTP errors ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_is_an_auth_error(fake_openai: FakeOpenAIServer, status: int) -> None:
    fake_openai.error(status, f"Authentication Fails, your api key {KEY} is invalid")
    events, error = await collect(make_provider(fake_openai, api_key_env="MY_KEY"))
    assert events == []
    assert error is not None
    assert (error.kind, error.status) == ("auth", status)
    assert "rejected" in str(error) and "MY_KEY" in str(error)
    assert "Authentication Fails" in str(error)  # the server's words, key redacted
    assert len(fake_openai.requests) == 1


async def test_not_found_names_model_and_url(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(404, "Model Not Exist")
    _, error = await collect(make_provider(fake_openai, model="deepseek-nope"))
    assert error is not None
    assert (error.kind, error.status) == ("not_found", 404)
    assert "deepseek-nope" in str(error)
    assert f"{fake_openai.base_url}/chat/completions" in str(error)
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("status", [400, 422])
async def test_bad_request_carries_the_server_message(
    fake_openai: FakeOpenAIServer, status: int
) -> None:
    fake_openai.error(status, "Invalid 'messages':\n  content must be a string")
    _, error = await collect(make_provider(fake_openai))
    assert error is not None
    assert (error.kind, error.status) == ("bad_request", status)
    assert "Invalid 'messages': content must be a string" in str(error)
    assert len(fake_openai.requests) == 1


async def test_non_json_error_body_is_summarised(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(
        ScriptedResponse(status=400, body=[b"<html><body>Bad</body></html>"], framing="length")
    )
    _, error = await collect(make_provider(fake_openai))
    assert error is not None
    assert error.kind == "bad_request"
    assert "<html>" not in str(error)


async def test_rate_limit_is_retried_honouring_retry_after(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.error(429, "slow down", headers={"Retry-After": "0.3"})
    fake_openai.sse([chunk_json("ok", finish="stop")])
    started = time.monotonic()
    events, error = await collect(make_provider(fake_openai, backoff_base=0.001))
    assert error is None
    assert text_of(events) == "ok"
    assert len(fake_openai.requests) == 2
    assert time.monotonic() - started >= 0.3


async def test_retry_after_is_capped(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(429, headers={"Retry-After": "3600"})
    fake_openai.sse([chunk_json("ok", finish="stop")])
    started = time.monotonic()
    events, error = await collect(make_provider(fake_openai, retry_after_cap=0.1))
    assert error is None and text_of(events) == "ok"
    assert time.monotonic() - started < 30  # nowhere near the 3600 s asked for


async def test_rate_limit_gives_up_after_max_retries(fake_openai: FakeOpenAIServer) -> None:
    for _ in range(3):
        fake_openai.error(429, "quota", headers={"Retry-After": "0"})
    _, error = await collect(make_provider(fake_openai, max_retries=2))
    assert error is not None
    assert (error.kind, error.status) == ("rate_limited", 429)
    assert len(fake_openai.requests) == 3


async def test_server_errors_retried_exactly_max_retries_times(
    fake_openai: FakeOpenAIServer,
) -> None:
    for _ in range(4):
        fake_openai.error(500, "boom")
    fake_openai.sse([chunk_json("never reached")])
    _, error = await collect(make_provider(fake_openai, max_retries=3))
    assert error is not None
    assert (error.kind, error.status) == ("server", 500)
    assert "after 4 attempts" in str(error) and "boom" in str(error)
    assert len(fake_openai.requests) == 4


async def test_server_error_then_success(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(503)
    fake_openai.error(502)
    fake_openai.sse([chunk_json("fine", finish="stop")])
    events, error = await collect(make_provider(fake_openai))
    assert error is None and text_of(events) == "fine"
    assert len(fake_openai.requests) == 3
    assert all(r.json == fake_openai.requests[0].json for r in fake_openai.requests)


async def test_max_retries_zero_means_one_attempt(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(500)
    fake_openai.sse([chunk_json("never reached")])
    _, error = await collect(make_provider(fake_openai, max_retries=0))
    assert error is not None and error.kind == "server"
    assert len(fake_openai.requests) == 1


# -- network, timeouts, broken streams --------------------------------------------------


async def test_connection_refused_is_a_network_error() -> None:
    started = time.monotonic()
    _, error = await collect(make_provider(f"http://127.0.0.1:{closed_port()}"))
    assert error is not None
    assert error.kind == "network" and error.status is None
    assert "after 3 attempts" in str(error)
    assert time.monotonic() - started < 10  # short backoffs, no long wait
    assert isinstance(error.__cause__, httpx.ConnectError)


async def test_server_stalling_before_headers_is_a_timeout(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.add(ScriptedResponse(head_delay=5.0))
    started = time.monotonic()
    _, error = await collect(make_provider(fake_openai, read_timeout=0.3))
    assert error is not None and error.kind == "timeout"
    assert time.monotonic() - started < 4.5  # under the 5 s stall: the read timeout fired
    assert len(fake_openai.requests) == 1  # timeouts are not retried


async def test_stall_mid_stream_is_a_timeout_after_partial_output(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("part"), Pause(5.0), chunk_json("rest")])
    events, error = await collect(make_provider(fake_openai, read_timeout=0.3))
    assert events == [TextDelta("part")]
    assert error is not None and error.kind == "timeout"


async def test_malformed_chunk_is_a_protocol_error_after_earlier_deltas(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("one "), chunk_json("two"), b'data: {"choices": [\n\n'])
    fake_openai.sse([chunk_json("retry must not happen")])
    events, error = await collect(make_provider(fake_openai))
    assert events == [TextDelta("one "), TextDelta("two")]
    assert error is not None and error.kind == "protocol"
    assert len(fake_openai.requests) == 1


async def test_dropped_connection_is_a_protocol_error_without_retry(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("partial "), chunk_json("text"), Drop()])
    fake_openai.sse([chunk_json("retry must not happen")])
    events, error = await collect(make_provider(fake_openai))
    assert text_of(events) == "partial text"
    assert error is not None and error.kind == "protocol"
    assert "dropped" in str(error)
    assert len(fake_openai.requests) == 1


async def test_stream_ending_without_done_is_a_protocol_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("cut"), chunk_json(" off")], done=False, framing="close")
    fake_openai.sse([chunk_json("retry must not happen")])
    events, error = await collect(make_provider(fake_openai))
    assert text_of(events) == "cut off"
    assert error is not None and error.kind == "protocol"
    assert len(fake_openai.requests) == 1


async def test_drop_before_any_output_is_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([Drop()])
    fake_openai.sse([chunk_json("second try", finish="stop")])
    events, error = await collect(make_provider(fake_openai))
    assert error is None and text_of(events) == "second try"
    assert len(fake_openai.requests) == 2


async def test_error_object_mid_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("so far"), {"error": {"message": "upstream overloaded"}}])
    events, error = await collect(make_provider(fake_openai))
    assert events == [TextDelta("so far")]
    assert error is not None and error.kind == "server"
    assert "upstream overloaded" in str(error)


# -- keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [None, ""])
async def test_missing_key_fails_before_any_request(
    fake_openai: FakeOpenAIServer, api_key: str | None
) -> None:
    fake_openai.sse([chunk_json("unreachable")])
    _, error = await collect(make_provider(fake_openai, api_key=api_key, api_key_env="MY_VAR"))
    assert error is not None
    assert error.kind == "missing_key"
    assert str(error) == "no API key: set MY_VAR"
    assert fake_openai.requests == []


async def test_missing_key_default_names_deepseek_variable() -> None:
    provider = OpenAICompatibleProvider(api_key=None)
    with pytest.raises(ProviderError, match=r"^no API key: set DEEPSEEK_API_KEY$"):
        await provider.complete(MESSAGES)
    await provider.aclose()


# -- cancellation and closing -----------------------------------------------------------


async def test_cancel_mid_stream_stops_promptly_and_hangs_up(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("first"), Pause(10.0), chunk_json("second")])
    provider = make_provider(fake_openai, read_timeout=30.0)
    cancel = asyncio.Event()
    events: list[StreamEvent] = []
    started = time.monotonic()

    async def consume() -> None:
        async for event in provider.stream(MESSAGES, cancel=cancel):
            events.append(event)
            cancel.set()

    await asyncio.wait_for(consume(), 9.0)  # ends without an error
    assert time.monotonic() - started < 9  # under the 10 s pause: the cancel cut it short
    assert events == [TextDelta("first")]
    await asyncio.wait_for(fake_openai.requests[0].disconnected.wait(), 1.0)
    await provider.aclose()


async def _cancel_once_received(server: FakeOpenAIServer, cancel: asyncio.Event) -> None:
    """Set ``cancel`` once the server holds the request (not on a timer: a loaded machine
    may not have sent it yet)."""
    await server.received.wait()
    cancel.set()


async def test_cancel_while_waiting_for_headers(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.add(ScriptedResponse(head_delay=10.0))
    provider = make_provider(fake_openai, read_timeout=30.0)
    cancel = asyncio.Event()
    canceller = asyncio.create_task(_cancel_once_received(fake_openai, cancel))
    # Well under the 10 s the server holds its headers back: the cancel cut the wait short.
    events, error = await asyncio.wait_for(collect(provider, cancel=cancel), 8.0)
    await canceller
    assert (events, error) == ([], None)
    await asyncio.wait_for(fake_openai.requests[0].disconnected.wait(), 5.0)


async def test_cancel_during_retry_backoff(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(503, headers={"Retry-After": "10"})
    provider = make_provider(fake_openai, retry_after_cap=10.0)
    cancel = asyncio.Event()
    events: list[StreamEvent] = []

    async def read_until_waiting() -> None:
        async for event in provider.stream(MESSAGES, cancel=cancel):
            events.append(event)
            if isinstance(event, Waiting):
                cancel.set()  # during the backoff that follows

    # Well under the 10 s backoff: the cancel cut the wait short.
    await asyncio.wait_for(read_until_waiting(), 8.0)
    await provider.aclose()
    [waiting] = events  # the only event says why nothing comes for 10 s
    assert isinstance(waiting, Waiting) and waiting.seconds == 10.0
    assert "HTTP 503" in waiting.reason
    assert len(fake_openai.requests) == 1


async def test_already_set_cancel_makes_no_request(fake_openai: FakeOpenAIServer) -> None:
    cancel = asyncio.Event()
    cancel.set()
    events, error = await collect(make_provider(fake_openai), cancel=cancel)
    assert (events, error) == ([], None)
    assert fake_openai.requests == []


async def test_aclose_of_the_generator_closes_the_response(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("first"), Pause(10.0), chunk_json("second")])
    provider = make_provider(fake_openai, read_timeout=30.0)
    stream = provider.stream(MESSAGES)
    assert await anext(stream) == TextDelta("first")
    await stream.aclose()
    await asyncio.wait_for(fake_openai.requests[0].disconnected.wait(), 1.0)
    await provider.aclose()


async def test_task_cancellation_closes_the_response(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("first"), Pause(10.0), chunk_json("second")])
    provider = make_provider(fake_openai, read_timeout=30.0)
    got_first = asyncio.Event()

    async def consume() -> None:
        async for _ in provider.stream(MESSAGES, cancel=asyncio.Event()):
            got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 2.0)
    await asyncio.sleep(0.05)  # now blocked reading the paused body
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake_openai.requests[0].disconnected.wait(), 1.0)
    await provider.aclose()


async def test_injected_client_is_used_and_left_open(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("a", finish="stop")])
    fake_openai.sse([chunk_json("b", finish="stop")])
    async with httpx.AsyncClient(headers={"X-Test": "yes"}) as client:
        provider = make_provider(fake_openai, client=client)
        assert await provider.complete(MESSAGES) == "a"
        await provider.aclose()
        assert not client.is_closed
        assert await provider.complete(MESSAGES) == "b"
    assert fake_openai.requests[0].headers["x-test"] == "yes"


async def test_provider_aclose_closes_its_own_client_and_can_be_reused(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("a", finish="stop")])
    fake_openai.sse([chunk_json("b", finish="stop")])
    provider = make_provider(fake_openai)
    assert await provider.complete(MESSAGES) == "a"
    await provider.aclose()
    await provider.aclose()  # idempotent
    assert await provider.complete(MESSAGES) == "b"
    await provider.aclose()

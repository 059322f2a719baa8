"""Keys and URL credentials never leave the provider: not in errors, logs or the store."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from core.config import ConfigError
from core.engine import ChatSession, ReplyFinished
from core.log import TURN_END
from core.providers.base import ProviderError, TextDelta
from core.providers.openai import OpenAICompatibleProvider, chat_completions_url
from core.references import SessionReferenceService
from core.secrets import Secret
from stores import MemorySessionStore, SessionQuery
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json
from tests.providers.test_openai import MESSAGES, collect, make_provider, text_of

KEY = "sk-test-secret-0123456789"


async def test_key_with_trailing_crlf_is_sent_stripped(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.sse([chunk_json("ok", finish="stop")])
    events, error = await collect(make_provider(fake_openai, api_key=f"  {KEY}\r\n"))
    assert error is None and text_of(events) == "ok"
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_key_with_inner_control_character_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAICompatibleProvider(api_key="sk-abc\rdef-tail", api_key_env="MY_KEY")
    assert "MY_KEY" in str(caught.value) and "def-tail" not in str(caught.value)


async def test_a_header_the_client_refuses_is_not_retried_and_not_shown(
    fake_openai: FakeOpenAIServer,
) -> None:
    """Defence in depth: even a key that skipped validation never reaches a message."""
    bad = "sk-bypass-validation-4242\r"
    fake_openai.sse([chunk_json("never")])
    events, error = await collect(make_provider(fake_openai, api_key=Secret(bad)))
    assert events == []
    assert error is not None and error.kind == "bad_request"
    assert "bypass-validation" not in str(error) and "4242" not in str(error)
    assert fake_openai.requests == []  # refused locally, once, never as a "network" retry


def test_provider_repr_and_state_show_no_key() -> None:
    provider = OpenAICompatibleProvider(
        api_key=KEY, base_url="https://user:pw-hidden-1@h.example/v1?api-key=q-hidden-2"
    )
    assert KEY not in repr(vars(provider))  # the key is a Secret even inside the object
    shown = repr(provider)
    assert "pw-hidden-1" not in shown and "q-hidden-2" not in shown


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://h/v1?api-key=abc", "https://h/v1/chat/completions?api-key=abc"),
        ("https://h?api-version=1", "https://h/chat/completions?api-version=1"),
        ("https://h/v1/chat/completions/?x=1", "https://h/v1/chat/completions?x=1"),
        ("https://u:p@h/v1/", "https://u:p@h/v1/chat/completions"),
    ],
)
def test_the_endpoint_goes_in_the_path_before_the_query(base: str, url: str) -> None:
    assert chat_completions_url(base) == url


def credentialed(server: FakeOpenAIServer) -> str:
    return f"http://alice:pw-in-url-31@127.0.0.1:{server.port}/v1?api-key=q-in-url-32"


async def test_url_credentials_reach_the_server_but_no_error_or_log(
    fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.sse([chunk_json("ok", finish="stop")])
    fake_openai.error(404, "no such model")
    caplog.set_level(logging.INFO)
    events, error = await collect(make_provider(credentialed(fake_openai)))
    assert error is None and text_of(events) == "ok"
    assert fake_openai.requests[0].path == "/v1/chat/completions?api-key=q-in-url-32"
    _, error = await collect(make_provider(credentialed(fake_openai)))
    assert error is not None and error.kind == "not_found"
    assert "/v1/chat/completions?api-key=***" in str(error)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "HTTP Request: POST" in logged
    for secret in ("alice", "pw-in-url-31", "q-in-url-32", KEY):
        assert secret not in str(error)
        assert secret not in logged


async def test_stored_errors_hold_no_credentials(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.error(401, f"bad key {KEY} for {credentialed(fake_openai)}")
    store = MemorySessionStore()
    query = SessionQuery(store)
    header = await store.create_session("s")
    provider = make_provider(credentialed(fake_openai))
    chat = ChatSession(store, query, SessionReferenceService(query), provider, header)
    updates: list[Any] = [u async for u in chat.send("hello")]
    await provider.aclose()
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "error"
    stored = repr(await store.read_events("s"))
    end = [e for e in await store.read_events("s") if e.type == TURN_END][-1]
    assert end.data["error"]["kind"] == "auth"
    for secret in ("pw-in-url-31", "q-in-url-32", KEY):
        assert secret not in stored


async def test_surrogate_goes_over_the_wire_as_replacement_character(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.sse([chunk_json("fine", finish="stop")])
    provider = make_provider(fake_openai)
    messages = [*MESSAGES[:1], type(MESSAGES[1])("user", "caf\udce9 \ud83d\ude00")]
    events: list[Any] = []
    try:
        async for event in provider.stream(messages):
            events.append(event)
    except ProviderError as err:  # pragma: no cover - the failure this test guards against
        pytest.fail(f"sending a lone surrogate failed: {err}")
    finally:
        await provider.aclose()
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("fine")]
    sent = fake_openai.requests[0].body.decode("utf-8")  # strict: valid UTF-8
    # A lone surrogate is U+FFFD; a pair is its character (SPEC 4.1).
    assert fake_openai.requests[0].json["messages"][1]["content"] == "caf\ufffd 😀"
    assert "\\ud" not in sent

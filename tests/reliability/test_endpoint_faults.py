"""The model endpoint fails in every way we know; the chat engine (real OpenAI-compatible
provider, real SQLite store, local fake server) keeps the user's message, keeps and marks
the partial reply, and the session stays usable for the next send.

``FAULTS`` is the matrix; each case is one injected fault (retried ones inject several).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.engine import ChatSession, ReplyFinished, Submitted
from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END, USER_MESSAGE, message_text
from core.providers.openai import OpenAICompatibleProvider
from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.providers.fake_openai import (
    Drop,
    FakeOpenAIServer,
    Pause,
    ScriptedResponse,
    chunk_json,
    closed_port,
)


@dataclass(frozen=True)
class Fault:
    """How to script the server, what the reply should end as, and what is kept of it."""

    script: Callable[[FakeOpenAIServer], None]
    status: str  # "completed" or "error"
    partial: str  # the reply text that must be stored ("" = no assistant message)
    kind: str | None = None  # ProviderError.kind when status is "error"
    injected: int = 1  # how many failures this case injects
    refused: bool = False  # point the provider at a port nobody listens on


def _sse(*parts: object, done: bool = True) -> Callable[[FakeOpenAIServer], None]:
    return lambda server: server.sse(list(parts), done=done)


def _then(*steps: Callable[[FakeOpenAIServer], None]) -> Callable[[FakeOpenAIServer], None]:
    def script(server: FakeOpenAIServer) -> None:
        for step in steps:
            step(server)

    return script


def _status(code: int, retry_after: str | None = None) -> Callable[[FakeOpenAIServer], None]:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    return lambda server: server.error(code, f"fake {code}", headers=headers)


def _stall_before_headers(server: FakeOpenAIServer) -> None:
    server.add(ScriptedResponse(head_delay=5.0, headers={"Content-Type": "text/event-stream"}))


OK = _sse(chunk_json("all "), chunk_json("good", finish="stop"))

FAULTS: dict[str, Fault] = {
    "refused": Fault(lambda s: None, "error", "", "network", injected=2, refused=True),
    "timeout-before-headers": Fault(
        _then(_stall_before_headers), "error", "", "timeout", injected=1
    ),
    "timeout-mid-stream": Fault(
        _sse(chunk_json("slow "), chunk_json("start"), Pause(5.0)), "error", "slow start", "timeout"
    ),
    "http-500-twice": Fault(_then(_status(500), _status(500)), "error", "", "server", injected=2),
    "http-500-then-ok": Fault(_then(_status(500), OK), "completed", "all good"),
    "http-503-then-ok": Fault(_then(_status(503), OK), "completed", "all good"),
    "http-429-then-ok": Fault(_then(_status(429, "0"), OK), "completed", "all good"),
    "http-429-twice": Fault(
        _then(_status(429, "0"), _status(429, "0")), "error", "", "rate_limited", injected=2
    ),
    "malformed-sse-json": Fault(
        _sse(chunk_json("before "), chunk_json("garbage"), b"data: {not json\n\n"),
        "error",
        "before garbage",
        "protocol",
    ),
    "malformed-sse-shape": Fault(
        _sse(chunk_json("shape "), b"data: [1, 2]\n\n", chunk_json("never")),
        "error",
        "shape ",
        "protocol",
    ),
    "error-object-mid-stream": Fault(
        _sse(chunk_json("until "), {"error": {"message": "overloaded", "type": "server"}}),
        "error",
        "until ",
        "server",
    ),
    "drop-mid-stream": Fault(
        _sse(chunk_json("half "), chunk_json("way"), Drop(), done=False),
        "error",
        "half way",
        "protocol",
    ),
    "eof-without-done": Fault(
        _sse(chunk_json("no "), chunk_json("ending"), done=False), "error", "no ending", "protocol"
    ),
    "drop-before-output-then-ok": Fault(
        _then(_sse(Drop(), done=False), OK), "completed", "all good"
    ),
}


def provider(base_url: str) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        base_url=base_url,
        model="fake-model",
        api_key="sk-reliability",
        connect_timeout=0.5,
        read_timeout=0.5,
        max_retries=1,
        backoff_base=0.01,
        backoff_max=0.02,
        retry_after_cap=0.05,
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    async with await SqliteSessionStore.open(tmp_path / "faults.sqlite3") as store:
        yield store


async def send(chat: ChatSession, text: str) -> tuple[Submitted, ReplyFinished, str]:
    submitted: Submitted | None = None
    finished: ReplyFinished | None = None
    async for update in chat.send(text):
        if isinstance(update, Submitted):
            submitted = update
        elif isinstance(update, ReplyFinished):
            finished = update
    assert submitted is not None and finished is not None
    reply = (
        ""
        if finished.message_event is None
        else message_text(finished.message_event.data["message"])
    )
    return submitted, finished, reply


@pytest.mark.parametrize("name", list(FAULTS))
async def test_endpoint_fault_keeps_message_and_partial_and_session_stays_usable(
    name: str, store: SqliteSessionStore, fake_openai: FakeOpenAIServer
) -> None:
    fault = FAULTS[name]
    header = await store.create_session("chat", created_at=0)
    query = SessionQuery(store)
    service = SessionReferenceService(query)
    url = f"http://127.0.0.1:{closed_port()}" if fault.refused else fake_openai.base_url
    bad = provider(url)
    chat = ChatSession(store, query, service, bad, header)
    fault.script(fake_openai)
    try:
        _, finished, reply = await send(chat, f"question under {name} [b]<x>\x00")
    finally:
        await bad.aclose()

    assert finished.status == fault.status, finished.error
    if fault.status == "error":
        assert finished.error is not None and finished.error.kind == fault.kind
    log = await store.read_events("chat")
    assert [e.seq for e in log] == list(range(len(log)))
    assert log[0].type == USER_MESSAGE
    assert message_text(log[0].data) == f"question under {name} [b]<x>\x00"  # kept, exactly
    assert reply == fault.partial
    replies = [e for e in log if e.type == ASSISTANT_MESSAGE]
    if fault.partial:
        (stored,) = replies
        assert message_text(stored.data["message"]) == fault.partial
        assert stored.data["finish"] == fault.status  # the partial reply is marked
        if fault.status == "error":
            assert stored.data["error"]["kind"] == fault.kind
        chunks = "".join(e.data["chunk"]["text"] for e in log if e.type == ASSISTANT_CHUNK)
        assert chunks == fault.partial  # every streamed delta reached the log
    else:
        assert replies == []
    ends = [e for e in log if e.type == TURN_END]
    assert len(ends) == 1 and ends[0].data["status"] == fault.status

    # The session stays usable: the next send works and sees the whole history.
    good = provider(fake_openai.base_url)
    chat.provider = good
    seen = len(fake_openai.requests)
    fake_openai.sse([chunk_json("recovered", finish="stop")])
    try:
        _, again, text = await send(chat, "and now?")
    finally:
        await good.aclose()
    assert again.status == "completed" and text == "recovered"
    sent = fake_openai.requests[seen].json["messages"]
    assert sent[1]["content"] == f"question under {name} [b]<x>\x00"
    if fault.partial:
        assert {"role": "assistant", "content": fault.partial} in sent
    assert sent[-1] == {"role": "user", "content": "and now?"}
    log = await store.read_events("chat")
    assert [e.seq for e in log] == list(range(len(log)))
    ends = [e for e in log if e.type == TURN_END]
    assert [e.data["status"] for e in ends] == [fault.status, "completed"]

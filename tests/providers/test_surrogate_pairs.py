"""SPEC §4.1 (issue 31) over real HTTP (the local fake server): the model receives a
surrogate pair as its character, not two U+FFFD, whether the pair came from a file an
ASCII-safe writer made (Python's ``json.dumps``), was typed in two halves, or was
streamed by the model in two deltas; the reply is stored with the character."""

from __future__ import annotations

import json
from typing import Any

from core.engine import ChatSession, ReplyFinished
from core.jsoncodec import loads_exact
from core.log import ASSISTANT_MESSAGE, message_text, user_message
from core.references import SessionReferenceService
from stores import MemorySessionStore, SessionQuery
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json
from tests.providers.test_openai import make_provider


async def test_the_model_receives_the_character(fake_openai: FakeOpenAIServer) -> None:
    # The reply's two halves arrive in two deltas, each escaped alone (as a JS server may
    # split a string): the stored reply holds the character.
    fake_openai.sse([chunk_json("lift \ud83d"), chunk_json("\ude80 off", finish="stop")])
    store = MemorySessionStore()
    query = SessionQuery(store)
    header = await store.create_session("s")
    imported = loads_exact(json.dumps(user_message("earlier 🚀, lone \ud800")), unique_keys=True)
    await store.append("s", "user/message", imported, surface_op="append")
    provider = make_provider(fake_openai)
    chat = ChatSession(store, query, SessionReferenceService(query), provider, header)
    updates: list[Any] = [u async for u in chat.send("next \ud83d" + "\ude80 go")]
    await provider.aclose()
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "completed", finished
    [request] = fake_openai.requests
    body = request.body.decode("utf-8")  # strict: valid UTF-8
    contents = [m["content"] for m in request.json["messages"] if m["role"] == "user"]
    assert contents[-2:] == ["earlier 🚀, lone \ufffd", "next 🚀 go"]
    assert (
        "\\ud83d" not in body and "\ufffd\ufffd" not in json.loads(body)["messages"][-1]["content"]
    )
    events = await store.read_events("s")
    reply = next(e for e in events if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "lift 🚀 off"
    sent = [e for e in events if e.type == "user/message"][-1]
    assert message_text(sent.data) == "next 🚀 go"

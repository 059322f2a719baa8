"""A reply that could not be stored: the user's message stays, a retry answers it once, and
turn numbers never repeat (a failed turn's orphaned chunks keep theirs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.engine import (
    ChatSession,
    NothingToAnswerError,
    ReplyFinished,
    Submitted,
    unanswered_message,
)
from core.errors import DiskFullError
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    TURN_END,
    USER_MESSAGE,
    message_text,
    user_message,
)
from core.providers.base import Finish, TextDelta
from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.core.test_engine import WORDS, ScriptedProvider, make
from tests.fulldisk import cap_pages

BIG_REPLY = [TextDelta("x" * 2048) for _ in range(600)] + [Finish("stop")]
"""1.2 MB in 600 deltas: the chunk batches need new pages, whatever is free."""


async def sqlite_chat(tmp_path: Path, provider: Any) -> tuple[ChatSession, SqliteSessionStore]:
    store = await SqliteSessionStore.open(tmp_path / "dsh.sqlite3")
    header = await store.create_session("target")
    query = SessionQuery(store)
    return ChatSession(store, query, SessionReferenceService(query), provider, header), store


def turns(events: list[Any], type_: str) -> set[int]:
    return {e.data["turn"] for e in events if e.type == type_}


async def test_a_full_disk_mid_reply_keeps_the_message_and_a_retry_answers_it_once(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(BIG_REPLY)
    chat, store = await sqlite_chat(tmp_path, provider)
    async with store:
        seen: list[Any] = []
        with pytest.raises(DiskFullError, match="the disk is full"):
            async for update in chat.send("please answer"):
                seen.append(update)
                if isinstance(update, Submitted):
                    await cap_pages(store)  # the disk fills once the message is stored
        assert isinstance(seen[0], Submitted)
        assert not any(isinstance(u, ReplyFinished) for u in seen)
        events = await store.read_events("target")
        assert [e.type for e in events if e.type != ASSISTANT_CHUNK] == [USER_MESSAGE]
        assert unanswered_message((await chat.query.read_surface("target")).events) is not None

        await cap_pages(store, 1_000_000)  # space is back
        provider.deltas = list(WORDS)
        updates = [u async for u in chat.reply_to_last()]
        finished = next(u for u in updates if isinstance(u, ReplyFinished))
        assert finished.status == "completed" and finished.message_event is not None
        events = await store.read_events("target")
        users = [e for e in events if e.type == USER_MESSAGE]
        assert [message_text(e.data) for e in users] == ["please answer"]  # never appended again
        replies = [e for e in events if e.type == ASSISTANT_MESSAGE]
        assert [message_text(e.data["message"]) for e in replies] == ["Hello there"]
        # The model was asked the same conversation both times.
        assert provider.calls[0] == provider.calls[1]
        with pytest.raises(NothingToAnswerError, match="already has a reply"):
            async for _ in chat.reply_to_last():
                pass


async def test_a_retry_after_orphaned_chunks_takes_the_next_turn_number() -> None:
    chat, store = await make(ScriptedProvider(WORDS))
    await store.append("target", USER_MESSAGE, user_message("q"), surface_op="append")
    # What a reply that failed while storing leaves: chunks, no message, no turn end.
    for i in range(3):
        chunk = {"type": "text-delta", "index": i, "text": "part"}
        await store.append("target", ASSISTANT_CHUNK, {"turn": 1, "step": 0, "chunk": chunk})
    [_ async for _ in chat.reply()]
    events = await store.read_events("target")
    assert turns(events, ASSISTANT_MESSAGE) == {2}
    assert turns(events, TURN_END) == {2}
    assert [e.data["turn"] for e in events if e.type == ASSISTANT_CHUNK] == [1, 1, 1, 2, 2]


async def test_turn_numbers_stay_unique_across_a_compaction_after_a_failed_turn() -> None:
    chat, store = await make(ScriptedProvider(WORDS))
    [_ async for _ in chat.send("first")]  # turn 1
    await store.append("target", USER_MESSAGE, user_message("second"), surface_op="append")
    chunk = {"type": "text-delta", "index": 0, "text": "lost"}
    await store.append("target", ASSISTANT_CHUNK, {"turn": 2, "step": 0, "chunk": chunk})
    result = await chat.compact()
    assert result.checkpoint.data["source"]["throughTurn"] == 2
    [_ async for _ in chat.send("third")]
    events = await store.read_events("target")
    assert turns(events, ASSISTANT_MESSAGE) == {1, 3}


async def test_reply_to_last_needs_an_unanswered_user_message() -> None:
    chat, store = await make(ScriptedProvider(WORDS))
    with pytest.raises(NothingToAnswerError, match="no messages"):
        [_ async for _ in chat.reply_to_last()]
    [_ async for _ in chat.send("hi")]
    with pytest.raises(NothingToAnswerError, match="already has a reply"):
        [_ async for _ in chat.reply_to_last()]
    before = await store.read_events("target")
    await chat.compact()
    with pytest.raises(NothingToAnswerError):  # a summary checkpoint is not a question
        [_ async for _ in chat.reply_to_last()]
    assert len(await store.read_events("target")) > len(before)

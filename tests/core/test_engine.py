"""The chat engine: one batch per send, buffered streaming, nothing lost on failure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import pytest

from core.engine import (
    ChatSession,
    CompactionError,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    Submitted,
    TitleChanged,
    fallback_title,
    provider_messages,
)
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACT_END,
    COMPACT_START,
    COMPACT_SUMMARY,
    SESSION_TITLE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
    NewEvent,
    Replace,
    assistant_message,
    is_compact_checkpoint_source,
    message_text,
    user_message,
)
from core.providers.base import (
    Finish,
    ProviderError,
    ProviderMessage,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from core.providers.offline import OfflineProvider
from core.references import (
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    format_session_reference_mention,
)
from core.secrets import Secret
from stores import MemorySessionStore, SessionQuery


class ScriptedProvider:
    """A provider that streams a fixed script, optionally failing or hanging midway."""

    name = "scripted"
    model = "script-1"

    def __init__(
        self,
        deltas: Sequence[StreamEvent],
        *,
        fail_after: int | None = None,
        hang_after: int | None = None,
        summary: str | Exception = "the summary",
    ) -> None:
        self.deltas = list(deltas)
        self.fail_after = fail_after
        self.hang_after = hang_after
        self.summary = summary
        self.calls: list[list[ProviderMessage]] = []
        self.hanging = asyncio.Event()

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.calls.append(list(messages))
        for i, delta in enumerate(self.deltas):
            if self.fail_after is not None and i == self.fail_after:
                raise ProviderError("connection dropped mid-stream", "protocol")
            if self.hang_after is not None and i == self.hang_after:
                self.hanging.set()
                waiter = asyncio.Event() if cancel is None else cancel
                await waiter.wait()
                return
            await asyncio.sleep(0)
            yield delta

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        if isinstance(self.summary, Exception):
            raise self.summary
        return self.summary

    async def aclose(self) -> None:
        return None


class CountingStore(MemorySessionStore):
    """The real memory store, counting write transactions."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> Any:
        self.batches += 1
        return await super().append_batch(session_id, events)


async def make(
    provider: Any,
    store: MemorySessionStore | None = None,
    session_id: str = "target",
    cwd: str | None = "/w",
) -> tuple[ChatSession, MemorySessionStore]:
    store = store or MemorySessionStore()
    header = await store.create_session(session_id, cwd=cwd)
    query = SessionQuery(store)
    return ChatSession(store, query, SessionReferenceService(query), provider, header), store


async def collect(chat: ChatSession, draft: str, **kwargs: Any) -> list[Any]:
    return [u async for u in chat.send(draft, **kwargs)]


WORDS = [TextDelta("Hello"), TextDelta(" there"), Usage({"total_tokens": 3}), Finish("stop")]


async def test_plain_send_stores_message_reply_and_title() -> None:
    chat, store = await make(ScriptedProvider([ReasoningDelta("think"), *WORDS]))
    updates = await collect(chat, "  What is up?\nsecond line")
    assert isinstance(updates[0], Submitted) and len(updates[0].events) == 1
    assert [u.text for u in updates if isinstance(u, ReplyDelta)] == ["think", "Hello", " there"]
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "completed" and finished.first_delta_seconds is not None
    assert isinstance(updates[-1], TitleChanged) and updates[-1].title == "What is up?"
    events = await store.read_events("target")
    types = [e.type for e in events]
    assert types == [
        USER_MESSAGE,
        ASSISTANT_CHUNK,
        ASSISTANT_CHUNK,
        ASSISTANT_CHUNK,
        ASSISTANT_MESSAGE,
        TURN_END,
        SESSION_TITLE,
    ]
    reply = events[4].data
    assert (
        reply["turn"] == 1
        and reply["finish"] == "completed"
        and reply["usage"] == {"total_tokens": 3}
    )
    assert message_text(reply["message"]) == "Hello there"
    assert reply["message"]["content"][0] == {"type": "reasoning", "text": "think"}
    assert reply["message"]["source"] == {
        "kind": "model",
        "provider": "scripted",
        "model": "script-1",
    }
    assert [e.data["chunk"]["index"] for e in events[1:4]] == [0, 1, 2]
    assert events[1].data["chunk"]["type"] == "reasoning-delta"
    assert events[-1].data == {"title": "What is up?", "source": {"kind": "fallback"}}
    # a second exchange does not retitle, and its turn number follows
    await collect(chat, "again")
    events = await store.read_events("target")
    assert sum(e.type == SESSION_TITLE for e in events) == 1
    assert [e.data["turn"] for e in events if e.type == ASSISTANT_MESSAGE] == [1, 2]


async def test_send_with_mention_stores_snapshot_then_message_in_one_batch() -> None:
    provider = ScriptedProvider(WORDS)
    store = CountingStore()
    source = await store.create_session("source", cwd="/w")
    await store.append("source", USER_MESSAGE, user_message("source question"), surface_op="append")
    chat, _ = await make(provider, store)
    mention = format_session_reference_mention(SessionReferenceInput(source.id, "Src"))
    before = store.batches
    await collect(chat, f"compare with {mention} please")
    events = await store.read_events("target")
    assert events[0].data["source"]["kind"] == "session-reference"
    assert events[1].data["source"] == {"kind": "user"}
    assert message_text(events[1].data) == "compare with @Src please"
    # the user's batch is one transaction; the reply is at least one more
    assert store.batches - before >= 2
    sent = provider.calls[0]
    assert [m.role for m in sent] == ["system", "user", "user"]
    assert sent[1].text.startswith("## Referenced sessions") and "source question" in sent[1].text
    assert sent[2].text == "compare with @Src please"


async def test_failed_preparation_appends_nothing() -> None:
    chat, store = await make(ScriptedProvider(WORDS))
    self_mention = format_session_reference_mention(SessionReferenceInput("target"))
    with pytest.raises(SessionReferenceError) as info:
        await collect(chat, f"me {self_mention}")
    assert info.value.code == "SESSION_REFERENCE_SELF_REFERENCE"
    missing = format_session_reference_mention(SessionReferenceInput("ghost"))
    with pytest.raises(SessionReferenceError) as info:
        await collect(chat, f"who {missing}")
    assert info.value.code == "SESSION_REFERENCE_READ_FAILED"
    assert await store.read_events("target") == []


async def test_provider_failure_keeps_message_and_partial_reply() -> None:
    chat, store = await make(ScriptedProvider(WORDS, fail_after=2))
    updates = await collect(chat, "tell me")
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "error" and finished.error is not None
    events = await store.read_events("target")
    assert message_text(events[0].data) == "tell me"
    reply = next(e for e in events if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "Hello there"
    assert reply.data["finish"] == "error"
    assert reply.data["error"]["kind"] == "protocol"
    end = next(e for e in events if e.type == TURN_END)
    assert end.data["status"] == "error"
    assert not any(e.type == SESSION_TITLE for e in events)


async def test_provider_failure_before_output_records_error_only() -> None:
    chat, store = await make(ScriptedProvider(WORDS, fail_after=0))
    await collect(chat, "tell me")
    events = await store.read_events("target")
    assert [e.type for e in events] == [USER_MESSAGE, TURN_END]
    assert events[1].data["error"]["message"] == "connection dropped mid-stream"
    # the session stays usable
    chat.provider = ScriptedProvider(WORDS)
    await collect(chat, "again")
    assert (await store.read_events("target"))[-3].type == ASSISTANT_MESSAGE


async def test_interrupt_keeps_what_was_received() -> None:
    provider = ScriptedProvider(WORDS, hang_after=2)
    chat, store = await make(provider)
    interrupt = asyncio.Event()
    updates: list[Any] = []

    async def run() -> None:
        async for update in chat.send("long answer please", interrupt=interrupt):
            updates.append(update)

    task = asyncio.create_task(run())
    await provider.hanging.wait()
    interrupt.set()
    await asyncio.wait_for(task, 5)
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "interrupted"
    reply = next(e for e in await store.read_events("target") if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "Hello there"
    assert reply.data["interrupted"] is True and reply.data["finish"] == "interrupted"


async def test_cancelling_the_task_still_stores_the_partial_reply() -> None:
    provider = ScriptedProvider(WORDS, hang_after=1)
    chat, store = await make(provider)
    task = asyncio.create_task(collect(chat, "go"))
    await provider.hanging.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = await store.read_events("target")
    reply = next(e for e in events if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "Hello" and reply.data["finish"] == "interrupted"
    assert events[-1].type == TURN_END and events[-1].data["status"] == "interrupted"
    assert not chat.busy


async def test_a_reader_that_stops_reading_still_leaves_the_partial_reply_stored() -> None:
    """Closing the update stream mid-reply (a failed write of a delta, a ``break``) keeps
    what arrived, marked interrupted, and frees the session."""
    provider = ScriptedProvider([TextDelta("Hello"), TextDelta(" there"), TextDelta(" more")])
    chat, store = await make(provider)
    seen: list[str] = []
    async with aclosing(chat.send("go")) as updates:
        async for update in updates:
            if isinstance(update, ReplyDelta):
                seen.append(update.text)
                if len(seen) == 2:
                    break
    events = await store.read_events("target")
    reply = next(e for e in events if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "Hello there"
    assert reply.data["finish"] == "interrupted" and reply.data["interrupted"] is True
    assert events[-1].type == TURN_END and events[-1].data["status"] == "interrupted"
    assert not chat.busy


async def test_chunks_are_written_in_batches_not_per_token() -> None:
    store = CountingStore()
    deltas: list[StreamEvent] = [TextDelta(f"w{i} ") for i in range(2000)]
    chat, _ = await make(ScriptedProvider(deltas), store)
    await collect(chat, "many tokens")
    events = await store.read_events("target")
    assert sum(e.type == ASSISTANT_CHUNK for e in events) == 2000
    assert store.batches < 40
    text = message_text(next(e for e in events if e.type == ASSISTANT_MESSAGE).data["message"])
    assert text == "".join(f"w{i} " for i in range(2000))


async def test_offline_provider_reports_what_it_received() -> None:
    store = MemorySessionStore()
    await store.create_session("a", cwd="/w")
    for i in range(3):
        await store.append("a", USER_MESSAGE, user_message(f"q{i}"), surface_op="append")
    chat, _ = await make(OfflineProvider(), store)
    mention = format_session_reference_mention(SessionReferenceInput("a", "Alpha"))
    updates = await collect(chat, f"what about {mention}?")
    text = "".join(u.text for u in updates if isinstance(u, ReplyDelta))
    assert "Request: what about @Alpha?" in text
    assert "- Alpha: 3 messages received" in text


async def test_compaction_and_referencing_the_compacted_session() -> None:
    provider = ScriptedProvider(WORDS, summary="They discussed X.")
    src_chat, store = await make(provider, session_id="src")
    await collect(src_chat, "first question")
    await collect(src_chat, "second question")
    before = await SessionQuery(store).read_surface("src")
    result = await src_chat.compact()
    events = await store.read_events("src")
    tail = events[-4:]
    assert [e.type for e in tail] == [COMPACT_START, COMPACT_SUMMARY, USER_MESSAGE, COMPACT_END]
    checkpoint = tail[2]
    assert is_compact_checkpoint_source(checkpoint.data["source"])
    assert checkpoint.surface_op == Replace(before.events[0].seq, before.events[-1].seq)
    assert set(checkpoint.source_event_seqs or ()) == {e.seq for e in before.events}
    assert (
        message_text(checkpoint.data)
        == "<compacted-summary>\nThey discussed X.\n</compacted-summary>"
    )
    assert result.checkpoint.seq == checkpoint.seq
    after = await SessionQuery(store).read_surface("src")
    assert [e.seq for e in after.events] == [checkpoint.seq]
    # the turn counter continues after compaction
    await collect(src_chat, "third question")
    assert (await store.read_events("src"))[-3].data["turn"] == 3
    # a reference to the compacted session carries the checkpoint and later messages only
    target_provider = ScriptedProvider(WORDS)
    target, _ = await make(target_provider, store, session_id="tgt")
    mention = format_session_reference_mention(SessionReferenceInput("src", "S"))
    await collect(target, f"see {mention}")
    snapshot_text = target_provider.calls[0][1].text
    assert "They discussed X." in snapshot_text and "third question" in snapshot_text
    assert "first question" not in snapshot_text and "second question" not in snapshot_text
    card_source = (await store.read_events("tgt"))[0].data["source"]["references"][0]
    assert card_source["compacted"] is True


async def test_failed_summary_leaves_the_surface_alone() -> None:
    provider = ScriptedProvider(WORDS, summary=ProviderError("model down", "server"))
    chat, store = await make(provider)
    await collect(chat, "hello")
    before = await SessionQuery(store).read_surface("target")
    count = len(await store.read_events("target"))
    with pytest.raises(CompactionError, match="model down"):
        await chat.compact()
    events = await store.read_events("target")
    assert [e.type for e in events[count:]] == [COMPACT_START, COMPACT_END]
    assert events[-1].data["status"] == "error" and "model down" in events[-1].data["error"]
    assert (await SessionQuery(store).read_surface("target")).events == before.events


async def test_nothing_to_compact() -> None:
    chat, _ = await make(ScriptedProvider(WORDS))
    with pytest.raises(CompactionError, match="nothing to compact"):
        await chat.compact()


async def test_rename_appends_a_user_title() -> None:
    chat, store = await make(ScriptedProvider(WORDS))
    changed = await chat.rename("  My   plan ")
    assert changed.title == "My plan"
    assert (await store.read_events("target"))[-1].data == {
        "title": "My plan",
        "source": {"kind": "user"},
    }
    with pytest.raises(ValueError):
        await chat.rename("   ")
    await collect(chat, "hello")
    assert (await chat.title()) is not None and (await chat.title()).title == "My plan"  # type: ignore[union-attr]


async def test_imported_kinds_are_replayed_to_the_model_correctly() -> None:
    store = MemorySessionStore()
    await store.create_session("imp")
    await store.append_batch(
        "imp",
        [
            NewEvent(USER_MESSAGE, user_message("direct"), "append"),
            NewEvent(STEERING_MESSAGE, {"turn": 1, "message": user_message("steer")}, "append"),
            NewEvent(
                TOOL_RESULT,
                {
                    "turn": 1,
                    "step": 1,
                    "message": {
                        "id": "t",
                        "role": "user",
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": "c",
                                "content": [],
                                "isError": False,
                            }
                        ],
                        "source": {"kind": "tool", "callId": "c"},
                    },
                },
                "append",
            ),
            NewEvent(
                ASSISTANT_MESSAGE,
                {
                    "turn": 1,
                    "step": 2,
                    "message": assistant_message(
                        [
                            {"type": "tool-call", "id": "c", "name": "x", "arguments": "{}"},
                            {"type": "text", "text": "answer"},
                        ],
                        provider="p",
                        model="m",
                    ),
                },
                "append",
            ),
            NewEvent("custom/thing", {"anything": [1, 2]}),
        ],
    )
    surface = (await SessionQuery(store).read_surface("imp")).events
    sent = provider_messages(surface)
    assert [(m.role, m.text) for m in sent[1:]] == [
        ("user", "direct"),
        ("user", "steer"),
        ("assistant", "answer"),
    ]


def test_fallback_title() -> None:
    assert fallback_title("\n\n  hello   world \nmore") == "hello world"
    assert fallback_title("   \n ") is None
    long = fallback_title("x" * 100)
    assert long is not None and len(long) == 60 and long.endswith("…")


async def test_later_changes_to_the_source_never_change_the_target_replay() -> None:
    from core.cards import parse_reference_card

    provider = ScriptedProvider(WORDS, summary="sum")
    src, store = await make(provider, session_id="src")
    await collect(src, "original source text")
    target, _ = await make(ScriptedProvider(WORDS), store, session_id="tgt")
    mention = format_session_reference_mention(SessionReferenceInput("src", "S"))
    await collect(target, f"look at {mention}")
    before = await store.read_events("tgt")
    card_before = parse_reference_card(before[0].data)
    assert card_before is not None
    assert ("user", "original source text") in card_before.sources[0].conversation

    await collect(src, "a later message")  # change
    await src.compact()  # compact
    await store.delete_session("src")  # delete
    after = await store.read_events("tgt")
    assert after == before
    assert parse_reference_card(after[0].data) == card_before


class CrashingProvider(ScriptedProvider):
    """Streams its script, then raises an exception that is not a ``ProviderError``."""

    def __init__(self, deltas: Sequence[StreamEvent], error: Exception) -> None:
        super().__init__(deltas, summary=error)
        self.error = error

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        for delta in self.deltas:
            await asyncio.sleep(0)
            yield delta
        raise self.error


async def test_any_provider_exception_ends_the_reply_as_a_redacted_provider_error() -> None:
    key = Secret("sk-engine-safety-net-55")
    crash = UnicodeEncodeError("utf-8", "caf\udce9", 3, 4, f"Bearer {key.reveal()}\r\nx")
    chat, store = await make(CrashingProvider([TextDelta("partial")], crash))
    updates = await collect(chat, "go")
    finished = next(u for u in updates if isinstance(u, ReplyFinished))
    assert finished.status == "error" and finished.error is not None
    message = str(finished.error)
    assert message.startswith("the model client failed: UnicodeEncodeError")
    assert "\n" not in message and "\r" not in message and key.reveal() not in message
    events = await store.read_events("target")
    reply = next(e for e in events if e.type == ASSISTANT_MESSAGE)
    assert message_text(reply.data["message"]) == "partial"
    assert events[-1].type == TURN_END and events[-1].data["error"]["message"] == message
    assert key.reveal() not in repr(events)


async def test_any_summary_exception_is_a_compaction_error() -> None:
    chat, store = await make(
        CrashingProvider([], RecursionError("maximum recursion depth exceeded"))
    )
    await store.append("target", USER_MESSAGE, user_message("hello"), surface_op="append")
    with pytest.raises(CompactionError, match="RecursionError"):
        await chat.compact()
    events = await store.read_events("target")
    assert events[-1].type == COMPACT_END and events[-1].data["status"] == "error"


def test_reply_waiting_reads_as_seconds() -> None:
    assert [ReplyWaiting(s, "r").seconds_text for s in (0.2, 0.5, 1.5, 9.99, 30.0, 91)] == [
        "0.2 s",
        "0.5 s",
        "1.5 s",
        "10 s",
        "30 s",
        "91 s",
    ]

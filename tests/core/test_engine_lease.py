"""One reply at a time per session: a second ``ChatSession`` on the same store (another
window, another process) is refused before it stores anything, and turns stay unique."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from core.engine import ChatSession
from core.errors import SessionBusyError
from core.log import SessionHeader
from core.providers.base import Finish, ProviderMessage, TextDelta
from core.references import SessionReferenceService
from stores import MemorySessionStore, SessionQuery
from tests.core.test_engine import ScriptedProvider

pytestmark = pytest.mark.timeout(30)


def _chat(
    store: MemorySessionStore, header: SessionHeader, provider: ScriptedProvider
) -> ChatSession:
    query = SessionQuery(store)
    return ChatSession(store, query, SessionReferenceService(query), provider, header)


async def test_a_second_writer_is_refused_while_a_reply_streams() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    slow = ScriptedProvider([TextDelta("one"), TextDelta(" two"), Finish("stop")], hang_after=1)
    first = _chat(store, header, slow)
    second = _chat(store, header, ScriptedProvider([TextDelta("other"), Finish("stop")]))

    updates = first.send("first question", interrupt=None)
    submitted = await anext(updates)
    assert submitted.events[0].data["content"][0]["text"] == "first question"
    assert (await anext(updates)).text == "one"  # streaming, and hanging after this delta

    before = await store.read_events("s")
    with pytest.raises(SessionBusyError) as caught:
        async for _ in second.send("second question"):
            pass
    assert (
        str(caught.value)
        == "the session is busy: another process is writing a reply or compacting it"
    )
    held = await store.read_reply_lease("s")  # the error names who held it (its words may
    assert held is not None and caught.value.holder == held.holder  # then say `dsh unlock`)
    with pytest.raises(SessionBusyError):
        async for _ in second.reply():
            pass
    assert await store.read_events("s") == before  # nothing stored by the refused writer

    await updates.aclose()  # the first reply ends (stored as interrupted), the lease goes
    async for _ in second.send("second question"):
        pass
    events = await store.read_events("s")
    turns = [e.data["turn"] for e in events if e.type == "turn/end"]
    assert turns == [1, 2]
    for turn in turns:  # each turn's fragments come from one reply, in order
        chunks = [
            e.data["chunk"]["index"]
            for e in events
            if e.type == "assistant/chunk" and e.data["turn"] == turn
        ]
        assert chunks == list(range(len(chunks)))


async def test_the_lease_is_reentrant_and_given_back() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    chat = _chat(store, header, ScriptedProvider([TextDelta("hi"), Finish("stop")]))
    other = _chat(store, header, ScriptedProvider([TextDelta("hi"), Finish("stop")]))
    async with chat.reply_lease():
        async for _ in chat.send("inside the host's lease"):  # re-entrant: not refused
            pass
        with pytest.raises(SessionBusyError):
            async with other.reply_lease():
                pass
    async for _ in other.send("after it"):  # given back
        pass
    texts = [
        e.data["content"][0]["text"]
        for e in await store.read_events("s")
        if e.type == "user/message"
    ]
    assert texts == ["inside the host's lease", "after it"]


async def test_a_reply_that_failed_before_any_text_keeps_its_turn_number() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    failing = _chat(store, header, ScriptedProvider([TextDelta("x")], fail_after=0))
    async for _ in failing.send("first"):
        pass
    async for _ in failing.reply():  # a retry fails the same way
        pass
    working = _chat(store, header, ScriptedProvider([TextDelta("ok"), Finish("stop")]))
    async for _ in working.reply():
        pass
    ends = [
        (e.data["turn"], e.data["status"])
        for e in await store.read_events("s")
        if e.type == "turn/end"
    ]
    assert ends == [(1, "error"), (2, "error"), (3, "completed")]


async def test_a_failed_turn_keeps_its_number_when_a_new_message_follows() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    failing = _chat(store, header, ScriptedProvider([TextDelta("x")], fail_after=0))
    async for _ in failing.send("first"):  # fails before any text: no message, a turn/end
        pass
    working = _chat(store, header, ScriptedProvider([TextDelta("ok"), Finish("stop")]))
    async for _ in working.send("second"):  # a new message after the failed turn
        pass
    async for _ in working.send("third"):
        pass
    ends = [e.data["turn"] for e in await store.read_events("s") if e.type == "turn/end"]
    assert ends == [1, 2, 3]


def test_lease_owners_name_their_process_and_a_killed_one_is_dead() -> None:
    import os
    import socket
    import subprocess
    import sys

    from core.engine import lease_owner, lease_owner_is_dead

    mine = lease_owner()
    host, namespace, pid, nonce = mine.rsplit(":", 3)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid()) and nonce
    assert lease_owner() != mine  # unique per reply
    assert not lease_owner_is_dead(mine)  # this process is alive
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # gone and reaped
    assert lease_owner_is_dead(f"{host}:{namespace}:{child.pid}:x")  # same host and namespace
    assert not lease_owner_is_dead(f"another-host-{host}:{namespace}:{child.pid}:x")  # alive
    for odd in ("", "x", f"{host}:{namespace}:²:x", f"{host}:{namespace}:-1:x", "a:b"):
        assert not lease_owner_is_dead(odd)


class _SlowSummary(ScriptedProvider):
    """Summarises only once ``release`` is set (``asked`` says it has started)."""

    def __init__(self) -> None:
        super().__init__([TextDelta("answer"), Finish("stop")])
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def summarize(self, messages: Sequence[ProviderMessage]) -> str:
        self.asked.set()
        await self.release.wait()
        return "the slow summary"


async def test_a_compaction_holds_the_lease_against_replies_and_other_compactions() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    slow = _SlowSummary()
    compacting = _chat(store, header, slow)
    other = _chat(store, header, ScriptedProvider([TextDelta("hi"), Finish("stop")]))
    async for _ in other.send("a question"):
        pass
    before = await store.read_events("s")

    task = asyncio.create_task(compacting.compact())
    await asyncio.wait_for(slow.asked.wait(), 5)
    with pytest.raises(SessionBusyError):
        async for _ in other.send("sent during the compaction"):
            pass
    with pytest.raises(SessionBusyError):
        await other.compact()
    assert await store.read_events("s") == before  # nothing stored by the refused writers

    slow.release.set()
    result = await asyncio.wait_for(task, 5)
    assert result.summary == "the slow summary"
    async for _ in other.send("after it"):  # the lease was given back
        pass


async def test_a_compaction_is_refused_while_a_reply_streams() -> None:
    store = MemorySessionStore()
    header = await store.create_session("s")
    hanging = ScriptedProvider([TextDelta("one"), TextDelta(" two"), Finish("stop")], hang_after=1)
    replying = _chat(store, header, hanging)
    other = _chat(store, header, ScriptedProvider([], summary="never used"))
    updates = replying.send("first question")
    await anext(updates)
    await anext(updates)  # streaming, hanging after the first delta
    before = await store.read_events("s")
    with pytest.raises(SessionBusyError):
        await other.compact()
    assert await store.read_events("s") == before
    await updates.aclose()
    await other.compact()  # once the reply is over

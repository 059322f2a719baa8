"""SPEC §4.6: what of a source session's surface a snapshot may contain."""

from __future__ import annotations

from core.log import Replace, reasoning_block, text_block, tool_call_block
from core.references import ProjectedMessage, project_surface
from stores import MemorySessionStore, SessionQuery
from tests.references.helpers import Log

P = ProjectedMessage


async def project(store: MemorySessionStore, session_id: str = "src") -> list[ProjectedMessage]:
    snapshot = await SessionQuery(store).read_surface(session_id)
    return project_surface(snapshot.events)


async def make() -> tuple[MemorySessionStore, Log]:
    store = MemorySessionStore()
    await store.create_session("src", cwd="/w", created_at=1)
    return store, Log(store, "src")


async def test_inclusion_and_exclusion_rules() -> None:
    store, log = await make()
    await log.user("hello")
    await log.user([reasoning_block("secret thoughts"), text_block("a"), text_block("b")])
    await log.user("plugin context", source={"kind": "plugin", "plugin": "memory"})
    await log.user("old snapshot", source={"kind": "session-reference", "version": 1})
    await log.user("from a model?", source={"kind": "model", "provider": "p", "model": "m"})
    await log.user("no source kind", source={})
    await log.steering("steer me")
    await log.steering("plugin steer", source={"kind": "plugin", "plugin": "x"})
    await log.assistant(
        [
            reasoning_block("hmm"),
            text_block("answer"),
            tool_call_block("c1", "ls", "{}"),
            {"type": "future-block", "text": "unknown blocks are ignored"},
            text_block("more"),
        ]
    )
    await log.assistant([tool_call_block("c2", "ls", "{}")])  # no text: skipped
    await log.tool_result("tool output")
    await log.chunk("streamed delta")
    await log.title("A title")
    await log.raw("turn/start", {"turn": 1})
    await log.raw("compact/summary", {"text": "log-only summary"})
    await log.user("")  # empty text: skipped
    await log.user([text_block(""), text_block("")])  # "\n" is not empty: kept
    await log.assistant("bye")
    assert await project(store) == [
        P("user", "hello"),
        P("user", "a\nb"),
        P("user", "steer me"),
        P("assistant", "answer\nmore"),
        P("user", "\n"),
        P("assistant", "bye"),
    ]


async def test_checkpoint_is_kept_and_flagged() -> None:
    store, log = await make()
    a = await log.user("first question")
    b = await log.assistant("first answer")
    await log.checkpoint(
        "summary of the first exchange", replace=Replace(a.seq, b.seq), seqs=[a.seq, b.seq]
    )
    await log.user("next question")
    # the marker is recognised by kind and plugin only
    await log.user("another summary", source={"kind": "plugin", "plugin": "compact", "extra": 1})
    await log.user("not a checkpoint", source={"kind": "plugin", "plugin": "compactor"})
    assert await project(store) == [
        P("user", "summary of the first exchange", checkpoint=True),
        P("user", "next question"),
        P("user", "another summary", checkpoint=True),
    ]


async def test_shadowed_events_never_appear_and_surface_order_is_kept() -> None:
    store, log = await make()
    s0 = await log.user("zero")
    s1 = await log.assistant("one")
    await log.user("two")
    await log.assistant(
        "three (replaces zero and one)", replace=Replace(s0.seq, s1.seq), seqs=[0, 1]
    )
    assert await project(store) == [
        P("assistant", "three (replaces zero and one)"),
        P("user", "two"),
    ]


async def test_empty_session_projects_nothing() -> None:
    store, log = await make()
    await log.title("only a title")
    assert await project(store) == []


async def test_malformed_data_is_skipped_not_fatal() -> None:
    store, log = await make()
    await store.append(
        "src", "assistant/message", {"turn": 0, "message": "not an object"}, surface_op="append"
    )
    await store.append("src", "steering/message", {"turn": 0}, surface_op="append")
    await store.append(
        "src",
        "user/message",
        {"content": "not a list", "source": {"kind": "user"}},
        surface_op="append",
    )
    await log.user("fine")
    assert await project(store) == [P("user", "fine")]

"""SPEC §4.6: what of a source session's surface a snapshot may contain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.jsoncodec import freeze_json
from core.log import (
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    Replace,
    is_compact_checkpoint_source,
    message_text,
    reasoning_block,
    text_block,
    tool_call_block,
)
from core.references import ProjectedMessage, project_surface
from stores import SessionQuery, SessionStore
from tests.references.helpers import Log

P = ProjectedMessage


async def project(store: SessionStore, session_id: str = "src") -> list[ProjectedMessage]:
    snapshot = await SessionQuery(store).read_surface(session_id)
    return project_surface(snapshot.events)


async def make(store: SessionStore) -> tuple[SessionStore, Log]:
    await store.create_session("src", cwd="/w", created_at=1)
    return store, Log(store, "src")


async def test_inclusion_and_exclusion_rules(store: SessionStore) -> None:
    store, log = await make(store)
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


async def test_checkpoint_is_kept_and_flagged(store: SessionStore) -> None:
    store, log = await make(store)
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


async def test_shadowed_events_never_appear_and_surface_order_is_kept(store: SessionStore) -> None:
    store, log = await make(store)
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


async def test_empty_session_projects_nothing(store: SessionStore) -> None:
    store, log = await make(store)
    await log.title("only a title")
    assert await project(store) == []


async def test_malformed_data_is_skipped_not_fatal(store: SessionStore) -> None:
    store, log = await make(store)
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


# --------------------------------------------------------------------------- any shape


class Text(str):
    """A str subclass: not something a store returns, but still a str to §4.6."""


def oracle(events: list[Event]) -> list[ProjectedMessage]:
    """SPEC §4.6 read literally, with ``message_text`` for the text."""
    out: list[ProjectedMessage] = []
    for event in events:
        if event.surface_op is None:
            continue
        data: Any = event.data
        if event.type == USER_MESSAGE:
            message, role = data, "user"
        elif event.type in (STEERING_MESSAGE, ASSISTANT_MESSAGE):
            message = data.get("message") if isinstance(data, Mapping) else None
            role = "assistant" if event.type == ASSISTANT_MESSAGE else "user"
        else:
            continue
        if not isinstance(message, Mapping):
            continue
        source = message.get("source")
        kind = source.get("kind") if isinstance(source, Mapping) else None
        checkpoint = False
        if event.type == USER_MESSAGE and kind != "user":
            checkpoint = is_compact_checkpoint_source(source)
            if not checkpoint:
                continue
        if event.type == STEERING_MESSAGE and kind != "user":
            continue
        text = message_text(message)
        if text:
            out.append(ProjectedMessage(role, text, checkpoint))  # type: ignore[arg-type]
    return out


texts = st.one_of(
    st.sampled_from(["hi", "a\nb", "é😀", "\ud83d", ""]),
    st.builds(Text, st.text(min_size=1, max_size=3)),
)
text_blocks = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
blocks = st.one_of(
    text_blocks,
    text_blocks,
    st.fixed_dictionaries({"type": st.just("text"), "text": st.none() | st.integers()}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "text": texts}),
    st.just("text"),
)
sources = st.sampled_from(
    [
        {"kind": "user"},
        {"kind": "user"},
        COMPACT_CHECKPOINT_SOURCE,
        {"kind": "plugin", "plugin": "compact", "extra": 1},
        {"kind": "plugin", "plugin": "other"},
        {"kind": "model", "provider": "p", "model": "m"},
        "user",
    ]
)
well_formed = st.fixed_dictionaries(
    {"source": sources, "content": st.lists(blocks, min_size=1, max_size=3)}
)
messages = st.one_of(
    well_formed,
    well_formed,
    well_formed,
    st.fixed_dictionaries({}, optional={"source": sources, "content": texts}),
    st.sampled_from([None, "message", ["content"]]),
)
wrapped = st.one_of(
    st.fixed_dictionaries({"turn": st.just(1), "message": messages}),
    st.fixed_dictionaries({"turn": st.just(1), "message": messages}),
    messages,
)
ops = st.sampled_from(["append", "append", None])
events = st.lists(
    st.one_of(
        st.tuples(st.just(USER_MESSAGE), messages, ops),
        st.tuples(st.sampled_from([STEERING_MESSAGE, ASSISTANT_MESSAGE]), wrapped, ops),
        st.tuples(st.sampled_from([STEERING_MESSAGE, ASSISTANT_MESSAGE]), wrapped, ops),
        st.tuples(st.sampled_from([TOOL_RESULT, "assistant/chunk"]), wrapped, ops),
    ),
    min_size=1,
    max_size=12,
)


def to_json(value: Any) -> Any:
    """The value a store would hand back (plain str for the str subclass)."""
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return str(value) if isinstance(value, str) else value


@settings(max_examples=300)
@given(events)
def test_projection_matches_the_contract_on_any_shape(
    raw: list[tuple[str, Any, str | None]],
) -> None:
    plain = [Event(i, kind, 0, data, op) for i, (kind, data, op) in enumerate(raw)]
    frozen = [
        Event(e.seq, e.type, 0, freeze_json(to_json(e.data)), e.surface_op)  # type: ignore[arg-type]
        for e in plain
    ]
    assert project_surface(plain) == oracle(plain)
    assert project_surface(frozen) == oracle(frozen)
    assert all(type(item) is ProjectedMessage for item in project_surface(frozen))

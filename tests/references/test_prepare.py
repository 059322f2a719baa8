"""SPEC §4.5 (with §4.6–4.9 end to end): ``SessionReferenceService.prepare``."""

from __future__ import annotations

import asyncio
import copy
import gc
import time
from typing import Any

import pytest

from core.errors import SessionNotFoundError
from core.log import NewEvent, Replace, SessionHeader, assistant_message, user_message
from core.references import (
    REFERENCED_SESSIONS_WARNING,
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    PreparedReferencedMessage,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    parse_reference_prompt,
    stringify_tag_safe_json,
)
from stores import MemorySessionStore, SessionQuery, SessionStore
from tests.references.helpers import Log, ScriptedQuery, tasks_left_behind

R = SessionReferenceInput


async def seeded(store: SessionStore) -> tuple[SessionStore, SessionHeader]:
    target = await store.create_session("t", cwd="/w", created_at=100)
    for sid in ("a", "b", "c", "d"):
        await store.create_session(sid, cwd=f"/{sid}", created_at=50)
        log = Log(store, sid)
        await log.user(f"question in {sid}")
        await log.assistant(f"answer in {sid}")
    return store, target


def others() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def expect(code: str, coro: Any) -> SessionReferenceError:
    with pytest.raises(SessionReferenceError) as info:
        await coro
    assert info.value.code == code
    return info.value


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("refs", "code"),
    [
        ([R("a"), "a", R("t")], SESSION_REFERENCE_INVALID_REFERENCE),
        ([R("a"), R("t"), "a"], SESSION_REFERENCE_SELF_REFERENCE),
        ([R(1)], SESSION_REFERENCE_INVALID_REFERENCE),  # type: ignore[arg-type]
        ([R("a", 5)], SESSION_REFERENCE_INVALID_REFERENCE),  # type: ignore[arg-type]
        ([{"session_id": "a"}], SESSION_REFERENCE_INVALID_REFERENCE),
        ([None], SESSION_REFERENCE_INVALID_REFERENCE),
        ("a", SESSION_REFERENCE_INVALID_REFERENCE),
        (None, SESSION_REFERENCE_INVALID_REFERENCE),
        ([R("t", "me")], SESSION_REFERENCE_SELF_REFERENCE),
        # step 1 (every item) comes before step 2 (the count)
        ([R("a"), R("b"), R("c"), R("d"), R("t")], SESSION_REFERENCE_SELF_REFERENCE),
        ([R("a"), R("b"), R("c"), R("d"), 7], SESSION_REFERENCE_INVALID_REFERENCE),
        ([R("a"), R("b"), R("c"), R("d")], SESSION_REFERENCE_TOO_MANY),
        # unknown ids are a read failure, not a validation one
        ([R("nope")], SESSION_REFERENCE_READ_FAILED),
    ],
)
async def test_validation_order(store: SessionStore, refs: Any, code: str) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store))
    await expect(code, SessionReferenceService(query).prepare(target, "hi", refs))
    if code != SESSION_REFERENCE_READ_FAILED:
        assert query.calls["read_surface"] == 0


async def test_too_many_counts_distinct_ids_against_the_config(store: SessionStore) -> None:
    store, target = await seeded(store)
    query = SessionQuery(store)
    many_dups = [R("a"), R("a", "x"), R("b"), R("a"), R("c"), R("b")]
    prepared = await SessionReferenceService(query).prepare(target, "hi", many_dups)
    assert prepared.additional_context is not None
    small = SessionReferenceService(query, SessionReferenceConfig(max_references=2))
    await expect(SESSION_REFERENCE_TOO_MANY, small.prepare(target, "hi", [R("a"), R("b"), R("c")]))
    await small.prepare(target, "hi", [R("a"), R("b"), R("a")])


async def test_dedupe_keeps_first_and_its_label(store: SessionStore) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    prepared = await service.prepare(
        target, "hi", [R("b", ""), R("a"), R("b", "later"), R("a", "A"), R("c", "C")]
    )
    assert prepared.additional_context is not None
    refs = prepared.additional_context["source"]["references"]
    assert [(r["sessionId"], r["label"], r["inputIndex"]) for r in refs] == [
        ("b", "", 0),  # an empty label is kept
        ("a", "a", 1),  # None becomes the id
        ("c", "C", 2),
    ]
    sources = parse_reference_prompt(prepared.additional_context["content"][0]["text"])
    assert [(s["sessionId"], s["label"]) for s in sources or []] == [
        ("b", ""),
        ("a", "a"),
        ("c", "C"),
    ]


async def test_no_references_reads_nothing_and_copies_content(store: SessionStore) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store))
    content: list[dict[str, Any]] = [{"type": "text", "text": "hello", "meta": {"x": [1]}}]
    prepared = await SessionReferenceService(query).prepare(target, content, [])
    assert prepared == PreparedReferencedMessage(content, None)
    assert prepared.content is not content
    content[0]["meta"]["x"].append(2)
    assert prepared.content == [{"type": "text", "text": "hello", "meta": {"x": [1]}}]
    assert query.calls == {}


async def test_no_references_returns_the_content_even_when_already_cancelled(
    store: SessionStore,
) -> None:
    # SPEC §4.5 step 3: with nothing to read there is nothing to cancel.
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store))
    cancel = asyncio.Event()
    cancel.set()
    content = [{"type": "text", "text": "hello"}]
    prepared = await SessionReferenceService(query).prepare(target, content, [], cancel=cancel)
    assert prepared == PreparedReferencedMessage(content, None)
    assert query.calls == {}
    # With a reference, the same event still cancels before any read.
    await expect(
        SESSION_REFERENCE_CANCELLED,
        SessionReferenceService(query).prepare(
            target, content, [SessionReferenceInput("a")], cancel=cancel
        ),
    )
    assert query.calls == {}


async def test_content_is_deep_copied_with_references_too(store: SessionStore) -> None:
    store, target = await seeded(store)
    content = {"blocks": [{"text": "hi"}]}
    prepared = await SessionReferenceService(SessionQuery(store)).prepare(target, content, [R("a")])
    content["blocks"][0]["text"] = "changed"
    assert prepared.content == {"blocks": [{"text": "hi"}]}


# --------------------------------------------------------------------------- reads


async def test_reads_are_concurrent_one_per_source(store: SessionStore) -> None:
    store, target = await seeded(store)
    # Each read waits until all three have started: a sequential prepare would deadlock.
    query = ScriptedQuery(SessionQuery(store), barrier=asyncio.Barrier(3))
    service = SessionReferenceService(query)
    refs = [R("a"), R("b"), R("a"), R("c"), R("b")]
    prepared = await asyncio.wait_for(service.prepare(target, "hi", refs), 5)
    assert prepared.additional_context is not None
    assert query.calls["read_surface"] == 3
    assert all(query.calls[f"read_surface:{sid}"] == 1 for sid in "abc")
    first_end = min(i for i, entry in enumerate(query.log) if entry.startswith("end:"))
    assert sorted(query.log[:first_end]) == ["start:a", "start:b", "start:c"]
    assert await tasks_left_behind() == []


async def test_unknown_session_is_read_failed_chained(store: SessionStore) -> None:
    store, target = await seeded(store)
    err = await expect(
        SESSION_REFERENCE_READ_FAILED,
        SessionReferenceService(SessionQuery(store)).prepare(target, "hi", [R("a"), R("zz")]),
    )
    assert isinstance(err.__cause__, SessionNotFoundError)


async def test_a_failure_cancels_the_other_reads(store: SessionStore) -> None:
    store, target = await seeded(store)
    boom = RuntimeError("disk on fire")
    query = ScriptedQuery(SessionQuery(store), hang=["a", "c"], fail={"b": boom})
    service = SessionReferenceService(query)
    with pytest.raises(SessionReferenceError) as info:
        await service.prepare(target, "x", [R("a"), R("b"), R("c")], cancel=asyncio.Event())
    # checked at the very moment the error surfaces: nothing may still be running
    assert await tasks_left_behind() == []
    assert info.value.code == SESSION_REFERENCE_READ_FAILED
    assert info.value.__cause__ is boom
    assert sorted(query.cancelled) == ["a", "c"]
    assert gc.isenabled()  # the collector's pause ended with the failure


async def test_simultaneous_failures_leave_no_unretrieved_exception(store: SessionStore) -> None:
    store, target = await seeded(store)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        query = ScriptedQuery(
            SessionQuery(store), fail={"a": RuntimeError("one"), "b": RuntimeError("two")}
        )
        await expect(
            SESSION_REFERENCE_READ_FAILED,
            SessionReferenceService(query).prepare(target, "x", [R("a"), R("b")]),
        )
        del query
        gc.collect()
        await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert reported == []
    assert await tasks_left_behind() == []


@pytest.mark.parametrize("when", ["before", "during"])
async def test_cancel_event_with_a_read_that_never_returns(store: SessionStore, when: str) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store), hang=["a"])
    service = SessionReferenceService(query)
    cancel = asyncio.Event()
    if when == "before":
        cancel.set()

    async def cancel_once_reading() -> None:
        await query.started.wait()
        cancel.set()

    setter = asyncio.ensure_future(cancel_once_reading())
    started = time.perf_counter()
    with pytest.raises(SessionReferenceError) as info:
        await service.prepare(target, "x", [R("a"), R("b")], cancel=cancel)
    assert [t for t in await tasks_left_behind() if t is not setter] == []
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert time.perf_counter() - started < 1
    if when == "before":
        assert query.calls["read_surface"] == 0
        setter.cancel()
    else:
        assert "a" in query.cancelled
    assert gc.isenabled()
    await asyncio.gather(setter, return_exceptions=True)


async def test_cancelling_the_awaiting_task_leaves_nothing_behind(store: SessionStore) -> None:
    store, target = await seeded(store)
    query = ScriptedQuery(SessionQuery(store), hang=["a", "b"])
    service = SessionReferenceService(query)
    leftovers: list[asyncio.Task[Any]] = []

    async def send() -> None:
        try:
            await service.prepare(target, "x", [R("a"), R("b")], cancel=asyncio.Event())
        except asyncio.CancelledError:
            me = asyncio.current_task()
            leftovers.extend(t for t in others() if t is not me)
            raise

    task = asyncio.ensure_future(send())
    await query.started.wait()
    await asyncio.sleep(0)
    main = asyncio.current_task()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [t for t in leftovers if t is not main] == []
    assert sorted(query.cancelled) == ["a", "b"]
    assert all(t.done() for t in query.tasks)
    assert await tasks_left_behind() == []
    assert gc.isenabled()


# --------------------------------------------------------------------------- the result


async def test_exact_prompt_and_source(store: SessionStore) -> None:
    target = await store.create_session("t", cwd="/w", created_at=2)
    await store.create_session("src", cwd="/proj <x>", created_at=1)
    log = Log(store, "src")
    await log.user("What is <b>?")
    await log.assistant("A tag.")
    await log.tool_result("ignored")
    await log.title("Tags")  # log-only, but it moves capturedThroughSeq to 3
    service = SessionReferenceService(SessionQuery(store))
    prepared = await service.prepare(target, "and now?", [R("src", "Tag talk")])
    message = prepared.additional_context
    assert message is not None
    assert prepared.content == "and now?"
    assert set(message) == {"id", "role", "content", "source"}
    assert isinstance(message["id"], str) and message["id"]
    assert message["role"] == "user"
    assert message["content"] == [
        {
            "type": "text",
            "text": "## Referenced sessions\n\n"
            + REFERENCED_SESSIONS_WARNING
            + "\n\n<referenced-sessions>\n"
            + '[{"sessionId":"src","label":"Tag talk","cwd":"/proj \\u003cx>",'
            + '"capturedThroughSeq":3,"conversation":['
            + '{"role":"user","text":"What is \\u003cb>?"},'
            + '{"role":"assistant","text":"A tag."}]}]\n'
            + "</referenced-sessions>",
        }
    ]
    assert message["source"] == {
        "kind": "session-reference",
        "version": 1,
        "references": [
            {
                "sessionId": "src",
                "label": "Tag talk",
                "capturedThroughSeq": 3,
                "compacted": False,
                "originalMessages": 2,
                "retainedMessages": 2,
                "omittedMessages": 0,
                "omittedBytes": 0,
                "truncated": False,
                "inputIndex": 0,
            }
        ],
    }
    # a fresh id each time
    again = await service.prepare(target, "and now?", [R("src", "Tag talk")])
    assert again.additional_context is not None
    assert again.additional_context["id"] != message["id"]


async def test_each_source_is_bounded_independently(store: SessionStore) -> None:
    target = await store.create_session("t", created_at=2)
    for sid in ("x", "y"):
        await store.create_session(sid, created_at=1)
        for i in range(40):
            await Log(store, sid).user(f"{sid} message {i} " + "é" * 50)
    service = SessionReferenceService(
        SessionQuery(store), SessionReferenceConfig(max_reference_bytes=2000)
    )
    prepared = await service.prepare(target, "", [R("x"), R("y")])
    assert prepared.additional_context is not None
    sources = parse_reference_prompt(prepared.additional_context["content"][0]["text"])
    assert sources is not None and len(sources) == 2
    for source, entry in zip(
        sources, prepared.additional_context["source"]["references"], strict=True
    ):
        assert len(stringify_tag_safe_json(source).encode()) <= 2000
        assert entry["truncated"] and entry["omittedMessages"] > 0
        assert (
            entry["retainedMessages"] + entry["omittedMessages"] == entry["originalMessages"] == 40
        )
        assert source["conversation"][-1]["text"].startswith(f"{source['sessionId']} message 39 ")


async def test_budget_exceeded_is_all_or_nothing(store: SessionStore) -> None:
    store, target = await seeded(store)
    await store.create_session("long-" + "x" * 300, created_at=1)
    service = SessionReferenceService(
        SessionQuery(store), SessionReferenceConfig(max_reference_bytes=200)
    )
    await expect(
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        service.prepare(target, "hi", [R("a"), R("long-" + "x" * 300)]),
    )
    assert gc.isenabled()


async def test_reads_and_retention_run_with_the_cyclic_collector_paused(
    store: SessionStore,
) -> None:
    """Everything a prepare builds is acyclic and freed by reference counting, so the
    collector is paused for the reads, projection and retention, and back afterwards."""
    store, target = await seeded(store)
    seen: list[bool] = []

    class Watching(SessionQuery):
        # prepare reads each source's message tail, then the bodies it keeps
        async def read_message_tail(self, session_id: str, budget: int) -> Any:
            seen.append(gc.isenabled())
            snapshot = await super().read_message_tail(session_id, budget)
            seen.append(gc.isenabled())
            return snapshot

    assert gc.isenabled()
    prepared = await SessionReferenceService(Watching(store)).prepare(
        target, "hi", [R("a"), R("b")]
    )
    assert prepared.additional_context is not None
    assert seen == [False] * 4
    assert gc.isenabled()


async def test_prepared_message_is_detached_from_the_source(store: SessionStore) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    prepared = await service.prepare(target, "hi", [R("a")])
    frozen = copy.deepcopy(prepared)
    before = stringify_tag_safe_json(prepared.additional_context)
    log = Log(store, "a")
    extra = await log.user("a later message")
    await log.checkpoint("compacted", replace=Replace(0, extra.seq), seqs=[0, 1, extra.seq])
    assert stringify_tag_safe_json(prepared.additional_context) == before
    await store.delete_session("a")
    assert stringify_tag_safe_json(prepared.additional_context) == before
    assert prepared == frozen
    await expect(SESSION_REFERENCE_READ_FAILED, service.prepare(target, "hi", [R("a")]))


async def test_compacted_source_reports_it(store: SessionStore) -> None:
    store, target = await seeded(store)
    log = Log(store, "a")
    await log.checkpoint("summary", replace=Replace(0, 1), seqs=[0, 1])
    await log.user("after compaction")
    prepared = await SessionReferenceService(SessionQuery(store)).prepare(target, "", [R("a")])
    assert prepared.additional_context is not None
    [entry] = prepared.additional_context["source"]["references"]
    assert entry["compacted"] is True
    assert (entry["originalMessages"], entry["capturedThroughSeq"]) == (2, 3)
    [source] = parse_reference_prompt(prepared.additional_context["content"][0]["text"]) or []
    assert source["conversation"] == [
        {"role": "user", "text": "summary"},
        {"role": "user", "text": "after compaction"},
    ]


async def test_earlier_snapshots_are_not_nested(store: SessionStore) -> None:
    store, target = await seeded(store)
    service = SessionReferenceService(SessionQuery(store))
    first = await service.prepare(store_target := await store.read_header("b"), "see a", [R("a")])
    assert first.additional_context is not None
    await store.append_batch(
        store_target.id,
        [
            NewEvent("user/message", first.additional_context, surface_op="append"),
            NewEvent("user/message", user_message("see a"), surface_op="append"),
        ],
    )
    second = await service.prepare(target, "", [R("b")])
    assert second.additional_context is not None
    [source] = parse_reference_prompt(second.additional_context["content"][0]["text"]) or []
    assert [m["text"] for m in source["conversation"]] == ["question in b", "answer in b", "see a"]


# --------------------------------------------------------------------------- scale


@pytest.mark.slow
async def test_hundred_thousand_message_source() -> None:
    store = MemorySessionStore()
    target = await store.create_session("t", created_at=2)
    await store.create_session("big", created_at=1)
    batch = []
    for i in range(50_000):
        batch.append(NewEvent("user/message", user_message(f"q{i} <x> ünï"), surface_op="append"))
        batch.append(
            NewEvent(
                "assistant/message",
                {
                    "turn": i,
                    "step": 0,
                    "message": assistant_message(f"a{i} " * 5, provider="p", model="m"),
                },
                surface_op="append",
            )
        )
    await store.append_batch("big", batch)
    prepared = await SessionReferenceService(SessionQuery(store)).prepare(target, "", [R("big")])
    assert prepared.additional_context is not None
    [entry] = prepared.additional_context["source"]["references"]
    assert entry["originalMessages"] == 100_000
    assert entry["retainedMessages"] + entry["omittedMessages"] == 100_000
    [source] = parse_reference_prompt(prepared.additional_context["content"][0]["text"]) or []
    assert len(stringify_tag_safe_json(source).encode()) <= 65_536
    assert source["conversation"][-1]["text"] == "a49999 " * 5


async def test_works_over_every_store(store: SessionStore) -> None:
    """Hostile ids and text through a real store of each kind, end to end."""
    target = await store.create_session("t", cwd="/w", created_at=2)
    await store.create_session("s\ud800", cwd="/w", created_at=1)
    await store.append("s\ud800", "user/message", user_message("hi \udfff"), surface_op="append")
    await store.append("s\ud800", "session/title", {"title": "Title", "source": {"kind": "user"}})
    service = SessionReferenceService(SessionQuery(store))
    [candidate] = await service.list_candidates(target, "TITLE")
    assert (candidate.session_id, candidate.label) == ("s\ud800", "Title")
    prepared = await service.prepare(target, "x", [R("s\ud800")])
    assert prepared.additional_context is not None
    [source] = parse_reference_prompt(prepared.additional_context["content"][0]["text"]) or []
    assert source["sessionId"] == "s\ud800"
    assert source["conversation"] == [{"role": "user", "text": "hi \udfff"}]
    assert source["capturedThroughSeq"] == 1

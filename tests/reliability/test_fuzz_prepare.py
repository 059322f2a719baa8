"""Fuzz of preparing a snapshot of referenced sessions: only typed errors escape, and a
prepared snapshot never has ``<`` inside its data, never exceeds its budget, never holds
an excluded message.

Every property runs ``DSH_FUZZ_EXAMPLES`` examples (default 60, for CI). Long run:
``DSH_FUZZ_EXAMPLES=20000 pytest tests/reliability -k fuzz``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    Event,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    fold_surface,
    format_session_reference_mention,
    parse_reference_prompt,
    parse_session_reference_text,
    tag_safe_json_size,
    text_block,
)
from core.references.prompt import REFERENCED_SESSIONS_CLOSE_TAG, REFERENCED_SESSIONS_OPEN_TAG
from stores import MemorySessionStore, SessionQuery
from tests.reliability.fuzz_helpers import (
    FUZZ,
    Source,
    _marker,
    hostile_text,
    session_ids,
    source_logs,
)

# --------------------------------------------------------------------------- prepare


MISSING = ("missing-⟦1⟧", "missing-⟦2⟧")  # ids of sessions that do not exist


@st.composite
def prepare_cases(draw: st.DrawFn) -> tuple[list[Source], list[SessionReferenceInput], int]:
    count = draw(st.integers(1, 3))
    ids = draw(
        st.lists(session_ids, min_size=count, max_size=count, unique=True).filter(
            lambda xs: "target" not in xs
        )
    )
    sources = [draw(source_logs(sid)) for sid in ids]
    pool = draw(st.sampled_from([ids, [*ids, *MISSING], [*ids, "target", *MISSING]]))
    refs = draw(
        st.lists(
            st.builds(
                SessionReferenceInput,
                st.sampled_from(pool),
                st.one_of(st.none(), hostile_text),
            ),
            min_size=0,
            max_size=6,
        )
    )
    budget = draw(st.one_of(st.integers(1, 400), st.integers(400, 8000), st.just(10**7)))
    return sources, refs, budget


@FUZZ
@given(prepare_cases(), st.booleans())
def test_fuzz_prepare_only_typed_errors_bounded_and_nothing_excluded(
    case: tuple[list[Source], list[SessionReferenceInput], int], through_text: bool
) -> None:
    sources, refs, budget = case

    async def run() -> None:
        async with MemorySessionStore() as store:
            target = await store.create_session("target", created_at=0)
            for src in sources:
                await store.create_session(src.session_id, cwd=src.cwd, created_at=1)
                if src.events:
                    await store.append_batch(src.session_id, src.events)
            before = {s.id: await store.read_events(s.id) for s in await store.list_headers()}
            service = SessionReferenceService(
                SessionQuery(store), SessionReferenceConfig(max_reference_bytes=budget)
            )
            references = list(refs)
            if through_text:  # the host's path: composer text → parse → prepare
                draft = " \n".join(format_session_reference_mention(r) for r in refs)
                parsed = parse_session_reference_text(draft)
                expected_refs = [
                    SessionReferenceInput(
                        r.session_id, r.session_id if r.label is None else r.label
                    )
                    for r in refs
                ]
                assert list(parsed.references) == expected_refs
                references = list(parsed.references)
            distinct = list(dict.fromkeys(r.session_id for r in references))
            try:
                prepared = await service.prepare(target, [text_block("hi")], references)
            except SessionReferenceError as err:
                if "target" in distinct:
                    assert err.code == SESSION_REFERENCE_SELF_REFERENCE
                elif len(distinct) > 3:
                    assert err.code == SESSION_REFERENCE_TOO_MANY
                elif set(MISSING) & set(distinct):
                    assert err.code == SESSION_REFERENCE_READ_FAILED
                else:
                    assert err.code == SESSION_REFERENCE_BUDGET_EXCEEDED
                    assert budget < 10**7
                return
            finally:
                after = {s.id: await store.read_events(s.id) for s in await store.list_headers()}
                assert after == before  # preparing never writes
            assert "target" not in distinct and len(distinct) <= 3
            assert not set(MISSING) & set(distinct)
            assert prepared.content == [text_block("hi")]
            if not distinct:
                assert prepared.additional_context is None
                return
            check_snapshot(prepared.additional_context, sources, distinct, budget)

    asyncio.run(run())


def check_snapshot(message: Any, sources: list[Source], distinct: list[str], budget: int) -> None:
    assert message is not None and message["role"] == "user"
    (block,) = message["content"]
    prompt = block["text"]
    data = prompt.split(REFERENCED_SESSIONS_OPEN_TAG + "\n", 1)[1].rsplit(
        "\n" + REFERENCED_SESSIONS_CLOSE_TAG, 1
    )[0]
    assert "<" not in data  # no tag can be closed or opened from inside the data
    parsed = parse_reference_prompt(prompt)
    assert parsed is not None and [s["sessionId"] for s in parsed] == distinct
    by_id = {s.session_id: s for s in sources}
    refs_meta = message["source"]["references"]
    for obj, meta in zip(parsed, refs_meta, strict=True):
        src = by_id[obj["sessionId"]]
        assert tag_safe_json_size(obj) <= budget
        assert obj["cwd"] == src.cwd
        expected_seq = len(src.events) - 1 if src.events else None
        assert obj["capturedThroughSeq"] == meta["capturedThroughSeq"] == expected_seq
        shown = json.dumps(obj, ensure_ascii=False)
        for m in src.excluded:
            assert _marker(m) not in shown, f"excluded message {m} leaked"
        kept = obj["conversation"]
        assert meta["retainedMessages"] == len(kept)
        assert meta["retainedMessages"] + meta["omittedMessages"] == meta["originalMessages"]
        assert meta["originalMessages"] == len(src.markers)
        if not meta["truncated"]:
            assert [item["text"] for item in kept] == [
                src.markers[m] for m in sorted(src.markers, key=_surface_position(src))
            ]


def _surface_position(src: Source) -> Any:
    """Order included markers by where their text sits in the folded surface."""
    events = [
        Event(i, e.type, 0, e.data, e.surface_op, tuple(e.source_event_seqs or ()) or None)
        for i, e in enumerate(src.events)
    ]
    order: dict[int, int] = {}
    for position, event in enumerate(fold_surface(events)):
        blob = json.dumps(event.data, ensure_ascii=False)
        for m in src.markers:
            if blob.find(_marker(m)) >= 0 and m not in order:
                order[m] = position
    return lambda m: order[m]

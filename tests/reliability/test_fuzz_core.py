"""Fuzz of the whole public surface of ``core``: only typed errors escape, and a prepared
snapshot never has ``<`` inside its data, never exceeds its budget, never holds an excluded
message.

Every property runs ``DSH_FUZZ_EXAMPLES`` examples (default 60, for CI). Long run:
``DSH_FUZZ_EXAMPLES=20000 pytest tests/reliability -k fuzz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import (
    COMPACT_CHECKPOINT_SOURCE,
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SCHEME,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    Event,
    InvalidEventError,
    NewEvent,
    Replace,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    assistant_message,
    decode_session_reference_uri,
    encode_session_reference_uri,
    find_session_reference_spans,
    fold_surface,
    format_session_reference_mention,
    parse_reference_prompt,
    parse_session_reference_text,
    reasoning_block,
    stringify_tag_safe_json,
    tag_safe_json_size,
    text_block,
    truncate_head_tail,
    user_message,
)
from core.jsoncodec import loads_exact, utf8_len
from core.limits import MAX_TITLE_BYTES
from core.logfile import LogImportError, export_jsonl, parse_jsonl
from core.references.prompt import REFERENCED_SESSIONS_CLOSE_TAG, REFERENCED_SESSIONS_OPEN_TAG
from core.surrogates import merge_json_pairs, merge_surrogate_pairs
from stores import MemorySessionStore, SessionQuery
from tests.reliability.conftest import FUZZ_EXAMPLES

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text that tries hard to break things: markup, tags, control/bidi characters, surrogates,
# JSON and SQL syntax, mention syntax, and arbitrary code points.
HOSTILE_FRAGMENTS = [
    "<",
    "</referenced-sessions>",
    "<referenced-sessions>",
    "<script>",
    "[bold]",
    "[/]",
    "[link=https://x.invalid]",
    "\x1b[31m",
    "\x00",
    "\x07",
    "\r\n",
    "\u202e",
    "\u2066",
    "\ud800",
    "\udfff",
    "\ud83d\ude00",
    "😀",
    "é",
    '"',
    "\\",
    "\\u003c",
    "'; DROP TABLE events; --",
    "@[",
    "](",
    SESSION_REFERENCE_SCHEME,
    "\u2028",
    "\ufeff",
    "…",
]
any_char = st.characters(codec=None, exclude_categories=())
# Lone surrogates stay; a pair made by the joins is its character, as every entrance makes
# it (SPEC 4.1: the merging itself is tested where it is done).
hostile_text = (
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_FRAGMENTS), st.text(any_char, max_size=8)),
        max_size=10,
    )
    .map("".join)
    .map(merge_surrogate_pairs)
)
long_hostile_text = st.one_of(
    hostile_text,
    st.tuples(hostile_text, st.integers(50, 3000), hostile_text).map(
        lambda t: t[0] + "x<é" * t[1] + t[2]
    ),
)
session_ids = st.one_of(hostile_text, st.sampled_from(["a", "b", "\ud800", "😀", "", "[b]"]))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- URI and mentions


@FUZZ
@given(session_ids)
def test_fuzz_uri_round_trips_every_str(session_id: str) -> None:
    uri = encode_session_reference_uri(session_id)
    payload = uri.removeprefix(SESSION_REFERENCE_SCHEME)
    assert uri.startswith(SESSION_REFERENCE_SCHEME) and payload and "=" not in payload
    assert decode_session_reference_uri(uri) == merge_surrogate_pairs(session_id)


@FUZZ
@given(
    st.one_of(
        hostile_text,
        hostile_text.map(lambda t: SESSION_REFERENCE_SCHEME + t),
        st.tuples(session_ids, st.integers(0, 40), hostile_text).map(
            lambda t: (lambda u: u[: t[1]] + t[2] + u[t[1] :])(encode_session_reference_uri(t[0]))
        ),
        st.builds(object),
        st.integers(),
        st.none(),
        st.binary(max_size=10),
    )
)
def test_fuzz_uri_decode_raises_only_invalid_reference(uri: Any) -> None:
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE
        return
    assert isinstance(session_id, str)
    assert encode_session_reference_uri(session_id) == uri  # only canonical URIs decode


mention_pieces = st.one_of(
    hostile_text,
    st.builds(
        lambda sid, label: format_session_reference_mention(SessionReferenceInput(sid, label)),
        session_ids,
        st.one_of(st.none(), hostile_text),
    ),
    session_ids.map(encode_session_reference_uri),
    st.sampled_from(["@[x](dsh-session:!!)", "@[x](dsh-session:AA", "dsh-session:", "@[a\\]"]),
)


@FUZZ
@given(st.lists(mention_pieces, max_size=8).map("".join))
def test_fuzz_mention_parsing_raises_only_invalid_reference(text: str) -> None:
    spans = find_session_reference_spans(text)  # never raises
    try:
        parsed = parse_session_reference_text(text)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE
        assert any(not s.valid for s in spans)
        return
    assert [r.session_id for r in parsed.references] == [s.session_id for s in spans]


@FUZZ
@given(session_ids, st.one_of(st.none(), hostile_text), hostile_text, hostile_text)
def test_fuzz_formatted_mention_survives_any_surrounding_text(
    session_id: str, label: str | None, before: str, after: str
) -> None:
    mention = format_session_reference_mention(SessionReferenceInput(session_id, label))
    # A separator that cannot glue itself onto a neighbouring mention or token.
    text = f"{before} \n{mention} \n{after}"
    try:
        parsed = parse_session_reference_text(text)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE
        return
    # The id always survives; the label may absorb an unclosed ``@[`` from ``before``.
    assert session_id in [r.session_id for r in parsed.references]
    if "@[" not in before:
        expected = SessionReferenceInput(session_id, session_id if label is None else label)
        assert expected in parsed.references


# --------------------------------------------------------------------------- tag-safe JSON

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)


@FUZZ
@given(json_values)
def test_fuzz_tag_safe_json_has_no_angle_bracket_and_round_trips(value: Any) -> None:
    text = stringify_tag_safe_json(value)
    assert "<" not in text
    assert tag_safe_json_size(value) == len(text.encode("utf-8"))
    assert loads_exact(text, frozen=False) == merge_json_pairs(value)


@FUZZ
@given(
    st.one_of(
        st.just(math.nan),
        st.just(math.inf),
        st.just(-math.inf),
        st.builds(set),
        st.binary(max_size=3),
        st.builds(object),
        st.complex_numbers(),
    ).flatmap(lambda bad: st.sampled_from([bad, [bad], {"k": [1, {"x": bad}]}]))
)
def test_fuzz_non_json_values_raise_type_error(value: Any) -> None:
    with pytest.raises(TypeError):
        stringify_tag_safe_json(value)


# --------------------------------------------------------------------------- config, truncation


@FUZZ
@given(
    st.fixed_dictionaries(
        {},
        optional={
            name: st.one_of(
                st.integers(-5, 70_000), st.booleans(), st.floats(), st.none(), st.text(max_size=3)
            )
            for name in ("max_references", "candidate_limit", "max_reference_bytes")
        },
    )
)
def test_fuzz_config_is_valid_or_invalid_config(kwargs: dict[str, Any]) -> None:
    try:
        config = SessionReferenceConfig(**kwargs)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_CONFIG
        return
    for name in ("max_references", "candidate_limit", "max_reference_bytes"):
        value = getattr(config, name)
        assert _is_int(value) and value > 0
    assert config.max_references <= 3


@FUZZ
@given(long_hostile_text, st.integers(0, 4000))
def test_fuzz_truncate_head_tail_fits_and_counts(text: str, target: int) -> None:
    out, omitted = truncate_head_tail(text, target)
    size = len(text.encode("utf-8", "surrogatepass"))
    out_size = len(out.encode("utf-8", "surrogatepass"))
    if size <= target:
        assert (out, omitted) == (text, 0)
    else:
        assert out_size <= target and 0 < omitted <= size


# --------------------------------------------------------------------------- folding


@st.composite
def raw_logs(draw: st.DrawFn) -> list[tuple[str, Any, Any]]:
    """Operations on one log, valid or not: (type, surface_op, source_event_seqs)."""
    out: list[tuple[str, Any, Any]] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["append", "replace", "log", "bad"]))
        n = len(out) + 2
        if kind == "append":
            out.append(("user/message", "append", None))
        elif kind == "log":
            out.append(("assistant/chunk", None, None))
        elif kind == "replace":
            start, end = draw(st.integers(-1, n)), draw(st.integers(-1, n))
            seqs = draw(
                st.one_of(
                    st.just(list(range(min(start, end), max(start, end) + 1))),
                    st.lists(st.integers(-2, n + 2), max_size=6),
                    st.none(),
                )
            )
            out.append(("assistant/message", Replace(start, end), seqs))
        else:
            out.append(
                draw(
                    st.sampled_from(
                        [
                            ("user/message", None, None),
                            ("turn/end", "append", None),
                            ("user/message", "prepend", None),
                            ("user/message", "append", [n + 5]),
                            ("turn/end", None, [0]),
                            ("", None, None),
                        ]
                    )
                )
            )
    return out


@FUZZ
@given(raw_logs())
def test_fuzz_fold_and_append_only_typed_errors_and_rejects_write_nothing(
    ops: list[tuple[str, Any, Any]],
) -> None:
    async def run() -> None:
        async with MemorySessionStore() as store:
            await store.create_session("s", created_at=0)
            accepted: list[Event] = []
            for type_, op, seqs in ops:
                before = await store.read_events("s")
                try:
                    event = await store.append(
                        "s", type_, {"x": 1}, surface_op=op, source_event_seqs=seqs
                    )
                except InvalidEventError:
                    assert await store.read_events("s") == before  # nothing written
                    continue
                assert event.seq == len(accepted)
                accepted.append(event)
            log = await store.read_events("s")
            assert log == accepted
            assert [e.seq for e in log] == list(range(len(log)))
            surface = fold_surface(log)  # an accepted log always folds
            # Folding the raw op list directly raises only InvalidEventError.
            events = [
                Event(i, t, 0, {}, op, tuple(s) if isinstance(s, list) else s)
                for i, (t, op, s) in enumerate(ops)
            ]
            with contextlib.suppress(InvalidEventError):
                fold_surface(events)
            assert len({e.seq for e in surface}) == len(surface)

    asyncio.run(run())


# --------------------------------------------------------------------------- prepare


@dataclass
class Source:
    """A generated source session and what its snapshot may and may not show."""

    session_id: str
    cwd: str | None
    events: list[NewEvent] = field(default_factory=list)
    # marker -> text of messages that may appear (if still on the surface at the end)
    markers: dict[int, str] = field(default_factory=dict)
    excluded: set[int] = field(default_factory=set)


def _marker(n: int) -> str:
    return f"⟦M{n}⟧"


def _within(text: str, limit: int) -> str:
    """The longest head of ``text`` within ``limit`` UTF-8 bytes (a title's limit, issue 30:
    stores refuse a longer one)."""
    while utf8_len(text) > limit:
        text = text[: len(text) - max(1, (utf8_len(text) - limit) // 4)]
    return text


@st.composite
def source_logs(draw: st.DrawFn, session_id: str) -> Source:
    """A random log: every message kind, log-only events, replaces and checkpoints.

    Each message text starts with a unique marker; excluded kinds (tools, plugins, earlier
    snapshots, reasoning, chunks, titles, shadowed messages) are tracked to assert absence.
    """
    src = Source(session_id, draw(st.one_of(st.none(), hostile_text)))
    surface: list[tuple[int, int | None]] = []  # (seq, marker) in node order
    counter = draw(st.integers(0, 10**6)) * 1000

    def text_for(excluded: bool) -> tuple[int, str]:
        nonlocal counter
        counter += 1
        body = _marker(counter) + draw(long_hostile_text)
        if excluded:
            src.excluded.add(counter)
        else:
            src.markers[counter] = body
        return counter, body

    for _ in range(draw(st.integers(0, 14))):
        seq = len(src.events)
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "steering",
                    "steering-plugin",
                    "tool",
                    "plugin",
                    "snapshot",
                    "checkpoint",
                    "chunk",
                    "title",
                    "other",
                    "replace",
                    "empty",
                ]
            )
        )
        if kind in ("user", "checkpoint", "plugin", "snapshot", "empty"):
            excluded = kind in ("plugin", "snapshot")
            m, body = text_for(excluded)
            source: Mapping[str, Any] = {
                "user": {"kind": "user"},
                "checkpoint": COMPACT_CHECKPOINT_SOURCE,
                "plugin": {"kind": "plugin", "plugin": "files"},
                "snapshot": {"kind": "session-reference", "version": 1, "references": []},
                "empty": {"kind": "user"},
            }[kind]
            content = [text_block("")] if kind == "empty" else [text_block(body)]
            if kind == "empty":
                src.markers.pop(m, None)
                src.excluded.add(m)
            src.events.append(
                NewEvent("user/message", user_message(content, source=source), "append")
            )
            surface.append((seq, m))
        elif kind == "assistant":
            m, body = text_for(False)
            r, reasoning = text_for(True)
            content = [
                reasoning_block(reasoning),
                {"type": "future-block", "text": _marker(r)},
                text_block(body),
            ]
            message = assistant_message(content, provider="p", model="m")
            src.events.append(
                NewEvent("assistant/message", {"turn": 1, "step": 0, "message": message}, "append")
            )
            surface.append((seq, m))
        elif kind in ("steering", "steering-plugin"):
            m, body = text_for(kind == "steering-plugin")
            source = {"kind": "user"} if kind == "steering" else {"kind": "plugin", "plugin": "x"}
            data = {"turn": 1, "message": user_message(body, source=source)}
            src.events.append(NewEvent("steering/message", data, "append"))
            surface.append((seq, m))
        elif kind == "tool":
            m, body = text_for(True)
            tool_message: dict[str, Any] = {
                "id": "t",
                "role": "user",
                "content": [text_block(body)],
                "source": {"kind": "tool", "callId": "c"},
            }
            result = {"turn": 1, "step": 0, "message": tool_message}
            src.events.append(NewEvent("tool/result", result, "append"))
            surface.append((seq, m))
        elif kind in ("chunk", "title", "other"):
            m, body = text_for(True)
            log_only: dict[str, dict[str, Any]] = {
                "chunk": {
                    "turn": 1,
                    "step": 0,
                    "chunk": {"type": "text-delta", "index": 0, "text": body},
                },
                "title": {"title": _within(body, MAX_TITLE_BYTES), "source": {"kind": "user"}},
                "other": {"message": user_message(body)},
            }
            type_ = {"chunk": "assistant/chunk", "title": "session/title", "other": "vendor/x"}[
                kind
            ]
            src.events.append(NewEvent(type_, log_only[kind]))
        elif kind == "replace" and surface:
            i = draw(st.integers(0, len(surface) - 1))
            j = draw(st.integers(i, len(surface) - 1))
            shadowed = surface[i : j + 1]
            for _, old in shadowed:
                if old is not None:
                    src.markers.pop(old, None)
                    src.excluded.add(old)
            m, body = text_for(False)
            role = draw(st.sampled_from(["user", "assistant"]))
            if role == "user":
                new = NewEvent(
                    "user/message",
                    user_message(body),
                    Replace(shadowed[0][0], shadowed[-1][0]),
                    [s for s, _ in shadowed],
                )
            else:
                new = NewEvent(
                    "assistant/message",
                    {
                        "turn": 2,
                        "step": 0,
                        "message": assistant_message(body, provider="p", model="m"),
                    },
                    Replace(shadowed[0][0], shadowed[-1][0]),
                    [s for s, _ in shadowed],
                )
            src.events.append(new)
            surface[i : j + 1] = [(seq, m)]
    return src


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


# --------------------------------------------------------------------------- JSONL import


@st.composite
def broken_exports(draw: st.DrawFn) -> tuple[list[str], int]:
    """A valid export with one line broken: a gap, a bad surface op, or invalid JSON."""
    src = draw(source_logs("imported"))
    events = [
        Event(
            i,
            e.type,
            7,
            e.data,
            e.surface_op,
            tuple(e.source_event_seqs) if e.source_event_seqs is not None else None,
        )
        for i, e in enumerate(src.events)
    ]
    from core import SessionHeader

    lines = list(export_jsonl(SessionHeader("imported", 1, src.cwd), events))
    assert parse_jsonl(lines).events == tuple(  # the unbroken export imports
        NewEvent(e.type, e.data, e.surface_op, e.source_event_seqs, e.time) for e in events
    )
    index = draw(st.integers(0, len(lines)))  # len(lines) == append one more line
    breakage = draw(st.sampled_from(["gap", "bad-op", "not-json", "not-object", "bad-seqs"]))
    seq = index - 1
    line: str
    if breakage == "not-json":
        line = draw(st.sampled_from(["{not json", '{"seq":', "\x00", "[1,2", '{"a":NaN}', "nul"]))
    elif breakage == "not-object":
        line = draw(st.sampled_from(["[]", "1", '"x"', "null"]))
    else:
        obj: dict[str, Any] = {
            "seq": seq,
            "type": "user/message",
            "time": 1,
            "data": {"x": 1},
            "surface_op": "append",
            "source_event_seqs": None,
        }
        if breakage == "gap":
            obj["seq"] = seq + draw(st.sampled_from([1, 2, -1, 1000]))
        elif breakage == "bad-op":
            obj["surface_op"] = draw(
                st.sampled_from(
                    [
                        {"op": "replace", "start": seq + 3, "end": seq + 3},
                        {"op": "replace", "start": 0},
                        {"op": "delete", "start": 0, "end": 0},
                        "prepend",
                        None,
                    ]
                )
            )
            obj["source_event_seqs"] = [seq + 3] if draw(st.booleans()) else None
        else:
            obj["source_event_seqs"] = draw(st.sampled_from([[seq + 1], [-1], "0", [0, 0]]))
        if index == 0:
            obj = {"type": "sessionx", **obj}
        line = json.dumps(obj)
    return [*lines[:index], line, *lines[index + 1 :]], index + 1


@FUZZ
@given(broken_exports())
def test_fuzz_broken_import_is_rejected_with_its_line_number(case: tuple[list[str], int]) -> None:
    lines, number = case
    with pytest.raises(LogImportError) as info:
        parse_jsonl(lines)
    assert info.value.line == number
    assert str(info.value).startswith(f"line {number}:")


@FUZZ
@given(
    st.lists(
        st.one_of(
            hostile_text,
            st.sampled_from(
                ['{"type":"session","id":"x","created_at":1,"cwd":null}', "{}", "[]", ""]
            ),
        ),
        max_size=6,
    )
)
def test_fuzz_garbage_import_raises_only_log_import_error(lines: list[str]) -> None:
    try:
        parse_jsonl(lines)
    except LogImportError as err:
        assert err.line >= 0

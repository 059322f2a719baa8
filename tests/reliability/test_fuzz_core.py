"""Fuzz of the whole public surface of ``core``: only typed errors escape (and a prepared
snapshot keeps its own promises: ``test_fuzz_prepare``).

Every property runs ``DSH_FUZZ_EXAMPLES`` examples (default 60, for CI). Long run:
``DSH_FUZZ_EXAMPLES=20000 pytest tests/reliability -k fuzz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import (
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_SCHEME,
    Event,
    InvalidEventError,
    NewEvent,
    Replace,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    decode_session_reference_uri,
    encode_session_reference_uri,
    find_session_reference_spans,
    fold_surface,
    format_session_reference_mention,
    parse_session_reference_text,
    stringify_tag_safe_json,
    tag_safe_json_size,
    truncate_head_tail,
)
from core.jsoncodec import loads_exact
from core.logfile import LogImportError, export_jsonl, parse_jsonl
from core.surrogates import merge_json_pairs, merge_surrogate_pairs
from stores import MemorySessionStore
from tests.reliability.fuzz_helpers import (
    FUZZ,
    hostile_text,
    long_hostile_text,
    session_ids,
    source_logs,
)


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

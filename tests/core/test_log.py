"""The session log model (SPEC §2.1): shapes, validation and message helpers."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import InvalidEventError
from core.jsoncodec import FrozenDict
from core.log import (
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    SESSION_TITLE,
    STEERING_MESSAGE,
    SURFACE_EVENT_TYPES,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    Replace,
    SessionHeader,
    assistant_message,
    build_event,
    is_compact_checkpoint_source,
    message_text,
    reasoning_block,
    surface_op_from_json,
    surface_op_to_json,
    text_block,
    tool_call_block,
    tool_result_block,
    user_message,
    validate_new_event,
)


def test_values_are_frozen() -> None:
    header = SessionHeader("id", 1)
    assert header.cwd is None
    with pytest.raises(AttributeError):
        header.id = "x"  # type: ignore[misc]
    event = Event(0, USER_MESSAGE, 0, {}, "append")
    with pytest.raises(AttributeError):
        event.seq = 1  # type: ignore[misc]
    assert event.is_surface and not Event(1, SESSION_TITLE, 0, {}).is_surface


_ops = st.one_of(st.none(), st.just("append"), st.builds(Replace, st.integers(), st.integers()))


@given(
    st.integers(),
    st.text(),
    st.integers(),
    st.dictionaries(st.text(), st.integers()),
    _ops,
    st.none() | st.tuples(st.integers()),
)
def test_build_event_is_the_constructor(
    seq: int,
    type_: str,
    time: int,
    data: dict[str, int],
    op: object,
    seqs: tuple[int, ...] | None,
) -> None:
    built = build_event(seq, type_, time, data, op, seqs)  # type: ignore[arg-type]
    made = Event(seq, type_, time, data, op, seqs)  # type: ignore[arg-type]
    assert type(built) is Event
    assert built == made and repr(built) == repr(made)
    fields = tuple(getattr(built, f.name) for f in dataclasses.fields(Event))
    assert fields == (seq, type_, time, data, op, seqs)
    assert built.data is data
    with pytest.raises(AttributeError):
        built.seq = 1  # type: ignore[misc]
    assert build_event(0, USER_MESSAGE, 0, {}) == Event(0, USER_MESSAGE, 0, {})


def test_surface_types() -> None:
    assert {USER_MESSAGE, STEERING_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT} == SURFACE_EVENT_TYPES


def test_checkpoint_marker() -> None:
    assert dict(COMPACT_CHECKPOINT_SOURCE) == {"kind": "plugin", "plugin": "compact"}
    assert is_compact_checkpoint_source({"kind": "plugin", "plugin": "compact", "extra": 1})
    assert not is_compact_checkpoint_source({"kind": "plugin", "plugin": "other"})
    assert not is_compact_checkpoint_source({"kind": "user"})
    assert not is_compact_checkpoint_source(None)
    assert not is_compact_checkpoint_source("compact")


def test_message_helpers() -> None:
    m = user_message("hi", id="m1")
    assert m == {
        "id": "m1",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }
    a = assistant_message(
        [text_block("a"), reasoning_block("r"), text_block("b")], provider="p", model="m"
    )
    assert a["role"] == "assistant" and a["source"] == {
        "kind": "model",
        "provider": "p",
        "model": "m",
    }
    assert message_text(a) == "a\nb"
    assert tool_call_block("c", "n", "{}") == {
        "type": "tool-call",
        "id": "c",
        "name": "n",
        "arguments": "{}",
    }
    r = tool_result_block("c", [text_block("x")], is_error=True)
    assert r["toolCallId"] == "c" and r["isError"] is True
    assert (
        message_text({"content": [{"type": "mystery", "text": "no"}, {"type": "text", "text": 5}]})
        == ""
    )
    assert message_text({}) == ""


def test_surface_op_wire_form() -> None:
    assert surface_op_to_json("append") == "append"
    assert surface_op_to_json(None) is None
    assert surface_op_to_json(Replace(1, 2)) == {"op": "replace", "start": 1, "end": 2}
    assert surface_op_from_json({"op": "replace", "start": 1, "end": 2}) == Replace(1, 2)
    assert surface_op_from_json("append") == "append"
    assert surface_op_from_json(None) is None
    for bad in ["replace", {"op": "replace", "start": True, "end": 2}, {"op": "x"}, 3]:
        with pytest.raises(InvalidEventError):
            surface_op_from_json(bad)


def test_validate_freezes_and_detaches() -> None:
    data = {"a": [1]}
    v = validate_new_event(SESSION_TITLE, data, time=5)
    data["a"].append(2)
    assert v.data == {"a": [1]} and isinstance(v.data, FrozenDict)
    assert v.data_json == '{"a":[1]}' and v.time == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((USER_MESSAGE, {}, None), "must carry a surface_op"),
        ((SESSION_TITLE, {}, "append"), "log-only"),
        ((USER_MESSAGE, {}, "prepend"), "invalid surface_op"),
        ((USER_MESSAGE, {}, Replace(True, 1)), "must be int"),  # type: ignore[arg-type]
        ((USER_MESSAGE, [], "append"), "JSON object"),
        ((USER_MESSAGE, {"x": math.nan}, "append"), "not JSON"),
        ((USER_MESSAGE, {"x": object()}, "append"), "not JSON"),
        (("", {}, None), "non-empty"),
        ((1, {}, None), "non-empty"),
    ],
)
def test_validate_rejects(args: tuple[object, object, object], message: str) -> None:
    with pytest.raises(InvalidEventError, match=message):
        validate_new_event(*args)


def test_validate_rejects_bad_provenance_and_time() -> None:
    with pytest.raises(InvalidEventError, match="surface events only"):
        validate_new_event(SESSION_TITLE, {}, None, [0])
    with pytest.raises(InvalidEventError, match="distinct"):
        validate_new_event(USER_MESSAGE, {}, "append", [0, 0])
    with pytest.raises(InvalidEventError, match="non-negative"):
        validate_new_event(USER_MESSAGE, {}, "append", [-1])
    with pytest.raises(InvalidEventError, match="non-negative"):
        validate_new_event(USER_MESSAGE, {}, "append", [True])
    with pytest.raises(InvalidEventError, match="list of seqs"):
        validate_new_event(USER_MESSAGE, {}, "append", "01")
    with pytest.raises(InvalidEventError, match="time"):
        validate_new_event(USER_MESSAGE, {}, "append", None, 1.5)
    assert validate_new_event(USER_MESSAGE, {}, "append", [3, 1]).source_event_seqs == (3, 1)

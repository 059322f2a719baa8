"""The reference (deepseek-harness) log reader and writer: packed rows, Zstandard frames,
header mapping, unknown types, and what a damaged log gives (an error naming the line)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.importers.detect import load_session_log
from core.importers.reference import (
    REFERENCE_HEADER_EVENT,
    pack_chunk_runs,
    parse_reference,
    reference_lines,
    unpack_row,
)
from core.jsoncodec import dumps_js
from core.log import Event, NewEvent, Replace, SessionHeader
from core.logfile import LogImportError, export_jsonl
from stores import MemorySessionStore

CREATED = 1_785_000_000_000
HEADER = {
    "type": "session",
    "version": 0,
    "id": "s-1",
    "createdAt": CREATED,
    "cwd": "/work",
    "delegationDepth": 1,
    "parentSession": "p-0",
    "origin": "subagent",
}


def jsonl(*records: Any) -> bytes:
    """JSON lines as JavaScript writes them (lone surrogates as ``\\udxxx`` escapes)."""
    return "".join(dumps_js(r) + "\n" for r in records).encode()


def zstd_frames(*chunks: bytes, checksum: bool = True) -> bytes:
    compressor = zstandard.ZstdCompressor(write_checksum=checksum)
    return b"".join(compressor.compress(chunk) for chunk in chunks)


def as_events(events: Sequence[NewEvent]) -> list[Event]:
    """What a store would hand back after importing ``events``."""
    return [
        Event(
            seq,
            e.type,
            e.time or 0,
            e.data,
            e.surface_op,
            tuple(e.source_event_seqs) if e.source_event_seqs is not None else None,
        )
        for seq, e in enumerate(events)
    ]


def user(seq: int, text: str, time: int) -> dict[str, Any]:
    return {
        "type": "user/message",
        "seq": seq,
        "time": time,
        "data": {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        "surfaceOp": "append",
    }


# --------------------------------------------------------------------------- packed rows


def test_a_text_row_unpacks_into_its_members_with_their_seqs_and_times() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 7,
        "time0": 1000,
        "data": {"turn": 2, "step": 1, "index": 0, "dt": [5, -2], "texts": ["He", "llo", "!"]},
    }
    members = unpack_row(row, seq0=0, time0=0)
    assert [(m["seq"], m["time"]) for m in members] == [(7, 1000), (8, 1005), (9, 1003)]
    assert [m["data"]["chunk"] for m in members] == [
        {"type": "text-delta", "index": 0, "text": "He"},
        {"type": "text-delta", "index": 0, "text": "llo"},
        {"type": "text-delta", "index": 0, "text": "!"},
    ]
    assert all(m["type"] == "assistant/chunk" and m["data"]["turn"] == 2 for m in members)


def test_reasoning_and_tool_call_rows_unpack_with_their_kind_and_call() -> None:
    reasoning = {
        "type": "reasoning-chunks",
        "seq0": 3,
        "time0": 10,
        "data": {"turn": 1, "step": 1, "index": 1, "dt": [1], "texts": ["a", "b"]},
    }
    assert [m["data"]["chunk"]["type"] for m in unpack_row(reasoning, seq0=0, time0=0)] == [
        "reasoning-delta",
        "reasoning-delta",
    ]
    tool = {
        "type": "tool-call-chunks",
        "seq0": 4,
        "time0": 20,
        "data": {
            "turn": 1,
            "step": 2,
            "index": 2,
            "dt": [0, 3],
            "id": "call_1",
            "name": "bash",
            "args": ["", '{"a"', ": 1}"],
        },
    }
    chunks = [m["data"]["chunk"] for m in unpack_row(tool, seq0=0, time0=0)]
    assert chunks[1] == {
        "type": "tool-call-delta",
        "index": 2,
        "id": "call_1",
        "name": "bash",
        "argumentsDelta": '{"a"',
    }
    nameless = {**tool, "data": {k: v for k, v in tool["data"].items() if k != "name"}}
    assert "name" not in unpack_row(nameless, seq0=0, time0=0)[0]["data"]["chunk"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"dt": [1, 2, 3]}, "3 time gaps for 3 members"),
        ({"texts": []}, "non-empty string list"),
        ({"texts": ["a", 1, "b"]}, "non-empty string list"),
        ({"dt": [1, 1.5]}, "dt must be a list of integers"),
        ({"extra": 1}, "data must be exactly"),
        ({"turn": "1"}, "turn, step and index must be numbers"),
    ],
)
def test_a_malformed_row_is_rejected_naming_its_line(change: dict[str, Any], words: str) -> None:
    data = {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]}
    row = {"type": "text-chunks", "seq0": 0, "time0": CREATED, "data": {**data, **change}}
    with pytest.raises(LogImportError) as caught:
        parse_reference(jsonl(HEADER, row))
    assert caught.value.line == 2 and words in str(caught.value)


# --------------------------------------------------------------------------- header, events


def test_header_fields_are_mapped_and_the_rest_is_kept_in_a_trailing_event() -> None:
    log = parse_reference(jsonl(HEADER, user(0, "hi", CREATED + 5)))
    assert log.header == SessionHeader("s-1", CREATED, "/work")
    assert log.encoding == "jsonl" and log.rows == 1 and log.packed_rows == 0
    first, kept = log.events
    assert (first.type, first.time, first.surface_op) == ("user/message", CREATED + 5, "append")
    assert kept.type == REFERENCE_HEADER_EVENT and kept.surface_op is None
    assert kept.data["header"] == HEADER and kept.time == CREATED + 5


def test_unknown_types_and_fields_of_known_ones_are_stored_verbatim() -> None:
    odd = {"deep": [{"x": None, "y": 1.5}], "s": "\x1b[31m<b>[bold]x[/bold]\ud800"}
    records = [
        {"type": "agent/inbox/spliced", "seq": 0, "time": CREATED, "data": odd},
        {"type": "approval/asked", "seq": 1, "time": CREATED, "data": {}},
        {
            "type": "assistant/message",
            "seq": 2,
            "time": CREATED + 1,
            "data": {"turn": 1, "step": 1, "content": [], "provenance": {"model": "m"}},
            "sourceEventSeqs": [0, 1],
            "surfaceOp": "append",
        },
    ]
    log = parse_reference(jsonl(HEADER, *records))
    assert [e.type for e in log.events[:3]] == [
        "agent/inbox/spliced",
        "approval/asked",
        "assistant/message",
    ]
    assert log.events[0].data == odd and log.events[2].source_event_seqs == (0, 1)


def test_a_replace_surface_op_is_mapped() -> None:
    records = [
        user(0, "a", CREATED),
        user(1, "b", CREATED),
        {**user(2, "c", CREATED), "surfaceOp": {"op": "replace", "start": 0, "end": 1}}
        | {"sourceEventSeqs": [0, 1]},
    ]
    log = parse_reference(jsonl(HEADER, *records))
    assert log.events[2].surface_op == Replace(0, 1)


def test_a_normalised_snapshot_log_gets_positions_and_carried_times() -> None:
    """The reference's own test snapshots drop seq, time, seq0 and time0."""
    records = [
        {"type": "turn/start", "data": {"turn": 1}},
        {
            "type": "text-chunks",
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [4, 6], "texts": ["a", "b", "c"]},
        },
        {"type": "turn/end", "data": {"turn": 1}},
    ]
    log = parse_reference(jsonl(HEADER, *records))
    assert [(e.type, e.time) for e in log.events] == [
        ("turn/start", CREATED),
        ("assistant/chunk", CREATED),
        ("assistant/chunk", CREATED + 4),
        ("assistant/chunk", CREATED + 10),
        ("turn/end", CREATED + 10),
        (REFERENCE_HEADER_EVENT, CREATED + 10),
    ]
    assert log.packed_rows == 1 and log.rows == 3


def test_messages_from_before_message_ids_are_upgraded_as_the_reference_loads_them() -> None:
    old_user = {**user(0, "hi", CREATED), "data": {"content": [], "source": {"kind": "user"}}}
    old_reply = {
        "type": "assistant/message",
        "seq": 1,
        "time": CREATED,
        "data": {
            "turn": 1,
            "step": 1,
            "content": [],
            "provenance": {"provider": "p", "model": "m"},
        },
        "surfaceOp": "append",
    }
    result = {"turn": 1, "step": 1, "callId": "c1", "content": [], "isError": False}
    old_result = {"type": "tool/result", "seq": 2, "time": CREATED, "data": result}
    replacing = {**old_result, "seq": 3, "data": {**result, "isError": True}}
    log = parse_reference(
        jsonl(
            HEADER,
            old_user,
            old_reply,
            old_result | {"surfaceOp": "append"},
            replacing
            | {"sourceEventSeqs": [2], "surfaceOp": {"op": "replace", "start": 2, "end": 2}},
        )
    )
    u, a, t, r = log.events[:4]
    assert u.data == {
        "content": [],
        "source": {"kind": "user"},
        "id": "legacy-message:s-1:0",
        "role": "user",
    }
    assert a.data == {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "legacy-message:s-1:1",
            "role": "assistant",
            "content": [],
            "source": {"provider": "p", "model": "m", "kind": "model"},
        },
    }
    block = {"type": "tool-result", "toolCallId": "c1", "content": [], "isError": False}
    assert t.data["message"] == {
        "id": "legacy-message:s-1:2",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": "c1"},
    }
    assert r.data["message"]["id"] == "legacy-message:s-1:2"  # the replaced result's id


@pytest.mark.parametrize(
    ("records", "line", "words"),
    [
        ([{**user(0, "a", CREATED), "seq": 1}], 2, "expected seq 0, found 1"),
        ([user(0, "a", CREATED), user(2, "b", CREATED)], 3, "expected seq 1, found 2"),
        ([{"type": "user/message", "seq": 0, "data": {}}], 2, "must carry a surface_op"),
        ([{"type": "x", "seq": 0, "data": {}, "surfaceOp": "append"}], 2, "log-only"),
        ([{"type": "x", "seq": 0, "data": {}, "extra": 1}], 2, "unknown field 'extra'"),
        ([{"type": "x", "seq": 0}], 2, "has no data"),
        ([{"type": "x", "seq": 0, "data": [1]}], 2, "JSON object"),
        ([{"type": "x", "seq": 0, "time": -5, "data": {}}], 2, "out of range"),
        ([{"type": REFERENCE_HEADER_EVENT, "data": {}}], 2, "reserved"),
        (
            [{**user(0, "a", CREATED), "surfaceOp": {"op": "replace", "start": 4, "end": 4}}],
            2,
            "the log contradicts itself",
        ),
    ],
)
def test_an_invalid_record_is_rejected_naming_its_line(
    records: list[dict[str, Any]], line: int, words: str
) -> None:
    with pytest.raises(LogImportError) as caught:
        parse_reference(jsonl(HEADER, *records))
    assert caught.value.line == line and words in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("raw", "line", "words"),
    [
        (b"", 1, "empty"),
        (b"\x00\xffgarbage\n", 1, "not valid UTF-8"),
        (jsonl({**HEADER, "version": 3}), 1, "version 3 is not supported"),
        (jsonl({**HEADER, "createdAt": "yesterday"}), 1, "createdAt"),
        (jsonl({**HEADER, "id": 5}), 1, "id must be a string"),
        (jsonl(HEADER, user(0, "a", CREATED))[:-9], 2, "ends in the middle of a record"),
        (jsonl(HEADER) + b"\n" + jsonl(user(0, "a", CREATED)), 2, "blank line"),
        (jsonl(HEADER) + b"[1]\n", 2, "expected a JSON object"),
    ],
)
def test_a_damaged_raw_log_is_rejected_naming_its_line(raw: bytes, line: int, words: str) -> None:
    with pytest.raises(LogImportError) as caught:
        parse_reference(raw)
    assert caught.value.line == line and words in str(caught.value), str(caught.value)


def test_a_last_record_without_its_newline_is_kept_when_whole() -> None:
    raw = jsonl(HEADER, user(0, "a", CREATED)).rstrip(b"\n")
    assert parse_reference(raw).events[0].type == "user/message"


# --------------------------------------------------------------------------- Zstandard


def streamed_frame(chunk: bytes) -> bytes:
    """A frame written by a streaming compressor: no content size in its header."""
    stream = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    return stream.compress(chunk) + stream.flush()


def test_zstandard_frames_are_read_one_after_another() -> None:
    """One frame for the header, one per append batch; with or without a content size."""
    last = streamed_frame(jsonl(user(1, "b", CREATED + 1)))
    assert zstandard.get_frame_parameters(last).content_size == zstandard.CONTENTSIZE_UNKNOWN
    raw = zstd_frames(jsonl(HEADER), jsonl(user(0, "a", CREATED))) + last
    log = parse_reference(raw)
    assert log.encoding == "zstd" and [e.time for e in log.events[:2]] == [CREATED, CREATED + 1]
    assert load_session_log(raw).format == "reference-zstd"


def test_a_bad_checksum_names_the_frame_and_its_first_line() -> None:
    frames = [jsonl(HEADER), jsonl(user(0, "a", CREATED), user(1, "b", CREATED))]
    good = zstd_frames(*frames)
    second = len(zstd_frames(frames[0]))
    bad = bytearray(good)
    bad[-1] ^= 0x5A  # the last byte of the last frame's checksum
    with pytest.raises(LogImportError) as caught:
        parse_reference(bytes(bad))
    assert caught.value.line == 2
    assert f"Zstandard frame 2 at byte {second}: checksum mismatch" in str(caught.value)


@pytest.mark.parametrize(
    ("mangle", "line", "words"),
    [
        (lambda raw: raw[:-3], 2, "ends inside this frame"),
        (lambda raw: raw + b"tail", 4, "not a Zstandard frame"),
        (lambda raw: raw + b"\x28\xb5\x2f\xfd", 4, "ends inside the frame header"),
    ],
)
def test_a_cut_or_trailing_garbage_zstandard_log_is_rejected(
    mangle: Any, line: int, words: str
) -> None:
    raw = mangle(zstd_frames(jsonl(HEADER), jsonl(user(0, "a", CREATED), user(1, "b", CREATED))))
    with pytest.raises(LogImportError) as caught:
        parse_reference(raw)
    assert caught.value.line == line and words in str(caught.value), str(caught.value)


def test_a_frame_without_a_checksum_is_rejected() -> None:
    raw = zstd_frames(jsonl(HEADER)) + zstd_frames(jsonl(user(0, "a", CREATED)), checksum=False)
    with pytest.raises(LogImportError, match="no checksum") as caught:
        parse_reference(raw)
    assert caught.value.line == 2


def test_a_zstandard_frame_cut_mid_line_is_rejected() -> None:
    raw = zstd_frames(jsonl(HEADER), jsonl(user(0, "a", CREATED))[:-12])
    with pytest.raises(LogImportError, match="ends in the middle of a record") as caught:
        parse_reference(raw)
    assert caught.value.line == 2


# --------------------------------------------------------------------------- detection


def test_dsh_exports_and_reference_logs_are_told_apart() -> None:
    header = SessionHeader("d-1", CREATED, None)
    own = "\n".join(export_jsonl(header, [])).encode() + b"\n"
    assert load_session_log(own).format == "dsh"
    assert load_session_log(jsonl(HEADER)).format == "reference"
    with pytest.raises(LogImportError, match="must be the session header") as caught:
        load_session_log(b'{"hello": 1}\n')
    assert caught.value.line == 1


# --------------------------------------------------------------------------- properties

texts = st.text(max_size=6)  # any str, lone surrogates included
times = st.integers(min_value=CREATED - 10**6, max_value=CREATED + 10**6)


@st.composite
def reference_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A log's events: delta runs of every kind (short and long), other chunks, unknown
    types and surface messages, with seqs from 0 and times that may step backwards."""
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["text", "reasoning", "tool", "other", "unknown", "user"]))
        turn, step, index = (
            draw(st.integers(0, 3)),
            draw(st.integers(0, 3)),
            draw(st.integers(0, 2)),
        )
        if kind in ("text", "reasoning", "tool"):
            call = draw(st.sampled_from(["c1", "c2"]))
            named = draw(st.booleans())
            for _ in range(draw(st.integers(1, 5))):
                if kind == "tool":
                    chunk: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": call}
                    if named:
                        chunk["name"] = "bash"
                    chunk["argumentsDelta"] = draw(texts)
                else:
                    chunk = {"type": f"{kind}-delta", "index": index, "text": draw(texts)}
                chunk_data = {"turn": turn, "step": step, "chunk": chunk}
                events.append({"type": "assistant/chunk", "data": chunk_data})
        elif kind == "other":
            chunk_data = {"turn": turn, "step": step, "chunk": {"type": "block-start", "index": 0}}
            events.append({"type": "assistant/chunk", "data": chunk_data})
        elif kind == "unknown":
            events.append(
                {"type": draw(st.sampled_from(["tool/call", "x/y"])), "data": {"v": draw(texts)}}
            )
        else:
            data = {
                "id": draw(texts),
                "role": "user",
                "content": [{"type": "text", "text": draw(texts)}],
                "source": {"kind": "user"},
            }
            events.append({"type": "user/message", "data": data, "surfaceOp": "append"})
    out = []
    for seq, event in enumerate(events):
        record: dict[str, Any] = {"type": event["type"], "seq": seq, "time": draw(times)}
        record["data"] = event["data"]
        if "surfaceOp" in event:
            record["surfaceOp"] = event["surfaceOp"]
        out.append(record)
    return out


def encode(records: Sequence[Any]) -> list[str]:
    return [dumps_js(r) for r in records]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference_events())
def test_pack_then_unpack_gives_back_every_event(events: list[dict[str, Any]]) -> None:
    rows = pack_chunk_runs(events)
    unpacked: list[dict[str, Any]] = []
    for row in rows:
        if row["type"].endswith("-chunks"):
            assert len(row["data"].get("texts", row["data"].get("args"))) >= 3
            unpacked.extend(unpack_row(row, seq0=-1, time0=-1))
        else:
            unpacked.append(dict(row))
    assert unpacked == events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference_events(), st.booleans())
def test_reference_to_dsh_to_reference_keeps_the_log(
    events: list[dict[str, Any]], compressed: bool
) -> None:
    lines = encode([HEADER, *pack_chunk_runs(events)])
    raw = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    if compressed:
        raw = zstd_frames(raw)
    log = parse_reference(raw)
    assert len(log.events) == len(events) + 1
    for new, old in zip(log.events, events, strict=False):
        assert (new.type, new.time, dict(new.data)) == (old["type"], old["time"], old["data"])
    back = list(reference_lines(log.header, as_events(log.events)))
    assert back == lines
    stored = asyncio.run(_through_a_store(log.header, log.events))
    assert list(reference_lines(log.header, stored)) == lines


async def _through_a_store(header: SessionHeader, events: Sequence[NewEvent]) -> list[Event]:
    async with MemorySessionStore() as store:
        await store.import_session(header, events)
        return await store.read_events(header.id)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reference_events(),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10**6),
)
def test_damaged_bytes_give_a_log_import_error_or_a_valid_log_never_a_crash(
    events: list[dict[str, Any]],
    compressed: bool,
    flips: list[tuple[int, int]],
    cut: int,
) -> None:
    raw = bytearray(jsonl(HEADER, *pack_chunk_runs(events)))
    if compressed:
        raw = bytearray(zstd_frames(bytes(raw)))
    for position, value in flips:
        raw[position % len(raw)] = value
    damaged = bytes(raw[: len(raw) - cut % len(raw)])
    try:
        load_session_log(damaged)
    except LogImportError as err:
        assert err.line >= 1


def test_a_header_field_that_is_not_json_is_rejected_on_line_1() -> None:
    raw = b'{"type":"session","id":"x","createdAt":1785000000000,"delegationDepth":1e999}\n'
    with pytest.raises(LogImportError, match="not JSON") as caught:
        parse_reference(raw)
    assert caught.value.line == 1

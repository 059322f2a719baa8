"""Property tests of the Codex reader: any valid rollout (generated from the format, with
the noise real files carry) reads back to the same person's and model's texts in order,
also once stored and referenced; a damaged one (a truncated line, wrong types, deep
nesting, a huge line, a line that is not an object) gives one ``ForeignImportError``
naming the file and the damaged line, and nothing of the session."""

from __future__ import annotations

import asyncio
import datetime
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.importers import bounds, codex
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from stores import SqliteSessionStore
from tests.importers.codex_helpers import referenced_conversation, spoken, store_session

ISO = "2025-11-17T10:00:00.000Z"

# Any text at all, lone surrogates and control characters included, but not the shapes
# of text Codex injects (those are the plugin's, not the person's).
texts = st.text(st.characters(exclude_categories=()), max_size=40).filter(
    lambda t: not t.lstrip().startswith(("<", "#"))
)
stamps = st.one_of(
    st.just(ISO),
    st.datetimes(
        min_value=datetime.datetime(2024, 1, 1), max_value=datetime.datetime(2030, 1, 1)
    ).map(lambda d: d.isoformat(timespec="milliseconds") + "Z"),
    st.sampled_from(["[trimmed for fixture]", "", "yesterday"]),
)


@dataclass
class Rollout:
    lines: list[str]
    expected: list[tuple[str, str]]  # (role, text) a reference shows, in order

    def write(self, folder: Path, name: str = "rollout-p.jsonl", end: str = "\n") -> Path:
        path = folder / name
        # ensure_ascii: a lone surrogate is written as its \\udxxx escape, as Codex's
        # serde_json would refuse to write it raw
        path.write_text("\n".join(self.lines) + end, encoding="utf-8")
        return path


def envelope(kind: str, payload: dict[str, Any], stamp: str) -> str:
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload})


@st.composite
def rollouts(draw: st.DrawFn, bare: bool | None = None) -> Rollout:
    bare = draw(st.booleans()) if bare is None else bare
    session_id = draw(st.text(min_size=1, max_size=20))
    lines: list[str] = []
    expected: list[tuple[str, str]] = []

    def item(payload: dict[str, Any]) -> None:
        if bare:
            lines.append(json.dumps(payload))
        else:
            lines.append(envelope("response_item", payload, draw(stamps)))

    def noise() -> None:
        """Lines that never reach a reference."""
        for kind in draw(
            st.lists(st.sampled_from(["event", "state", "context", "unknown"]), max_size=2)
        ):
            if bare:
                lines.append(json.dumps({"record_type": "state"}))
            elif kind == "event":
                msg = draw(st.sampled_from(["token_count", "agent_reasoning", "user_message"]))
                lines.append(
                    envelope("event_msg", {"type": msg, "message": draw(texts)}, draw(stamps))
                )
            elif kind == "context":
                model = draw(st.sampled_from(["gpt-5-codex", "gpt-5.2", "o4-mini"]))
                lines.append(envelope("turn_context", {"model": model, "cwd": "/w"}, draw(stamps)))
            elif kind == "unknown":
                name = draw(st.sampled_from(["world_state", "compacted", "future_line", "x y"]))
                lines.append(envelope(name, {"message": draw(texts)}, draw(stamps)))
            else:
                lines.append(json.dumps({"record_type": "state"}))

    if bare:
        lines.append(
            json.dumps({"id": session_id, "timestamp": draw(stamps), "instructions": None})
        )
    else:
        payload = {"id": session_id, "timestamp": draw(stamps), "cwd": draw(st.none() | texts)}
        lines.append(envelope("session_meta", payload, draw(stamps)))
    if draw(st.booleans()):
        env = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]})
    for turn in range(draw(st.integers(0, 4))):
        noise()
        text = draw(texts)
        content: list[dict[str, Any]] = [{"type": "input_text", "text": text}]
        shown = text
        if draw(st.booleans()):
            content.append({"type": "input_image", "image_url": "data:image/png;base64,AAAA"})
            shown = f"{text}\n[image]"
        item({"type": "message", "role": "user", "content": content})
        if shown:
            expected.append(("user", shown))
        if draw(st.booleans()):
            item(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": draw(texts)}],
                }
            )
        for step in range(draw(st.integers(0, 3))):
            noise()
            kind = draw(st.sampled_from(["reasoning", "call", "custom", "say"]))
            call_id = f"call_{turn}_{step}"
            if kind == "reasoning":
                summary = [
                    {"type": "summary_text", "text": t} for t in draw(st.lists(texts, max_size=2))
                ]
                item({"type": "reasoning", "summary": summary, "encrypted_content": "gAAAA"})
            elif kind == "call":
                item(
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": json.dumps({"cmd": draw(texts)}),
                        "call_id": call_id,
                    }
                )
                item({"type": "function_call_output", "call_id": call_id, "output": draw(texts)})
            elif kind == "custom":
                item(
                    {
                        "type": "custom_tool_call",
                        "name": "apply_patch",
                        "input": draw(texts),
                        "call_id": call_id,
                    }
                )
                item({"type": "custom_tool_call_output", "call_id": call_id, "output": draw(texts)})
            else:
                parts = draw(st.lists(texts, min_size=1, max_size=2))
                blocks = [{"type": "output_text", "text": t} for t in parts]
                item({"type": "message", "role": "assistant", "content": blocks})
                joined = "\n".join(parts)
                if joined:
                    expected.append(("assistant", joined))
                    if not bare and draw(st.booleans()):  # the same again as an event
                        lines.append(
                            envelope(
                                "event_msg",
                                {"type": "agent_message", "message": joined},
                                draw(stamps),
                            )
                        )
    noise()
    return Rollout(lines, expected)


def read_one(path: Path) -> ForeignSession | ForeignImportError:
    results = list(codex.read_sessions([path]))
    assert len(results) == 1
    return results[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts())
def test_a_valid_rollout_reads_back_to_its_messages(rollout: Rollout) -> None:
    with tempfile.TemporaryDirectory() as folder:
        session = read_one(rollout.write(Path(folder)))
    assert isinstance(session, ForeignSession), session
    assert spoken(session) == rollout.expected
    assert len(session.events) == len(rollout.lines)  # one event per line, none twice
    times = [e.time for e in session.events]
    assert all(isinstance(t, int) and t >= 0 for t in times)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts(), st.data())
def test_a_grown_rollout_reads_as_before_plus_its_new_lines(
    rollout: Rollout, data: st.DataObject
) -> None:
    """Re-importing is incremental: the events of a file's first lines do not change when
    Codex appends to it (ids, times, turns and steps included), and it is always a rollout.
    (Codex names every rollout with its time: only a renamed file whose first lines hold
    no time at all takes a later line's.)"""
    cut = data.draw(st.integers(1, len(rollout.lines)))
    name = "rollout-2025-11-17T10-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "start").mkdir()
        whole = rollout.write(Path(folder), name)
        start = Rollout(rollout.lines[:cut], []).write(Path(folder) / "start", name)
        assert codex.sniff(whole, whole.read_bytes()[:SNIFF_BYTES])
        grown, before = read_one(whole), read_one(start)
    assert isinstance(grown, ForeignSession) and isinstance(before, ForeignSession)
    assert grown.events[:cut] == before.events
    assert (grown.provenance.original_id, grown.created_at) == (
        before.provenance.original_id,
        before.created_at,
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts())
def test_stored_and_referenced_it_shows_the_same_messages(rollout: Rollout) -> None:
    async def run(folder: Path) -> list[tuple[str, str]]:
        session = read_one(rollout.write(folder))
        assert isinstance(session, ForeignSession), session
        async with await SqliteSessionStore.open(folder / "dsh.sqlite3") as store:
            header = await store_session(store, session)
            stored = await store.read_events(header.id)
            assert [(e.type, e.data, e.time) for e in stored[1:]] == [
                (e.type, e.data, e.time) for e in session.events
            ]
            return await referenced_conversation(store, header.id)

    with tempfile.TemporaryDirectory() as folder:
        assert asyncio.run(run(Path(folder))) == rollout.expected


# --------------------------------------------------------------------------- damage

wrong = st.one_of(
    st.integers(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.just("k"), st.integers(), max_size=1),
)
wrong_or_null = st.one_of(wrong, st.none())


@st.composite
def wrong_type_lines(draw: st.DrawFn) -> str:
    """A line one of whose fields has a type Codex never writes there."""

    def envelope_of(payload: dict[str, Any]) -> str:
        return envelope("response_item", payload, ISO)

    choice = draw(st.integers(0, 9))
    if choice == 0:
        return json.dumps(
            {
                "timestamp": ISO,
                "type": draw(wrong_or_null.filter(lambda v: not isinstance(v, str))),
                "payload": {},
            }
        )
    if choice == 1:
        kind = draw(
            st.sampled_from(
                [
                    "response_item",
                    "event_msg",
                    "turn_context",
                    "compacted",
                    "world_state",
                    "session_meta",
                ]
            )
        )
        return json.dumps(
            {
                "timestamp": ISO,
                "type": kind,
                "payload": draw(wrong_or_null.filter(lambda v: not isinstance(v, dict))),
            }
        )
    if choice == 2:
        return envelope_of({"type": "message", "role": draw(wrong_or_null), "content": []})
    if choice == 3:
        return envelope_of(
            {
                "type": "message",
                "role": "user",
                "content": draw(wrong.filter(lambda v: not isinstance(v, list))),
            }
        )
    if choice == 4:
        return envelope_of(
            {
                "type": "message",
                "role": "assistant",
                "content": [draw(wrong.filter(lambda v: not isinstance(v, dict)) | st.text())],
            }
        )
    if choice == 5:
        return envelope_of(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": draw(wrong)}],
            }
        )
    if choice == 6:
        return envelope_of(
            {
                "type": "reasoning",
                "summary": draw(wrong.filter(lambda v: not isinstance(v, list)) | st.text()),
            }
        )
    if choice == 7:
        field = draw(st.sampled_from(["name", "call_id"]))
        return envelope_of({"type": "function_call", field: draw(wrong)})
    if choice == 8:
        return envelope_of({"type": "function_call_output", "call_id": draw(wrong)})
    return envelope("turn_context", {"model": draw(wrong)}, ISO)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts(bare=False), st.data())
def test_a_damaged_rollout_gives_one_error_naming_file_and_line(
    rollout: Rollout, data: st.DataObject
) -> None:
    lines = list(rollout.lines)
    damage = data.draw(
        st.sampled_from(["torn end", "cut line", "wrong type", "deep", "huge", "not an object"])
    )
    end = "\n"
    if damage == "torn end":
        at = data.draw(st.integers(0, len(lines) - 1))
        cut = data.draw(st.integers(1, len(lines[at]) - 1))
        lines = [*lines[:at], lines[at][:cut]]
        end = ""
    elif damage == "cut line":
        at = data.draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][: data.draw(st.integers(1, len(lines[at]) - 1))]
    else:
        at = data.draw(st.integers(1, len(lines)))
        if damage == "wrong type":
            bad = data.draw(wrong_type_lines())
        elif damage == "deep":
            payload = nested(data.draw(st.integers(65, 400)))
            bad = json.dumps(
                {
                    "timestamp": ISO,
                    "type": data.draw(st.sampled_from(["response_item", "event_msg", "x"])),
                    "payload": payload,
                }
            )
        elif damage == "huge":
            bad = envelope(
                "response_item",
                {"type": "function_call_output", "call_id": "c", "output": "x" * 5000},
                ISO,
            )
        else:
            bad = json.dumps(
                data.draw(
                    st.one_of(
                        st.lists(st.integers(), max_size=3),
                        st.integers(),
                        st.text(max_size=5),
                        st.none(),
                    )
                )
            )
        lines.insert(at, bad)
    damaged = Rollout(lines, [])
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(bounds, "MAX_LOG_LINE_BYTES", 4096),
    ):
        path = damaged.write(Path(folder), end=end)
        if damage != "huge":
            assert all(len(x.encode()) < 4096 for x in lines), "a generated line is too long"
        error = read_one(path)
    assert isinstance(error, ForeignImportError), (damage, lines)
    assert error.file == str(path)
    assert error.line == at + 1, (damage, str(error))
    assert str(error).startswith(f"line {at + 1}: ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)
keys = st.sampled_from(
    [
        "type",
        "payload",
        "role",
        "content",
        "text",
        "summary",
        "call_id",
        "name",
        "arguments",
        "output",
        "id",
        "timestamp",
        "cwd",
        "model",
        "record_type",
        "input",
        "action",
        "success",
        "thread_name",
        "session_id",
        "model_provider",
        "items",
        "session",
    ]
)
shapes = st.recursive(
    json_values,
    lambda inner: st.dictionaries(keys, inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=20,
)
record_types = st.sampled_from(
    [
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "input_text",
        "input_image",
    ]
)


@st.composite
def odd_records(draw: st.DrawFn) -> Any:
    """Records shaped almost like Codex's, with anything in their fields."""
    payload = draw(st.dictionaries(keys, shapes, max_size=6))
    if draw(st.booleans()):
        payload["type"] = draw(record_types)
    if draw(st.booleans()):
        return payload  # a bare item
    return {"timestamp": draw(stamps), "type": draw(record_types), "payload": payload}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts(), st.lists(st.tuples(st.integers(1, 1000), odd_records()), max_size=4))
def test_any_record_reads_or_is_refused_never_crashes(
    rollout: Rollout, odd: list[tuple[int, Any]]
) -> None:
    """Whatever a line holds, the reader gives a session or one ForeignImportError naming
    the line, and never another exception."""
    lines = list(rollout.lines)
    for at, record in odd:
        lines.insert(1 + at % len(lines), json.dumps(record))  # after the session meta
    with tempfile.TemporaryDirectory() as folder:
        path = Rollout(lines, []).write(Path(folder))
        result = read_one(path)
    if isinstance(result, ForeignImportError):
        assert result.file == str(path) and 1 <= result.line <= len(lines), str(result)

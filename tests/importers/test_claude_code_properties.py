"""Property tests of the Claude Code reader: any transcript as Claude Code writes it (one
line per content block, tool calls and results, progress lines, sidechains, abandoned
branches, a resumed copy in a second file, hostile text) reads back to the same person and
model texts in order; any damaged one (a torn or cut line, a field of the wrong type, deep
nesting, a line over the bound) is one error naming the file and the line, and no session."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.importers import bounds, claude_code
from tests.importers.claude_code_helpers import person_and_model_texts, read_all

SID = "0f0e0d0c-0b0a-4998-8776-655443322110"
HOSTILE = ["\ud800", "\udfff x", "\x00\x1b[2J\x07", "[bold]x[/bold]", "\u202e", "é\r\n\t"]

texts = st.one_of(st.text(max_size=40), st.sampled_from(HOSTILE))
person_texts = texts.filter(lambda t: not t.lstrip().startswith(claude_code._INJECTED_PREFIXES))


@dataclass
class Reply:
    blocks: list[tuple[str, str]]  # (kind, text): "text" | "thinking" | "tool"
    one_line: bool


@dataclass
class Turn:
    person: str
    replies: list[Reply]
    abandoned: bool  # an edited prompt: a first try left on a branch
    sidechain: bool


blocks = st.lists(
    st.tuples(st.sampled_from(["text", "thinking", "tool"]), texts), min_size=1, max_size=4
)
replies = st.builds(Reply, blocks, st.booleans())
turns = st.lists(
    st.builds(Turn, person_texts, st.lists(replies, max_size=3), st.booleans(), st.booleans()),
    min_size=1,
    max_size=6,
)


class Writer:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.count = 0
        self.last: str | None = None

    def add(self, kind: str, parent: str | None, **fields: Any) -> str:
        self.count += 1
        uuid = f"00000000-0000-4000-8000-{self.count:012d}"
        seconds = self.count
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/u/p",
            "sessionId": SID,
            "version": "2.0.1",
            "type": kind,
            "uuid": uuid,
            "timestamp": f"2025-05-01T10:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{seconds % 1000:03d}Z",
            **fields,
        }
        self.records.append(record)
        return uuid

    def chain(self, kind: str, **fields: Any) -> None:
        self.last = self.add(kind, self.last, **fields)


def write_transcript(conversation: list[Turn]) -> list[dict[str, Any]]:
    w = Writer()
    w.records.append({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    calls = 0
    for turn in conversation:
        if turn.abandoned:
            w.add("user", w.last, message={"role": "user", "content": "first try"})
        w.chain("user", message={"role": "user", "content": turn.person})
        if turn.sidechain:
            w.add("user", w.last, isSidechain=True, message={"role": "user", "content": "side"})
        for number, reply in enumerate(turn.replies):
            content: list[dict[str, Any]] = []
            for kind, text in reply.blocks:
                if kind == "text":
                    content.append({"type": "text", "text": text})
                elif kind == "thinking":
                    content.append({"type": "thinking", "thinking": text, "signature": "s"})
                else:
                    calls += 1
                    content.append(
                        {
                            "type": "tool_use",
                            "id": f"toolu_{calls}",
                            "name": "Bash",
                            "input": {"c": text},
                        }
                    )
            message_id = f"msg_{w.count}_{number}"
            parts = [content] if reply.one_line else [[b] for b in content]
            for part in parts:
                message = {
                    "id": message_id,
                    "role": "assistant",
                    "model": "claude-x",
                    "content": part,
                }
                w.chain("assistant", message=message, requestId="r")
            w.chain("progress", data={"type": "hook_progress"}, toolUseID="t")
            for block in content:
                if block["type"] == "tool_use":
                    result = {"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}
                    w.chain("user", message={"role": "user", "content": [result]})
    w.records.append({"type": "summary", "summary": "A title", "leafUuid": w.last})
    return w.records


def expected_texts(conversation: list[Turn]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for turn in conversation:
        if turn.person:
            out.append(("user", turn.person))
        for reply in turn.replies:
            text = "\n".join(t for kind, t in reply.blocks if kind == "text")
            if text:
                out.append(("assistant", text))
    return out


def dump(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@settings(max_examples=150, deadline=None)
@given(turns, st.integers(min_value=0, max_value=1000))
def test_a_valid_transcript_reads_back_to_its_messages(conversation: list[Turn], cut: int) -> None:
    records = write_transcript(conversation)
    with tempfile.TemporaryDirectory() as scratch:
        main = Path(scratch) / f"{SID}.jsonl"
        main.write_text(dump(records))
        # a resumed transcript: another file repeating the first records (same uuids)
        copy = Path(scratch) / "resumed.jsonl"
        copy.write_text(dump(records[: cut % (len(records) + 1)]))
        sessions, errors = read_all([copy, main])
    assert errors == []
    (session,) = sessions
    assert person_and_model_texts(session) == expected_texts(conversation)
    assert session.title == "A title" and session.cwd == "/home/u/p"
    assert session.provenance.original_id == SID and session.provenance.file == str(main)
    calls = [
        block["id"]
        for e in session.events
        if e.type == "assistant/message"
        for block in e.data["message"]["content"]
        if block["type"] == "tool-call"
    ]
    results = [
        e.data["message"]["source"]["callId"] for e in session.events if e.type == "tool/result"
    ]
    assert calls == results == [f"toolu_{i + 1}" for i in range(len(calls))]
    assert len(session.events) == len(records) - sum(  # merged reply lines
        len(r.blocks) - 1 for t in conversation for r in t.replies if not r.one_line
    )


DAMAGES = [
    "cut",
    "torn",
    "type",
    "timestamp",
    "uuid",
    "parent",
    "message",
    "deep",
    "deeper",
    "huge",
]


def damage(records: list[dict[str, Any]], index: int, how: str) -> str:
    """The transcript with its record ``index`` damaged ``how``."""
    lines = [json.dumps(r) for r in records]
    record = dict(records[index])
    if how in ("cut", "torn"):
        line = lines[index]
        lines[index] = line[: max(1, len(line) // 2)]
        if how == "torn":
            return "\n".join(lines[: index + 1])  # no line break after the torn record
    elif how == "type":
        record["type"] = 7
    elif how == "timestamp":
        record["timestamp"] = 1_700_000_000
    elif how == "uuid":
        record["uuid"] = ["x"]
    elif how == "parent":
        record["parentUuid"] = {"id": "x"}
    elif how == "message":
        record = {**record, "type": "assistant", "message": {"content": {"text": "x"}}}
    elif how in ("deep", "deeper"):
        depth = 80 if how == "deep" else 100_000
        record = {"type": "progress", "sessionId": SID, "data": 0}
        return (
            "\n".join(
                [
                    *lines[:index],
                    json.dumps(record).replace("0}", "[" * depth + "]" * depth + "}"),
                    *lines[index + 1 :],
                ]
            )
            + "\n"
        )
    elif how == "huge":
        record = {"type": "progress", "sessionId": SID, "data": "x" * 30_000}
    if how not in ("cut",):
        lines[index] = json.dumps(record)
    return "".join(line + "\n" for line in lines)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conversation=turns, where=st.integers(min_value=0), how=st.sampled_from(DAMAGES))
@example(conversation=[Turn("", [], False, False)], where=0, how="deep")
@example(conversation=[Turn("", [], False, False)], where=0, how="deeper")
def test_a_damaged_transcript_is_one_error_naming_file_and_line(
    conversation: list[Turn], where: int, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record too deep for the store is refused where it would be stored: a file whose
    only message it replaced holds no conversation, so nothing of it is read and nothing is
    refused (a record too deep for the JSON parser, ``deeper``, is refused as it is read)."""
    monkeypatch.setattr(bounds, "MAX_LOG_LINE_BYTES", 20_000)
    records = write_transcript(conversation)
    index = 1 + where % (len(records) - 1)  # any record but the first snapshot
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"{SID}.jsonl"
        path.write_text(damage(records, index, how), encoding="utf-8", errors="surrogatepass")
        sessions, errors = read_all([path])
    others = [r for i, r in enumerate(records) if i != index]
    if how == "deep" and not any(r["type"] in ("user", "assistant") for r in others):
        assert (sessions, errors) == ([], [])
        return
    assert sessions == []
    (error,) = errors
    assert (error.file, error.line, error.original_id) == (str(path), index + 1, SID), str(error)
    assert str(error).startswith(f"line {index + 1}: ")

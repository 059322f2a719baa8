"""The Codex CLI rollout reader (core.importers.codex) over its own fixtures
(tests/importers/codex/, written from the format): the surface it gives, what stays
log-only, recognition, where it looks, and what a damaged file gives (one error naming the
file and the line, nothing of that session)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.importers import bounds, codex
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from core.log import message_text
from stores import SessionQuery, SqliteSessionStore
from tests.importers.codex_helpers import (
    referenced_conversation,
    spoken,
    store_session,
    surface_blocks,
)
from tui.cli.output import print_transcript
from tui.shared.items import classify_surface, with_unknown_events
from tui.shared.render import render_item

FIXTURES = Path(__file__).parent / "codex"
MODERN = FIXTURES / "rollout-2025-11-17T10-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"
BARE = FIXTURES / "rollout-2025-08-20T09-00-00-0198bbbb-0000-7000-8000-000000000002.jsonl"
FORK = FIXTURES / "rollout-2026-01-05T08-30-00-019cfork-0000-7000-8000-000000000003.jsonl"
DOCUMENT = FIXTURES / "rollout-2025-04-20-0196cccc-0000-4000-8000-000000000004.json"
ISO = "2025-11-17T10:00:00.000Z"
T0 = 1_763_373_600_000  # ISO in epoch ms


def line(kind: str, payload: dict[str, Any], timestamp: str = ISO) -> str:
    return json.dumps({"timestamp": timestamp, "type": kind, "payload": payload})


def meta(session_id: str = "s-1", cwd: str | None = "/w") -> str:
    return line("session_meta", {"id": session_id, "timestamp": ISO, "cwd": cwd})


def item(payload: dict[str, Any], timestamp: str = ISO) -> str:
    return line("response_item", payload, timestamp)


def said(role: str, text: str) -> str:
    kind = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


def write(tmp_path: Path, *lines: str, name: str = "rollout-x.jsonl", end: str = "\n") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def read_error(path: Path) -> ForeignImportError:
    [result] = list(codex.read_sessions([path]))
    assert isinstance(result, ForeignImportError), result
    assert result.file == os.fspath(path)
    return result


# --------------------------------------------------------------------------- the surface


def test_a_rollout_reads_to_its_conversation() -> None:
    session = codex.read_file(MODERN)
    assert session.provenance.tool == "codex"
    assert session.provenance.original_id == "0199aaaa-0000-7000-8000-000000000001"
    assert session.provenance.file == os.path.abspath(MODERN)
    assert session.files == (os.path.abspath(MODERN),)
    assert (session.created_at, session.cwd) == (T0, "/home/ada/pomodoro")
    assert session.title == "Timer drift"  # a thread_name_updated event, the only title
    assert spoken(session) == [
        ("user", "Why does the timer drift?\n[image]"),
        (
            "assistant",
            "setInterval drifts because each tick is late; I now schedule every tick "
            "from the start time.",
        ),
        ("user", "Thanks! [REDACTED] \x1b[31mred\x1b[0m <b>bold</b>"),
        ("assistant", "You are welcome."),
    ]
    # one event per line, in file order
    assert len(session.events) == len(MODERN.read_text().splitlines())


def test_every_line_has_its_event_and_its_time() -> None:
    session = codex.read_file(MODERN)
    kinds = [e.type for e in session.events]
    assert kinds == [
        "codex/session_meta",
        "user/message",  # developer permissions
        "user/message",  # AGENTS.md
        "user/message",  # environment context
        "user/message",
        "codex/event_msg",  # the user message again: not on the surface
        "codex/turn_context",
        "codex/event_msg",
        "assistant/message",  # reasoning
        "assistant/message",  # function_call
        "tool/result",
        "codex/event_msg",
        "assistant/message",  # custom_tool_call
        "tool/result",
        "assistant/message",  # local_shell_call
        "tool/result",
        "assistant/message",
        "codex/event_msg",  # the agent message again
        "codex/response_item",  # ghost snapshot
        "codex/compacted",
        "codex/world_state",
        "codex/event_msg",
        "codex/future_line",
        "user/message",
        "codex/turn_context",
        "codex/response_item",  # reasoning with nothing but encrypted content
        "assistant/message",
    ]
    for event in session.events:
        assert (event.surface_op is not None) == (
            event.type in ("user/message", "assistant/message", "tool/result")
        )
        if event.surface_op is None:  # a log-only event holds its line's record
            assert set(event.data) >= {"type"}
    times = [e.time for e in session.events]
    assert times[0] == T0
    # "[redacted]" is no time: the world_state line takes the previous event's
    assert times[kinds.index("codex/world_state")] == times[kinds.index("codex/compacted")]
    assert all(isinstance(t, int) for t in times) and times == sorted(times)


def test_injected_context_is_the_plugins_and_turns_count_the_person() -> None:
    events = codex.read_file(MODERN).events
    users = [e for e in events if e.type == "user/message"]
    assert [u.data["source"] for u in users] == [
        {"kind": "plugin", "plugin": "codex"},
        {"kind": "plugin", "plugin": "codex"},
        {"kind": "plugin", "plugin": "codex"},
        {"kind": "user"},
        {"kind": "user"},
    ]
    assert all(u.data["role"] == "user" and u.data["id"].startswith("codex:") for u in users)
    replies = [(e.type, e.data["turn"], e.data["step"]) for e in events if "turn" in e.data]
    assert replies == [
        ("assistant/message", 0, 0),
        ("assistant/message", 0, 1),
        ("tool/result", 0, 1),
        ("assistant/message", 0, 2),
        ("tool/result", 0, 2),
        ("assistant/message", 0, 3),
        ("tool/result", 0, 3),
        ("assistant/message", 0, 4),
        ("assistant/message", 1, 0),
    ]


def test_reasoning_tool_calls_and_results_follow_the_conventions() -> None:
    events = codex.read_file(MODERN).events
    assistants = [e.data["message"] for e in events if e.type == "assistant/message"]
    assert assistants[0]["content"] == [
        {"type": "reasoning", "text": "**Looking at the tick loop**"}
    ]
    assert assistants[0]["source"] == {
        "kind": "model",
        "provider": "openai",
        "model": "gpt-5.1-codex",
    }
    assert assistants[-1]["source"]["model"] == "gpt-5.2-codex"  # the later turn_context's
    calls = [a["content"][0] for a in assistants[1:4]]
    assert [(c["type"], c["id"], c["name"]) for c in calls] == [
        ("tool-call", "call_1", "shell"),
        ("tool-call", "call_2", "apply_patch"),
        ("tool-call", "call_3", "local_shell"),
    ]
    for call in calls:  # arguments: always a JSON text
        json.loads(call["arguments"])
    assert json.loads(calls[1]["arguments"])["input"].startswith("*** Begin Patch")
    assert json.loads(calls[2]["arguments"])["command"] == ["npm", "test"]
    results = [e.data["message"] for e in events if e.type == "tool/result"]
    assert [r["source"] for r in results] == [
        {"kind": "tool", "callId": "call_1"},
        {"kind": "tool", "callId": "call_2"},
        {"kind": "tool", "callId": "call_3"},
    ]
    assert results[2]["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "call_3",
            "content": [{"type": "text", "text": "1 failing"}],
            "isError": True,
        }
    ]
    assert all(r["role"] == "user" for r in results)


def test_encrypted_reasoning_is_never_shown() -> None:
    session = codex.read_file(MODERN)
    texts = json.dumps([dict(b) for b in surface_blocks(session)])
    assert "gAAAAAB" not in texts
    assert "data:image" not in texts  # an image is its placeholder


def test_the_bare_format_of_2025() -> None:
    session = codex.read_file(BARE)
    assert session.provenance.original_id == "0198bbbb-0000-7000-8000-000000000002"
    assert session.created_at == 1_755_680_400_123
    assert session.cwd == "/srv/legacy"  # from its environment context: no cwd in the meta
    assert session.title is None
    assert [e.type for e in session.events] == [
        "codex/session_meta",
        "codex/state",
        "user/message",
        "user/message",
        "codex/state",
        "assistant/message",
        "assistant/message",
        "tool/result",
        "assistant/message",
    ]
    assert spoken(session) == [
        ("user", "List the files"),
        ("assistant", "Two entries: README.md and src."),
    ]
    assert all(e.time == session.created_at for e in session.events)  # no per-line times


def test_the_json_document_of_spring_2025() -> None:
    session = codex.read_file(DOCUMENT)
    assert session.provenance.original_id == "0196cccc-0000-4000-8000-000000000004"
    assert (session.created_at, session.cwd, session.title) == (1_745_140_500_000, None, None)
    assert [e.type for e in session.events] == [
        "codex/session_meta",
        "user/message",
        "assistant/message",
        "assistant/message",
        "tool/result",
        "assistant/message",
    ]
    assert session.events[0].data["instructions"] == "Prefer small commits."
    assert spoken(session) == [
        ("user", "Rename the helper to parse_args"),
        ("assistant", "Renamed in cli.py."),
    ]
    assert all(e.time == session.created_at for e in session.events)


@pytest.mark.parametrize(
    ("text", "words", "line"),
    [
        ('{"session": {"id": "s"}, "items": [1]}', "item 1: an item must be an object", 0),
        ('{"session": {"id": 1}}', "the session: the session id must be a string", 0),
        ('{"session": {"id": "s"}, "items": {}}', 'the document\'s "items" must be a list', 0),
        (
            '{"session": {"id": "s"}, "items": [{"type": "message", "role": "user"}, '
            '{"type": "message", "role": 2}]}',
            "item 2: a message's role must be a string",
            0,
        ),
        ('{"session": {"id": "s"},\n "items": [\n  {"type": "message",\n', "invalid JSON", 4),
        ('{"session": {"id": "s"}, "items": [' + "[" * 70 + "]" * 70 + "]}", "nests deeper", 0),
    ],
)
def test_a_damaged_json_document(tmp_path: Path, text: str, words: str, line: int) -> None:
    path = tmp_path / "rollout-2025-04-20-s.json"
    path.write_text(text)
    assert codex.sniff(path, text.encode())
    error = read_error(path)
    assert words in str(error) and error.line == line


def test_a_fork_is_its_own_session_with_the_parents_copied_start() -> None:
    session = codex.read_file(FORK)
    assert session.provenance.original_id == "019cfork-0000-7000-8000-000000000003"
    assert [e.type for e in session.events][:2] == ["codex/session_meta", "codex/session_meta"]
    assert session.events[1].data["payload"]["id"] == "0199aaaa-0000-7000-8000-000000000001"
    assert spoken(session) == [
        ("user", "Why does the timer drift?"),
        ("assistant", "Each tick is late."),
        ("user", "And in Safari?"),
        ("assistant", "Safari throttles background tabs too."),
    ]


def test_a_growing_file_only_adds_events(tmp_path: Path) -> None:
    """Re-importing is incremental: what was read of a file is read the same once it grew."""
    lines = MODERN.read_text().splitlines()
    for cut in (1, 5, 11, 20, len(lines)):
        path = write(tmp_path, *lines[:cut], name=f"rollout-{cut}.jsonl")
        part = codex.read_file(path)
        assert part.events == codex.read_file(MODERN).events[:cut]


def test_event_messages_alone_stay_off_the_surface(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        meta(),
        line("event_msg", {"type": "user_message", "message": "hi"}),
        line("event_msg", {"type": "agent_message", "message": "hello"}),
    )
    session = codex.read_file(path)
    assert [e.type for e in session.events] == ["codex/session_meta"] + ["codex/event_msg"] * 2
    assert spoken(session) == []


def test_a_file_without_meta_takes_its_id_and_time_from_its_name(tmp_path: Path) -> None:
    name = "rollout-2025-10-01T12-00-00-0199cccc-0000-7000-8000-00000000000c.jsonl"
    path = write(
        tmp_path,
        line("turn_context", {"model": "gpt-5"}, timestamp="[trimmed]"),
        said("user", "hi").replace(ISO, "0"),
        name=name,
    )
    session = codex.read_file(path)
    assert session.provenance.original_id == "0199cccc-0000-7000-8000-00000000000c"
    assert session.created_at == 1_759_320_000_000
    assert [e.time for e in session.events] == [session.created_at] * 2
    assert session.cwd is None


def test_an_empty_id_or_cwd_is_none(tmp_path: Path) -> None:
    name = "rollout-2025-10-01T12-00-00-0199cccc-0000-7000-8000-00000000000c.jsonl"
    path = write(tmp_path, meta(session_id="", cwd=""), meta(session_id="later"), name=name)
    session = codex.read_file(path)
    assert session.provenance.original_id == "0199cccc-0000-7000-8000-00000000000c"
    assert session.cwd is None


def test_times_before_the_first_timestamp_take_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        line("session_meta", {"id": "s"}, timestamp="[trimmed]"),
        said("user", "hi").replace(ISO, ""),
        item({"type": "message", "role": "assistant", "content": []}, "2026-01-01T00:00:00Z"),
    )
    session = codex.read_file(path)
    assert session.created_at == 1_767_225_600_000
    assert [e.time for e in session.events] == [session.created_at] * 3
    assert session.events[-1].type == "codex/response_item"  # an empty reply: log-only


def test_odd_but_real_shapes(tmp_path: Path) -> None:
    """Seen in real files: an item without its type, a text under its type's name, a call
    without arguments or output, an output given as one content item, null summaries."""
    path = write(
        tmp_path,
        meta(),
        item({"role": "user", "content": [{"type": "input_text", "text": "Run the tests"}]}),
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "one"},
                    {"type": "output_text", "output_text": "two"},
                    {"type": "encrypted_content", "encrypted_content": "zzz"},
                    {"type": "output_audio"},
                ],
            }
        ),
        item({"type": "function_call", "name": "shell", "call_id": "c1"}),
        item({"type": "function_call_output", "call_id": "c1"}),
        item({"type": "function_call", "name": "f", "arguments": {"a": 1}, "call_id": "c2"}),
        item(
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": {"type": "input_text", "text": "ok"},
            }
        ),
        item(
            {
                "type": "custom_tool_call_output",
                "call_id": "c3",
                "output": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_image", "image_url": "x"},
                ],
            }
        ),
        item(
            {
                "type": "reasoning",
                "summary": None,
                "content": [{"type": "reasoning_text", "text": "raw"}],
            }
        ),
    )
    events = codex.read_file(path).events
    assert spoken(codex.read_file(path)) == [
        ("user", "Run the tests"),
        ("assistant", "one\ntwo\n[output_audio]"),
    ]
    calls = [e.data["message"]["content"][0] for e in events if e.type == "assistant/message"][1:3]
    assert [c["arguments"] for c in calls] == ["{}", '{"a":1}']
    results = [
        e.data["message"]["content"][0]["content"][0]["text"]
        for e in events
        if e.type == "tool/result"
    ]
    assert results == ["", "ok", "a\n[image]"]
    assert events[-1].data["message"]["content"] == [{"type": "reasoning", "text": "raw"}]


def test_an_image_is_a_placeholder_without_the_tags_codex_wraps_it_in(tmp_path: Path) -> None:
    content = [
        {"type": "input_text", "text": "<image name=[Image #1]>"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_text", "text": "</image>"},
        {"type": "input_text", "text": "What is on it? <image>"},
        {"type": "input_text", "text": "<image>"},
    ]
    path = write(tmp_path, meta(), item({"type": "message", "role": "user", "content": content}))
    assert spoken(codex.read_file(path)) == [("user", "[image]\nWhat is on it? <image>\n<image>")]


def test_hostile_strings_are_kept_as_they_are(tmp_path: Path) -> None:
    text = "a\x00b\u202e<script>\ud800[/red]"
    path = write(tmp_path, meta(session_id="\x1b]0;pwn\x07"), said("user", text))
    session = codex.read_file(path)
    assert session.provenance.original_id == "\x1b]0;pwn\x07"
    assert spoken(session) == [("user", text)]


def test_a_long_thread_name_is_cut_to_a_title(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        meta(),
        line("event_msg", {"type": "thread_name_updated", "thread_name": "é" * 2000}),
    )
    title = codex.read_file(path).title
    assert title is not None and 1000 < len(title.encode()) <= 1024


# --------------------------------------------------------------------------- the store


async def test_stored_it_replays_and_shows_only_the_conversation_to_a_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = codex.read_file(MODERN)
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        header = await store_session(store, session)
        assert header.id == session.provenance.original_id
        stored = await store.read_events(header.id)
        assert stored[0].type == "session/source"
        assert stored[0].data == {
            "tool": "codex",
            "file": session.provenance.file,
            "id": session.provenance.original_id,
        }
        assert [(e.type, e.data) for e in stored[1:]] == [(e.type, e.data) for e in session.events]
        surface = (await SessionQuery(store).read_surface(header.id)).events
        assert len(surface) == sum(1 for e in session.events if e.surface_op is not None)
        # replayed as `dsh show` shows it: the log-only lines as collapsed unknown items
        unknown = await store.read_unknown_events(header.id)
        assert [e.type for e in unknown] == [e.type for e in stored if e.surface_op is None]
        items = classify_surface(with_unknown_events(surface, unknown))
        assert [i.kind for i in items].count("unknown") == len(unknown)
        assert {"user", "assistant", "tool", "context"} <= {i.kind for i in items}
        for shown in items:
            render_item(shown, expand_cards=False, wrap=False)
        print_transcript(header, session.title, surface, expand=True)
        assert "Timer drift" in capsys.readouterr().out
        conversation = await referenced_conversation(store, header.id)
    assert conversation == spoken(session)
    shown = "\n".join(text for _, text in conversation)
    for hidden in ("Looking at the tick loop", "grep -n", "1 failing", "AGENTS.md", "<cwd>"):
        assert hidden not in shown


# --------------------------------------------------------------------------- recognition


def head(path: Path) -> bytes:
    return path.read_bytes()[:SNIFF_BYTES]


@pytest.mark.parametrize("path", [MODERN, BARE, FORK, DOCUMENT])
def test_sniff_knows_a_rollout(path: Path) -> None:
    assert codex.sniff(path, head(path))


def test_sniff_knows_a_meta_line_longer_than_the_head(tmp_path: Path) -> None:
    big = line("session_meta", {"id": "s", "timestamp": ISO, "instructions": "x" * SNIFF_BYTES})
    path = write(tmp_path, big, name="anything.jsonl")
    assert codex.sniff(path, head(path))


@pytest.mark.parametrize(
    "first",
    [
        # dsh's own log, the reference's, Claude Code's lines, a ChatGPT export, history.jsonl
        '{"type":"session","id":"s","created_at":1,"cwd":null}',
        '{"type":"session","version":0,"id":"s","createdAt":1}',
        '{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user",'
        '"content":"hi"},"uuid":"u","timestamp":"2025-01-01T00:00:00Z","sessionId":"s"}',
        '{"type":"summary","summary":"A title","leafUuid":"u"}',
        '[{"title":"t","create_time":1,"mapping":{},"current_node":"n"}]',
        '{"session_id":"s","ts":1700000000,"text":"hi"}',
        '{"created_at":"2025-09-10T12:00:00Z","role":"user","message":"hi"}',
        "",
        "not json",
    ],
)
def test_sniff_refuses_other_files(tmp_path: Path, first: str) -> None:
    for name in ("rollout-2025-01-01T00-00-00-x.jsonl", "other.jsonl"):
        path = write(tmp_path, first, '{"type":"x"}', name=name)
        assert not codex.sniff(path, head(path))


def test_sniff_takes_a_trimmed_rollout_by_its_name(tmp_path: Path) -> None:
    first = line("turn_context", {"model": "gpt-5"})
    assert codex.sniff(tmp_path / "rollout-2025-01-01T00-00-00-x.jsonl", first.encode())
    assert not codex.sniff(tmp_path / "other.jsonl", first.encode())


def test_default_root_honours_codex_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "ch"))
    assert codex.default_root() == tmp_path / "ch" / "sessions"
    monkeypatch.delenv("CODEX_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert codex.default_root() == tmp_path / "home" / ".codex" / "sessions"


def test_find_files_lists_rollouts_sorted_without_following_links(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    day = root / "2025" / "11" / "17"
    day.mkdir(parents=True)
    later = root / "2026" / "01" / "05"
    later.mkdir(parents=True)
    a = day / MODERN.name
    a.write_bytes(MODERN.read_bytes())
    b = later / FORK.name
    b.write_bytes(FORK.read_bytes())
    renamed = day / "copied.jsonl"  # not named as Codex names it, but a rollout
    renamed.write_bytes(BARE.read_bytes())
    document = day / DOCUMENT.name
    document.write_bytes(DOCUMENT.read_bytes())
    (day / "config.json").write_text('{"model": "o3"}')
    (day / "notes.jsonl").write_text('{"type":"session","id":"s","created_at":1}\n')
    (day / "rollout-readme.txt").write_text("no")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "rollout-z.jsonl").write_bytes(MODERN.read_bytes())
    (root / "linked").symlink_to(outside)
    (day / "rollout-link.jsonl").symlink_to(a)
    assert codex.find_files(root) == sorted([a, b, renamed, document])


# --------------------------------------------------------------------------- damage


def test_read_sessions_goes_on_after_a_bad_file(tmp_path: Path) -> None:
    bad = write(tmp_path, meta(), "{not json", said("user", "x"), name="rollout-bad.jsonl")
    results = list(codex.read_sessions([MODERN, bad, BARE]))
    assert isinstance(results[0], ForeignSession) and isinstance(results[2], ForeignSession)
    error = results[1]
    assert isinstance(error, ForeignImportError)
    assert (error.file, error.line, error.original_id) == (os.fspath(bad), 2, "s-1")
    assert str(error).startswith("line 2: invalid JSON")


def test_a_truncated_last_line(tmp_path: Path) -> None:
    path = write(tmp_path, meta(), said("user", "hi")[:-7], end="")
    error = read_error(path)
    assert error.line == 2
    assert "ends in the middle of a record" in str(error)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"text"', "expected a JSON object, got a string"),
        ('{"timestamp": "x", "type": 7, "payload": {}}', 'a record\'s "type" must be a string'),
        ('{"timestamp": "x", "payload": {}}', 'the record has no "type"'),
        (line("response_item", {}).replace("{}", "[]"), 'the "payload" of a response_item'),
        (item({"type": "message", "role": 1, "content": []}), "a message's role must be a string"),
        (
            item({"type": "message", "role": "user", "content": 5}),
            "a message's content must be a list",
        ),
        (
            item({"type": "message", "role": "user", "content": [3]}),
            "an item of a message's content",
        ),
        (
            item(
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": 3}]}
            ),
            "a text of a message's content must be a string",
        ),
        (item({"type": "reasoning", "summary": "s"}), "a reasoning summary must be a list"),
        (item({"type": "function_call", "name": 3}), "a function_call's name must be a string"),
        (item({"type": "function_call", "arguments": 3}), "a function_call's arguments must be"),
        (item({"type": "function_call_output", "call_id": []}), "a tool output's call_id"),
        (line("turn_context", {"model": 5}), "a turn_context's model must be a string"),
        ('{"a": 1, "a": 2}', "invalid JSON"),
        ("[" * 70 + "]" * 70, "nests deeper than 64 levels"),
        ('{"type": "x", "payload": ' + "[" * 70 + "]" * 70 + "}", "nests deeper than 64 levels"),
    ],
)
def test_a_damaged_line_names_its_file_and_line(tmp_path: Path, bad: str, words: str) -> None:
    path = write(tmp_path, meta(), said("user", "hi"), bad, said("assistant", "yo"))
    error = read_error(path)
    assert error.line == 3
    assert words in str(error)


@pytest.mark.parametrize(
    ("first", "words"),
    [
        (line("session_meta", {"id": 5}), "the session id must be a string"),
        (line("session_meta", {"id": "s", "cwd": ["/"]}), "the session cwd must be a string"),
        (line("session_meta", {"id": "s" * 2000}), "a session id may hold at most"),
        (line("session_meta", {"id": "s", "cwd": "/" * 5000}), "a cwd may hold at most"),
        ('{"created_at": "2025-09-10T12:00:00Z", "role": "user"}', "not a Codex rollout"),
    ],
)
def test_a_bad_header_line(tmp_path: Path, first: str, words: str) -> None:
    error = read_error(write(tmp_path, first, said("user", "hi")))
    assert error.line == 1 and words in str(error)


def test_a_huge_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_LOG_LINE_BYTES", 4096)
    output = item({"type": "function_call_output", "call_id": "c", "output": "x" * 10_000})
    error = read_error(write(tmp_path, meta(), said("user", "hi"), output))
    assert error.line == 3 and "longer than 4,096 bytes" in str(error)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    path.write_bytes(meta().encode() + b"\n" + said("user", "hi").encode()[:-3] + b'\xff"}]}}\n')
    error = read_error(path)
    assert error.line == 2 and "not valid UTF-8" in str(error)


def test_an_empty_file_a_folder_and_a_fifo(tmp_path: Path) -> None:
    empty = write(tmp_path, "", end="")
    assert "empty" in str(read_error(empty))
    blank = write(tmp_path, "", "  ", "", name="rollout-blank.jsonl")
    assert "empty" in str(read_error(blank))
    assert "directory" in str(read_error(tmp_path))
    fifo = tmp_path / "rollout-fifo.jsonl"
    os.mkfifo(fifo)
    assert "FIFO" in str(read_error(fifo))  # and the read never blocks
    assert read_error(tmp_path / "missing.jsonl").line == 0


def test_a_message_text_after_a_damaged_line_is_never_read(tmp_path: Path) -> None:
    """All or nothing: an error is all a damaged file gives, whatever came before."""
    path = write(tmp_path, meta(), said("user", "kept?"), "{", said("assistant", "no"))
    results = list(codex.read_sessions([path]))
    assert len(results) == 1 and isinstance(results[0], ForeignImportError)


def test_message_text_of_a_reasoning_message_is_empty() -> None:
    """What SPEC §4.6 projects of a reasoning step: nothing (its text blocks are none)."""
    events = codex.read_file(MODERN).events
    reasoning = next(e for e in events if e.type == "assistant/message")
    assert message_text(reasoning.data["message"]) == ""


def test_a_compressed_rollout_reads_as_the_plain_one(tmp_path: Path) -> None:
    import zstandard

    path = tmp_path / (MODERN.name + ".zst")
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(MODERN.read_bytes()))
    assert codex.find_files(tmp_path) == [path]
    assert codex.read_file(path).events == codex.read_file(MODERN).events

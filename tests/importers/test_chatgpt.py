"""The ChatGPT export reader (``core.importers.chatgpt``) on hand-made exports written from
the format (``tests/importers/chatgpt/``): the current branch as the surface, the rest in
the log, code interpreter turns as tools, damaged conversations as one error each with
their line, and the ``.zip`` read in place with its bombs refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.importers import chatgpt
from core.importers.foreign import FOREIGN_TOOLS, SNIFF_BYTES, ForeignFormat
from tests.importers.chatgpt_helpers import (
    EXPORT,
    T,
    _chain,
    _conversation,
    _message,
    _msg,
    _sessions,
    _shown,
    _write_export,
    _zip,
)
from tests.importers.chatgpt_store import store_and_reference

# --------------------------------------------------------------------------- the surface


def test_the_current_branch_is_the_surface_and_every_other_node_is_in_the_log() -> None:
    rich, _system = _sessions(EXPORT)
    assert rich.provenance.as_json() == {"tool": "chatgpt", "file": str(EXPORT), "id": "conv-rich"}
    assert rich.created_at == T and rich.cwd is None and rich.files == (str(EXPORT),)
    assert rich.title == "Sine <b>waves</b>\x1b[31m"  # kept as written; shown escaped
    surface = [e for e in rich.events if e.surface_op is not None]
    assert all(e.surface_op == "append" for e in surface)
    assert [_shown(e) for e in surface] == [
        ("user/message", "text: [image]\nPlot a sine wave like this one"),
        ("assistant/message", "reasoning: Planning\nUse numpy and matplotlib."),
        (
            "assistant/message",
            'call python a2: {"code":"import numpy as np\\nprint(np.sin(0))"}',
        ),
        ("tool/result", "result a2: 0.0"),
        ("assistant/message", "text: Here is the plot."),
        ("user/message", "text: Make it a cosine"),
        ("assistant/message", "reasoning: Thought for 3 seconds"),
        ("assistant/message", "text: Done: cosine it is."),
    ]
    # turns count the person's messages, steps the model's replies within a turn
    turns = [(e.data["turn"], e.data["step"]) for e in surface if e.type != "user/message"]
    assert turns == [(0, 0), (0, 1), (0, 1), (0, 2), (1, 0), (1, 1)]
    sources = [_message(e)["source"] for e in surface]
    assert sources[0] == {"kind": "user"}
    assert sources[1] == {"kind": "model", "provider": "openai", "model": "o3"}
    assert sources[3] == {"kind": "tool", "callId": "a2"}
    assert sources[-1]["model"] == "gpt-4o"
    assert surface[3].data["message"]["content"][0]["isError"] is False
    # log-only: the conversation's fields first, then every node not on the surface as it
    # is, in depth-first order (the other branch before the current one)
    log = [e for e in rich.events if e.surface_op is None]
    assert rich.events[0].type == "chatgpt/conversation"
    assert "mapping" not in rich.events[0].data and rich.events[0].data["id"] == "conv-rich"
    assert [e.data["id"] for e in log[1:]] == ["root", "sys", "u2a", "a4a", "q"]
    assert {e.type for e in log[1:]} == {"chatgpt/node"}
    assert log[4].data["message"]["content"]["parts"] == ["You're welcome."]
    order = [
        e.data["id"] if e.type == "chatgpt/node" else _message(e)["id"] for e in rich.events[1:]
    ]
    assert order.index("u2a") < order.index("a4a") < order.index("u2b")


def test_times_are_milliseconds_and_a_missing_one_is_the_previous_events() -> None:
    rich, _system = _sessions(EXPORT)
    times = [e.time for e in rich.events]
    assert times[:3] == [T, T, T]  # the conversation, the empty root, the hidden system node
    assert times[3] == T + 1000  # u1
    assert rich.events[-1].time == T + 10_000  # a5 has no create_time: the quote's (q)


def test_a_visible_system_message_is_injected_context_and_conversation_id_is_the_id() -> None:
    _rich, system = _sessions(EXPORT)
    assert system.provenance.original_id == "conv-system" and system.title is None
    surface = [e for e in system.events if e.surface_op is not None]
    assert [_shown(e) for e in surface] == [
        ("user/message", "text: Be brief."),
        ("user/message", "text: hi"),
        ("assistant/message", "text: hello"),
    ]
    assert surface[0].data["source"] == {"kind": "plugin", "plugin": "chatgpt"}
    assert surface[2].data["turn"] == 0  # the injected message is no turn of the person's
    assert surface[2].data["message"]["source"]["model"] == "unknown"


async def test_stored_it_references_only_what_was_said(tmp_path: Path) -> None:
    rich, _system = _sessions(EXPORT)
    stored, surface, conversation = await store_and_reference(rich, tmp_path)
    assert stored[0].type == "session/source" and len(stored) == len(rich.events) + 1
    assert [e.data for e in stored[1:]] == [e.data for e in rich.events]
    assert len(surface) == 8
    assert conversation == [
        {"role": "user", "text": "[image]\nPlot a sine wave like this one"},
        {"role": "assistant", "text": "Here is the plot."},
        {"role": "user", "text": "Make it a cosine"},
        {"role": "assistant", "text": "Done: cosine it is."},
    ]


# --------------------------------------------------------------------------- finding


def test_sniff_knows_an_export_and_nothing_else(tmp_path: Path) -> None:
    def head(text: str | bytes) -> bytes:
        return (text.encode() if isinstance(text, str) else text)[:SNIFF_BYTES]

    assert chatgpt.sniff(EXPORT, head(EXPORT.read_bytes()))
    assert chatgpt.sniff(Path("x.json"), head(' \n[{"title": "t", "mapping": {}}]'))
    assert chatgpt.sniff(Path("conversations.json"), head("[]"))
    assert not chatgpt.sniff(Path("x.json"), head("[]"))
    assert not chatgpt.sniff(Path("x.json"), head("[1, 2]"))
    claude = '{"type":"user","parentUuid":null,"sessionId":"s","message":{"role":"user"}}\n'
    codex = '{"timestamp":"2025","type":"session_meta","payload":{"id":"x"}}\n'
    dsh = '{"type":"session","id":"x","created_at":1,"cwd":null}\n'
    reference = '{"type":"session","id":"x","createdAt":1,"version":0}\n'
    for text in (claude, codex, dsh, reference):
        assert not chatgpt.sniff(Path("conversations.json"), head(text))
    archive = _zip(tmp_path / "export.zip", {"conversations.json": b"[]"})
    other = _zip(tmp_path / "other.zip", {"notes.txt": b"hi"})
    assert chatgpt.sniff(archive, archive.read_bytes()[:SNIFF_BYTES])
    assert not chatgpt.sniff(other, other.read_bytes()[:SNIFF_BYTES])
    assert chatgpt.default_root() is None and chatgpt.TOOL == "chatgpt"


def test_find_files_takes_exports_and_follows_no_symlink(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.json").write_bytes(EXPORT.read_bytes())
    (tmp_path / "b" / "conversations.json").write_text("[]")
    (tmp_path / "b" / "user.json").write_text('{"id": "u"}')
    (tmp_path / "b" / "log.jsonl").write_text("[]")
    _zip(tmp_path / "b" / "export.zip", {"conversations.json": b"[]"})
    _zip(tmp_path / "b" / "photos.zip", {"a.png": b""})
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    (tmp_path / "linked").symlink_to(tmp_path / "b")
    os.mkfifo(tmp_path / "pipe.json")
    assert chatgpt.find_files(tmp_path) == [
        tmp_path / "a.json",
        tmp_path / "b" / "conversations.json",
        tmp_path / "b" / "export.zip",
    ]


# --------------------------------------------------------------------------- details


def test_tool_turns_pair_with_their_calls_and_a_lone_output_stays_in_the_log(
    tmp_path: Path,
) -> None:
    code = {"content_type": "code", "language": "python", "text": "1/0"}
    failed = {"aggregate_result": {"status": "failed", "in_kernel_exception": {"name": "Z"}}}
    conversation = _chain(
        "tools",
        _msg("u", "user", {"content_type": "text", "parts": ["go"]}),
        _msg("orphan", "tool", {"content_type": "execution_output", "text": "?"}, name="python"),
        _msg("c1", "assistant", code, recipient="python"),
        _msg("c2", "assistant", {"content_type": "text", "parts": ["cats"]}, recipient="browser"),
        _msg(
            "r2",
            "tool",
            {"content_type": "tether_browsing_display", "result": "found"},
            name="browser",
        ),
        _msg("y", "tool", {"content_type": "execution_output", "text": "?"}, name="dalle"),
        _msg(
            "r1",
            "tool",
            {"content_type": "execution_output", "text": "ZeroDivisionError"},
            name=None,
            metadata=failed,
        ),
        _msg("x", "tool", {"content_type": "weird"}, name="python"),
        _msg("c3", "assistant", {"content_type": "code", "text": "x"}, recipient="python"),
        _msg(
            "r3",
            "tool",
            {"content_type": "system_error", "name": "E", "text": "timed out"},
            name="python",
        ),
        _msg("e", "assistant", {"content_type": "thoughts", "thoughts": []}),
    )
    conversation["default_model_slug"] = "gpt-4-code-interpreter"
    path = _write_export(tmp_path / "conversations.json", [conversation])
    (session,) = _sessions(path)
    surface = [_shown(e) for e in session.events if e.surface_op is not None]
    assert surface == [
        ("user/message", "text: go"),
        ("assistant/message", 'call python c1: {"code":"1/0"}'),
        ("assistant/message", 'call browser c2: {"input":"cats"}'),
        ("tool/result", "result c2: found"),
        ("tool/result", "result c1: ZeroDivisionError"),  # no name: the latest call
        ("assistant/message", 'call python c3: {"code":"x"}'),
        ("tool/result", "result c3: timed out"),
    ]
    results = [e for e in session.events if e.type == "tool/result"]
    assert [e.data["message"]["content"][0]["isError"] for e in results] == [False, True, True]
    assert [(e.data["turn"], e.data["step"]) for e in results] == [(0, 1), (0, 0), (0, 2)]
    models = {
        e.data["message"]["source"]["model"]
        for e in session.events
        if e.type == "assistant/message"
    }
    assert models == {"gpt-4-code-interpreter"}
    logged = [e.data["id"] for e in session.events if e.type == "chatgpt/node"]
    assert logged == ["orphan", "y", "x", "e"]  # y: no call to that tool is open


def test_a_long_title_is_shortened_and_an_empty_one_is_none(tmp_path: Path) -> None:
    long = _conversation("long", "hi")
    long["title"] = "é" * 2000
    empty = _conversation("empty", "hi")
    empty["title"] = ""
    path = _write_export(tmp_path / "conversations.json", [long, empty])
    first, second = _sessions(path)
    assert first.title is not None and first.title.endswith("…")
    assert len(first.title.encode()) <= 1024 and first.title.startswith("é" * 500)
    assert second.title is None


def test_a_conversation_of_five_thousand_messages_is_read_without_recursion(
    tmp_path: Path,
) -> None:
    texts = [f"m{i}" for i in range(5_000)]
    path = _write_export(tmp_path / "conversations.json", [_conversation("long", *texts)])
    (session,) = _sessions(path)
    surface = [e for e in session.events if e.surface_op is not None]
    assert [_message(e)["content"][0]["text"] for e in surface] == texts
    assert surface[-1].data["turn"] == 2_499


def test_without_current_node_the_leaf_written_last_is_the_branch(tmp_path: Path) -> None:
    conversation = _conversation("c", "q", "first answer")
    first = conversation["mapping"]["c-1"]
    second = json.loads(json.dumps(first))
    second["id"] = second["message"]["id"] = "c-1b"
    second["message"]["content"]["parts"] = ["second answer"]
    second["message"]["create_time"] += 60
    conversation["mapping"]["c-1b"] = second
    conversation["mapping"]["c-0"]["children"].append("c-1b")
    del conversation["current_node"]
    path = _write_export(tmp_path / "conversations.json", [conversation])
    (session,) = _sessions(path)
    surface = [_shown(e) for e in session.events if e.surface_op is not None]
    assert surface == [("user/message", "text: q"), ("assistant/message", "text: second answer")]
    assert [e.data["id"] for e in session.events if e.type == "chatgpt/node"] == ["c-1"]


def test_the_module_is_a_foreign_format() -> None:
    fmt: ForeignFormat = chatgpt  # checked by mypy: the protocol's names and signatures
    assert fmt.TOOL in FOREIGN_TOOLS


def test_a_conversation_that_went_on_reads_to_its_old_events_then_its_new_ones(
    tmp_path: Path,
) -> None:
    """What an incremental re-import needs: the old log is a prefix of the new one."""
    (old_conversation, _system) = json.loads(EXPORT.read_text())
    new = json.loads(json.dumps(old_conversation))
    mapping = new["mapping"]
    mapping["q"]["children"].append("q2")  # a node off the surface gains a child too
    mapping["a5"]["children"] = ["u3"]
    for key, parent, role, text in (
        ("u3", "a5", "user", "And tan?"),
        ("a6", "u3", "assistant", "Sure."),
    ):
        mapping[key] = {
            "id": key,
            "parent": parent,
            "children": [],
            "message": {
                "id": key,
                "author": {"role": role},
                "create_time": 1_735_689_700.0,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
    mapping["u3"]["children"] = ["a6"]
    new.update(current_node="a6", update_time=1_735_689_701.0, title="Renamed")
    new["safe_urls"] = ["https://example.com"]
    new["moderation_results"] = [{"flagged": False}]
    (before,) = _sessions(_write_export(tmp_path / "old.json", [old_conversation]))
    (after,) = _sessions(_write_export(tmp_path / "new.json", [new]))
    assert after.events[: len(before.events)] == before.events
    assert [_shown(e) for e in after.events[len(before.events) :]] == [
        ("user/message", "text: And tan?"),
        ("assistant/message", "text: Sure."),
    ]
    assert after.title == "Renamed"

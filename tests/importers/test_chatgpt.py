"""The ChatGPT export reader (``core.importers.chatgpt``) on hand-made exports written from
the format (``tests/importers/chatgpt/``): the current branch as the surface, the rest in
the log, code interpreter turns as tools, damaged conversations as one error each with
their line, and the ``.zip`` read in place with its bombs refused."""

from __future__ import annotations

import io
import json
import os
import struct
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.importers import chatgpt
from core.importers.chatgpt import array as chatgpt_array
from core.importers.chatgpt import conversations as chatgpt_conversations
from core.importers.chatgpt import files as chatgpt_files
from core.importers.foreign import (
    FOREIGN_TOOLS,
    SNIFF_BYTES,
    ForeignFormat,
    ForeignImportError,
    ForeignSession,
)
from core.log import NewEvent
from tests.importers.chatgpt_store import store_and_reference

FIXTURES = Path(__file__).parent / "chatgpt"
EXPORT = FIXTURES / "export.json"
DAMAGED = FIXTURES / "damaged.json"
T = 1_735_689_600_000  # the fixtures' create_time, 2025-01-01, in ms


def _read(*paths: Path) -> list[ForeignSession | ForeignImportError]:
    return list(chatgpt.read_sessions(list(paths)))


def _sessions(*paths: Path) -> list[ForeignSession]:
    results = _read(*paths)
    assert all(isinstance(r, ForeignSession) for r in results), results
    return results  # type: ignore[return-value]


def _message(event: NewEvent) -> Any:
    return event.data if event.type == "user/message" else event.data["message"]


def _shown(event: NewEvent) -> tuple[str, ...]:
    """A surface event as (type, what it holds)."""
    message = _message(event)
    out: list[str] = [event.type]
    for block in message["content"]:
        if block["type"] == "tool-result":
            out.append(f"result {block['toolCallId']}: {block['content'][0]['text']}")
        elif block["type"] == "tool-call":
            out.append(f"call {block['name']} {block['id']}: {block['arguments']}")
        else:
            out.append(f"{block['type']}: {block['text']}")
    return tuple(out)


def _write_export(path: Path, conversations: list[Any], indent: int | None = None) -> Path:
    path.write_text(json.dumps(conversations, indent=indent), encoding="utf-8")
    return path


def _conversation(cid: str, *texts: str, at: float = 1_700_000_000.0) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    parent = None
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        key = f"{cid}-{i}"
        mapping[key] = {
            "id": key,
            "parent": parent,
            "children": [],
            "message": {
                "id": key,
                "author": {"role": role},
                "create_time": at + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        if parent is not None:
            mapping[parent]["children"].append(key)
        parent = key
    return {"id": cid, "title": cid, "create_time": at, "current_node": parent, "mapping": mapping}


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


# --------------------------------------------------------------------------- damage


def test_each_damaged_conversation_is_one_error_with_its_line_and_the_others_import() -> None:
    results = _read(DAMAGED)
    assert [type(r).__name__ for r in results] == [
        "ForeignSession",
        "ForeignImportError",
        "ForeignImportError",
        "ForeignSession",
        "ForeignImportError",
    ]
    ok1, syntax, typed, ok2, cut = results
    assert isinstance(ok1, ForeignSession) and ok1.provenance.original_id == "ok-1"
    assert isinstance(ok2, ForeignSession) and ok2.provenance.original_id == "ok-2"
    assert isinstance(syntax, ForeignImportError) and syntax.file == str(DAMAGED)
    assert str(syntax) == "line 100: the conversation is not valid JSON: Expecting ':' delimiter"
    assert isinstance(typed, ForeignImportError) and typed.original_id == "bad-type"
    assert str(typed) == (
        "line 110: conversation 'bad-type': mapping must be an object of nodes, not an array"
    )
    assert isinstance(cut, ForeignImportError)
    assert str(cut) == (
        "line 245: the file ends inside the conversation that starts on line 200 (it was cut short)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1: the file is empty: expected a JSON array of conversations"),
        ("  \n", "line 1: the file is empty: expected a JSON array of conversations"),
        ('\n{"id": "x"}', "line 2: not a ChatGPT export: expected a JSON array of conversations"),
        ("[", "line 1: the file ends inside the array of conversations (it was cut short)"),
        ("[\n{}\n", "line 3: the file ends after a conversation, without the array's closing ]"),
        ("[] x", "line 1: data after the array of conversations"),
        (
            '[{"id": "a"}\n{"id": "b"}]',
            "line 2: expected , or ] after the conversation that starts on line 1; the rest "
            "of the file cannot be read",
        ),
    ],
)
def test_a_broken_array_is_one_error_naming_the_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(text)
    results = _read(path)
    assert [str(r) for r in results if isinstance(r, ForeignImportError)][-1] == message
    assert all(
        isinstance(r, ForeignImportError) or r.provenance.original_id == "a" for r in results
    )


def test_an_empty_export_and_a_bom_read_as_nothing_and_as_usual(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(" [ ]\n")
    assert _read(empty) == []
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps([_conversation("c", "hi")]).encode())
    assert [s.provenance.original_id for s in _sessions(bom)] == ["c"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.pop("id"), "the conversation has no id"),
        (lambda c: c.update(id=""), "the conversation has no id"),
        (lambda c: c.pop("mapping"), "conversation 'c': the conversation has no mapping"),
        (lambda c: c.update(mapping="x"), "mapping must be an object of nodes, not a string"),
        (lambda c: c.update(create_time="now"), "create_time must be a number of seconds"),
        (lambda c: c.update(create_time=-5), "create_time -5 is out of range"),
        (lambda c: c.update(create_time=1e300), "out of range"),
        (lambda c: c.update(title=3), "title must be a string, not a number"),
        (lambda c: c.update(current_node=7), "current_node must be a node id, not a number"),
        (lambda c: c.update(current_node="nope"), "current_node 'nope' is not a node of"),
        (lambda c: c["mapping"].update({"c-0": []}), "node 'c-0' must be an object, not an"),
        (lambda c: c["mapping"]["c-1"].update(message="hi"), "node 'c-1': message must be"),
        (lambda c: c["mapping"]["c-1"].update(parent=0), "node 'c-1': parent must be a node"),
        (lambda c: c["mapping"]["c-1"].update(children="c-2"), "children must be a list"),
        (
            lambda c: c["mapping"]["c-1"]["message"].update(create_time=[1]),
            "node 'c-1': create_time must be a number of seconds, not an array",
        ),
        (lambda c: c["mapping"]["c-0"].update(parent="c-1"), "form a cycle"),
        (lambda c: c.update(id="i" * 2000), "a session id may hold at most 1,024"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_error_for_that_conversation_only(
    tmp_path: Path, change: Any, message: str
) -> None:
    bad = _conversation("c", "q", "a")
    change(bad)
    path = tmp_path / "conversations.json"
    path.write_text(
        "[\n"
        + json.dumps(_conversation("before", "x"))
        + ",\n"
        + json.dumps(bad)
        + ",\n"
        + json.dumps(_conversation("after", "y"))
        + "\n]\n"
    )
    before, error, after = _read(path)
    assert isinstance(before, ForeignSession) and isinstance(after, ForeignSession)
    assert after.provenance.original_id == "after"
    assert isinstance(error, ForeignImportError) and error.line == 3
    assert message in str(error)


def test_a_conversation_that_is_not_an_object_or_repeats_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    ok = json.dumps(_conversation("ok", "fine"))
    path.write_text(f'[1, "two", null, [3], {{"id": "d", "id": "e"}}, {ok}]')
    *errors, last = _read(path)
    assert [str(e) for e in errors] == [
        "line 1: a conversation must be a JSON object, not a number",
        "line 1: a conversation must be a JSON object, not a string",
        "line 1: a conversation must be a JSON object, not null",
        "line 1: a conversation must be a JSON object, not an array",
        "line 1: the conversation is not valid JSON: duplicate key 'id'",
    ]
    assert isinstance(last, ForeignSession) and last.provenance.original_id == "ok"


def test_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    good = json.dumps(_conversation("ok", "fine")).encode()
    path.write_bytes(b'[\n{"id": "x",\n "title": "\xff"},\n' + good + b"]")
    error, ok = _read(path)
    assert str(error) == "line 3: the conversation is not valid UTF-8"
    assert isinstance(ok, ForeignSession)


def test_deep_nesting_is_refused_for_that_conversation_only(tmp_path: Path) -> None:
    deep = _conversation("deep", "hi")
    deep["moderation_results"] = json.loads("[" * 200 + "]" * 200)
    path = tmp_path / "conversations.json"
    path.write_text("[" + json.dumps(deep) + ",\n" + json.dumps(_conversation("ok", "fine")) + "]")
    error, ok = _read(path)
    assert str(error) == "line 1: the conversation nests deeper than 64 levels"
    assert isinstance(ok, ForeignSession) and ok.provenance.original_id == "ok"
    # a depth the stock decoder never reaches: no RecursionError, the same one error
    path.write_text('[{"a":' + "[" * 100_000 + "]" * 100_000 + "}]")
    (error,) = _read(path)
    assert str(error) == "line 1: the conversation nests deeper than 64 levels"


def test_strings_with_escaped_quotes_and_backslashes_are_delimited_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ['a "quoted" \\', "\\", '\\"', "]},[{", "\\\\\\", "\U0001f600 \u2028 \x00"]
    conversations = [_conversation(f"c{i}", t, t[::-1]) for i, t in enumerate(texts)]
    path = _write_export(tmp_path / "conversations.json", conversations)
    data = path.read_bytes()
    for chunk in (1, 2, 3, 7, len(data)):  # every split of a string or escape across reads
        for window in (1, 2, 3, 5, 4096):  # ... and across the scanner's windows
            monkeypatch.setattr(chatgpt_array, "_FIRST_WINDOW", window)
            monkeypatch.setattr(chatgpt_array, "_LAST_WINDOW", max(window, 7))
            elements = list(chatgpt.split_array(_pieces(data, chunk)))
            assert [json.loads(e.text) for e in elements] == conversations
    sessions = _sessions(path)
    assert [_message(s.events[1])["content"][0]["text"] for s in sessions] == texts


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_a_conversation_past_its_bound_is_refused_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_array, "MAX_CONVERSATION_BYTES", 4000)
    monkeypatch.setattr(chatgpt_files, "_READ", 256)
    path = tmp_path / "conversations.json"
    text = json.dumps(
        [
            _conversation("long", *(["x" * 500] * 10)),  # many strings
            _conversation("ok1", "fine"),
            _conversation("huge", "y" * 5000),  # one string, longer than a read
            _conversation("ok2", "fine"),
        ],
        indent=1,
    )
    path.write_text(text)
    starts = [n for n, line in enumerate(text.splitlines(), start=1) if line == " {"]
    long, ok1, huge, ok2 = _read(path)
    message = "the conversation is longer than 4,000 bytes, the most dsh reads"
    assert str(long) == f"line {starts[0]}: {message}"
    assert str(huge) == f"line {starts[2]}: {message}"
    assert [s.provenance.original_id for s in (ok1, ok2)] == ["ok1", "ok2"]  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_100_mb_tool_output_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A string past MAX_CONVERSATION_BYTES (64 MiB) ends that conversation, read without ever
    holding the whole of it; the next conversation still imports."""
    path = tmp_path / "conversations.json"
    huge = _conversation("huge", "run it", "")
    head, tail = json.dumps([huge]).rsplit('""', 1)
    with path.open("wb") as file:
        file.write(head.encode() + b'"')
        block = b"0123456789abcdef" * 65536  # 1 MiB
        for _ in range(100):
            file.write(block)
        file.write(b'"' + tail.removesuffix("]").encode() + b",")
        file.write(json.dumps(_conversation("ok", "fine")).encode() + b"]")
    tracemalloc.start()
    try:
        error, ok = _read(path)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(error) == (
        "line 1: the conversation is longer than 67,108,864 bytes, the most dsh reads"
    )
    assert isinstance(ok, ForeignSession)
    assert peak < 90 * 1024**2  # at most the bound and a read, never the 100 MB


def test_a_fifo_a_directory_and_a_missing_file_are_one_error_each(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    missing = tmp_path / "missing.json"
    errors = _read(fifo, tmp_path, missing)
    assert [e.file for e in errors] == [str(fifo), str(tmp_path), str(missing)]  # type: ignore[union-attr]
    assert "a FIFO" in str(errors[0]) and "No such file" in str(errors[2])


# --------------------------------------------------------------------------- zip


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_the_exports_zip_is_read_in_place(tmp_path: Path) -> None:
    export = EXPORT.read_bytes()
    archive = _zip(
        tmp_path / "export.zip",
        {
            "chat.html": b"<html></html>",
            "user.json": b"{}",
            "file-abc.png": b"\x89PNG",
            "deeper/conversations.json": b"[]",
            "conversations.json": export,
        },
    )
    from_zip = _sessions(archive)
    plain = _sessions(EXPORT)
    assert [s.events for s in from_zip] == [s.events for s in plain]
    assert from_zip[0].provenance.file == str(archive)
    assert list(tmp_path.iterdir()) == [archive]  # nothing extracted
    stored = _zip(tmp_path / "stored.zip", {"x/conversations.json": export}, zipfile.ZIP_STORED)
    assert len(_sessions(stored)) == 2


def test_a_zip_without_an_export_or_with_it_only_inside_another_zip_is_refused(
    tmp_path: Path,
) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr("conversations.json", EXPORT.read_bytes())
    nested = _zip(tmp_path / "nested.zip", {"inner.zip": inner.getvalue()})
    (error,) = _read(nested)
    assert str(error) == "the zip archive holds no conversations.json"
    assert isinstance(error, ForeignImportError) and error.file == str(nested)
    assert not chatgpt.sniff(nested, nested.read_bytes()[:SNIFF_BYTES])
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    (error,) = _read(damaged)
    assert "zip archive" in str(error)


def test_a_zip_bomb_is_refused_before_it_is_decompressed(tmp_path: Path) -> None:
    bomb = _zip(tmp_path / "bomb.zip", {"conversations.json": b"[" + b" " * (32 * 1024**2) + b"]"})
    assert bomb.stat().st_size < 100_000
    (error,) = _read(bomb)
    assert str(error).startswith("conversations.json is compressed ")
    assert "refused as a zip bomb" in str(error)


def test_a_refused_export_is_still_taken_as_chatgpts_and_a_stray_zip_is_not(
    tmp_path: Path,
) -> None:
    """``dsh import bomb.zip`` says it is a zip bomb (before, sniff turned the bomb down and
    the file was read as a dsh log: "not valid UTF-8"); a zip without conversations.json
    is nobody's, so a folder import passes it by."""
    bomb = _zip(tmp_path / "bomb.zip", {"conversations.json": b"[" + b" " * (32 * 1024**2) + b"]"})
    assert chatgpt.sniff(bomb, bomb.read_bytes()[:SNIFF_BYTES])
    stray = _zip(tmp_path / "photos.zip", {"a.png": b"\x89PNG"})
    assert not chatgpt.sniff(stray, stray.read_bytes()[:SNIFF_BYTES])
    assert chatgpt.find_files(tmp_path) == [bomb]


def test_a_zip_member_that_lies_about_its_size_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member whose headers declare fewer bytes than it holds: never more than declared
    is read, the damage is one error, conversations wholly before it import."""
    noise = [os.urandom(50_000).hex() for _ in range(2)]  # deflates little: many reads
    data = json.dumps([_conversation("a", noise[0]), _conversation("b", noise[1])]).encode()
    path = _zip(tmp_path / "liar.zip", {"conversations.json": data})
    raw = bytearray(path.read_bytes())
    declared = len(data) - 40
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.find(signature)
        assert struct.unpack_from("<I", raw, at + offset)[0] == len(data)
        struct.pack_into("<I", raw, at + offset, declared)
    path.write_bytes(bytes(raw))
    monkeypatch.setattr(chatgpt_files, "_READ", 64)  # the damage is seen at the member's end
    results = _read(path)
    assert isinstance(results[0], ForeignSession) and results[0].provenance.original_id == "a"
    assert isinstance(results[-1], ForeignImportError) and len(results) == 2


def test_a_zip_declaring_too_much_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_files, "MAX_ZIP_MEMBER_BYTES", 1000)
    path = _zip(tmp_path / "big.zip", {"conversations.json": EXPORT.read_bytes()})
    (error,) = _read(path)
    assert "would decompress to" in str(error) and "more than the 1,000 dsh reads" in str(error)


def test_an_encrypted_member_is_refused(tmp_path: Path) -> None:
    path = _zip(tmp_path / "secret.zip", {"conversations.json": b"[]"}, zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = raw.find(signature)
        struct.pack_into("<H", raw, at + offset, struct.unpack_from("<H", raw, at + offset)[0] | 1)
    path.write_bytes(bytes(raw))
    (error,) = _read(path)
    assert str(error) == "conversations.json is encrypted in the zip archive"


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


def _chain(cid: str, *messages: dict[str, Any]) -> dict[str, Any]:
    """A conversation of one branch of these messages (``id`` each), the last current."""
    mapping: dict[str, Any] = {}
    parent = None
    for message in messages:
        key = message["id"]
        mapping[key] = {"id": key, "parent": parent, "children": [], "message": message}
        if parent is not None:
            mapping[parent]["children"].append(key)
        parent = key
    return {"id": cid, "mapping": mapping, "current_node": parent}


def _msg(key: str, role: str, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    author = {"role": role, "name": extra.pop("name", None)}
    return {"id": key, "author": author, "content": content, **extra}


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


def test_a_zip_listing_too_many_entries_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_files, "_MAX_ZIP_ENTRIES", 2)
    path = _zip(tmp_path / "many.zip", {"a": b"", "b": b"", "conversations.json": b"[]"})
    (error,) = _read(path)
    assert str(error).startswith("the zip archive lists 3 entries in ")
    assert not chatgpt.sniff(path, path.read_bytes()[:SNIFF_BYTES])


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


@pytest.mark.slow
def test_a_flood_of_whitespace_between_conversations_costs_neither_time_nor_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "conversations.json"
    with path.open("wb") as file:
        file.write(b"[" + json.dumps(_conversation("a", "one")).encode())
        for _ in range(64):
            file.write(b" \n" * (512 * 1024))  # 64 MiB of blank lines
        file.write(b"," + json.dumps(_conversation("b", "two")).encode() + b"]")
    tracemalloc.start()
    try:
        first, second = _read(path)
        assert isinstance(first, ForeignSession)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(second, ForeignSession) and second.provenance.original_id == "b"
    assert peak < 16 * 1024**2
    path.write_bytes(path.read_bytes()[:-1])  # and where it is cut short, the right line
    *_, error = _read(path)
    assert (
        str(error)
        == f"line {64 * 512 * 1024 + 1}: the file ends after a conversation, without the array's closing ]"
    )


def test_a_long_run_of_backslashes_is_read_in_linear_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each byte of a string is looked at once, however the reads cut it: a run of
    backslashes is never walked back over."""
    monkeypatch.setattr(chatgpt_files, "_READ", 4096)
    text = "\\" * 4_000_000
    path = _write_export(tmp_path / "conversations.json", [_conversation("c", text, "ok")])
    (session,) = _sessions(path)
    assert _message(session.events[1])["content"][0]["text"] == text


def test_a_file_of_nothing_but_damaged_conversations_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatgpt_conversations, "MAX_FAILED_IN_A_ROW", 5)
    path = tmp_path / "conversations.json"
    ok = json.dumps(_conversation("ok", "fine"))
    path.write_text("[" + ",".join(["1"] * 4 + [ok] + ["\n2"] * 100) + "]")
    results = _read(path)
    assert [type(r).__name__ for r in results] == ["ForeignImportError"] * 4 + [
        "ForeignSession"
    ] + ["ForeignImportError"] * 6
    assert str(results[-1]) == (
        "line 6: 5 conversations in a row could not be read: the rest of the file is not "
        "read (it is not a ChatGPT export, or it is badly damaged)"
    )

"""The ChatGPT export reader on damaged exports: each damaged conversation one error with
its line and the others read, a broken array one error, bounds (size, depth, whitespace,
backslashes) kept in bounded time and memory."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from core.importers import chatgpt
from core.importers.chatgpt import array as chatgpt_array
from core.importers.chatgpt import conversations as chatgpt_conversations
from core.importers.chatgpt import files as chatgpt_files
from core.importers.foreign import ForeignImportError, ForeignSession
from tests.importers.chatgpt_helpers import (
    DAMAGED,
    _conversation,
    _message,
    _pieces,
    _read,
    _sessions,
    _write_export,
)

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

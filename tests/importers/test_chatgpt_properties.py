"""Property tests of the ChatGPT export reader: any valid export (random trees of nodes with
a current_node, hostile ids and texts, compact or pretty-printed, plain or zipped, read in
reads of any size) reads back to the current branch's messages in order; a damaged
conversation (wrong types, deep nesting, a string past the bound, bad syntax, a cut end)
is one error naming a line inside it, and every other conversation still reads."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.importers import chatgpt
from core.importers.chatgpt import array as chatgpt_array
from core.importers.chatgpt import files as chatgpt_files
from core.importers.chatgpt import reader as chatgpt_reader
from core.importers.foreign import ForeignImportError, ForeignSession
from core.limits import MAX_JSON_DEPTH

_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Text as hostile as JSON can carry (no surrogate halves: a pair of them written apart
# is read back as its character, SPEC §4.1), weighted towards what a scanner could trip on.
_CHARS = st.sampled_from('"\\[]{},:\n\r\t \x00\x1b\u2028/') | st.characters(
    exclude_categories=["Cs"]
)
_TEXT = st.text(_CHARS, max_size=24)
_ROLES = ("user", "assistant", "assistant", "user", "null", "hidden", "system", "unknown")


@dataclass(frozen=True)
class _Generated:
    conversation: dict[str, Any]
    expected: list[tuple[str, str, str]]  # (event type, source kind, text) on the surface


@st.composite
def _conversations(draw: st.DrawFn, cid: str) -> _Generated:
    count = draw(st.integers(1, 12))
    keys = draw(st.lists(_TEXT, min_size=count, max_size=count, unique=True))
    parents: list[int | None] = [None]
    for i in range(1, count):
        parents.append(draw(st.one_of(st.integers(0, i - 1), st.none())))
    mapping: dict[str, Any] = {}
    roles, texts = [], []
    for i, key in enumerate(keys):
        role = draw(st.sampled_from(_ROLES))
        parts = draw(st.lists(_TEXT, min_size=1, max_size=3))
        roles.append(role)
        texts.append("\n".join(parts))
        parent = parents[i]
        node: dict[str, Any] = {
            "id": key,
            "parent": None if parent is None else keys[parent],
            "children": [keys[c] for c in range(count) if parents[c] == i],
            "message": None,
        }
        if role != "null":
            time = draw(st.one_of(st.none(), st.floats(0, 4e9), st.integers(0, 4_000_000_000)))
            node["message"] = {
                "id": key,
                "author": {"role": "system" if role == "hidden" else role, "name": None},
                "create_time": time,
                "content": {
                    "content_type": "tether_quote" if role == "unknown" else "text",
                    "parts": parts,
                },
                "metadata": {"is_visually_hidden_from_conversation": role == "hidden"},
                "recipient": "all",
            }
            if role == "unknown":
                node["message"]["author"]["role"] = "assistant"
        mapping[key] = node
    current = draw(st.integers(0, count - 1))
    branch: list[int] = []
    at: int | None = current
    while at is not None:
        branch.append(at)
        at = parents[at]
    expected = []
    for i in reversed(branch):
        if not texts[i] or roles[i] not in ("user", "assistant", "system"):
            continue
        kind = {"user": "user", "assistant": "model", "system": "plugin"}[roles[i]]
        event = "assistant/message" if roles[i] == "assistant" else "user/message"
        expected.append((event, kind, texts[i]))
    conversation = {
        "id" if draw(st.booleans()) else "conversation_id": cid,
        "title": draw(st.one_of(st.none(), _TEXT)),
        "create_time": draw(st.one_of(st.none(), st.floats(0, 4e9))),
        "current_node": keys[current],
        "mapping": mapping,
    }
    return _Generated(conversation, expected)


def _surface(session: ForeignSession) -> list[tuple[str, str, str]]:
    out = []
    for event in session.events:
        if event.surface_op is None:
            continue
        message = event.data if event.type == "user/message" else event.data["message"]
        (block,) = message["content"]
        out.append((event.type, message["source"]["kind"], block["text"]))
    return out


def _layout(pieces: list[str], sep: str) -> tuple[str, list[tuple[int, int]]]:
    """The export's text and each conversation's first and last line."""
    text, spans = "[" + sep, []
    for i, piece in enumerate(pieces):
        first = text.count("\n") + 1
        text += piece
        spans.append((first, text.count("\n") + 1))
        text += ("," + sep) if i + 1 < len(pieces) else sep
    return text + "]\n", spans


@st.composite
def _exports(draw: st.DrawFn) -> tuple[list[_Generated], str, list[tuple[int, int]]]:
    count = draw(st.integers(1, 4))
    generated = [draw(_conversations(f"conv-{i}")) for i in range(count)]
    indent = draw(st.sampled_from([None, 0, 1, 2]))
    ascii_only = draw(st.booleans())
    pieces = [json.dumps(g.conversation, indent=indent, ensure_ascii=ascii_only) for g in generated]
    text, spans = _layout(pieces, draw(st.sampled_from(["", "\n", " \r\n  "])))
    return generated, text, spans


@_SETTINGS
@given(
    export=_exports(),
    zipped=st.booleans(),
    read=st.sampled_from([1, 3, 64, 1 << 20]),
    window=st.sampled_from([1, 2, 7, 4096]),
)
def test_a_valid_export_reads_back_to_its_current_branches(
    tmp_path: Path,
    export: tuple[list[_Generated], str, list[tuple[int, int]]],
    zipped: bool,
    read: int,
    window: int,
) -> None:
    generated, text, _spans = export
    path = tmp_path / ("export.zip" if zipped else "conversations.json")
    if zipped:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("conversations.json", text)
    else:
        path.write_text(text, encoding="utf-8")
    with (
        mock.patch.object(chatgpt_files, "_READ", read),
        mock.patch.object(chatgpt_array, "_FIRST_WINDOW", window),
        mock.patch.object(chatgpt_array, "_LAST_WINDOW", max(window, 16)),
    ):
        results = list(chatgpt.read_sessions([path]))
    assert all(isinstance(r, ForeignSession) for r in results), results
    sessions: list[ForeignSession] = results  # type: ignore[assignment]
    assert [s.provenance.original_id for s in sessions] == [
        f"conv-{i}" for i in range(len(generated))
    ]
    for session, g in zip(sessions, generated, strict=True):
        assert _surface(session) == g.expected
        assert session.title == (g.conversation["title"] or None)
        # every node is in the log: on the surface or as a chatgpt/node event
        nodes = [e for e in session.events if e.type == "chatgpt/node"]
        assert len(nodes) + len(g.expected) == len(g.conversation["mapping"])
        times = [e.time for e in session.events]
        assert all(isinstance(t, int) and t >= 0 for t in times)


_WRONG_TYPES = [
    ("mapping", lambda c: c.update(mapping=[1])),
    ("mapping", lambda c: c.update(mapping=None)),
    ("create_time", lambda c: c.update(create_time="2024-01-01")),
    ("title", lambda c: c.update(title={"t": 1})),
    ("current_node", lambda c: c.update(current_node=False)),
    ("node", lambda c: c["mapping"].update({"extra": "not a node"})),
    ("message", lambda c: next(iter(c["mapping"].values())).update(message=[])),
    ("parent", lambda c: next(iter(c["mapping"].values())).update(parent=1.5)),
    ("children", lambda c: next(iter(c["mapping"].values())).update(children=[None])),
]


@_SETTINGS
@given(
    export=_exports(),
    data=st.data(),
    damage=st.sampled_from(["wrong-type", "deep", "huge-string", "syntax", "cut"]),
)
def test_a_damaged_conversation_is_one_error_inside_it_and_the_others_read(
    tmp_path: Path,
    export: tuple[list[_Generated], str, list[tuple[int, int]]],
    data: st.DataObject,
    damage: str,
) -> None:
    generated, _text, _spans = export
    conversations = [json.loads(json.dumps(g.conversation)) for g in generated]
    bad = (
        len(conversations) - 1
        if damage == "cut"
        else data.draw(st.integers(0, len(conversations) - 1))
    )
    target = conversations[bad]
    if damage == "wrong-type":
        _what, change = data.draw(st.sampled_from(_WRONG_TYPES))
        change(target)
    elif damage == "deep":
        target["moderation_results"] = "DEEP"
    elif damage == "huge-string":
        target["title"] = "x" * data.draw(st.integers(30_001, 60_000))
    indent = data.draw(st.sampled_from([None, 1]))
    pieces = [json.dumps(c, indent=indent) for c in conversations]
    if damage == "deep":  # nested as deep as no parser recursing once a level could read
        levels = data.draw(st.integers(MAX_JSON_DEPTH, 100_000))
        pieces[bad] = pieces[bad].replace('"DEEP"', "[" * levels + "]" * levels)
    if damage == "syntax":  # a key without its colon (no string holds '"key":' unescaped)
        key = data.draw(st.sampled_from(["mapping", "current_node"]))
        pieces[bad] = pieces[bad].replace(f'"{key}":', f'"{key}" ', 1)
    text, spans = _layout(pieces, "\n")
    if damage == "cut":
        start = text.rindex(pieces[bad])
        text = text[: data.draw(st.integers(start + 1, start + len(pieces[bad]) - 1))]
    path = tmp_path / "conversations.json"
    path.write_text(text, encoding="utf-8")
    with mock.patch.object(chatgpt_array, "MAX_CONVERSATION_BYTES", 30_000):
        results = list(chatgpt.read_sessions([path]))
    assert len(results) == len(conversations)
    for i, result in enumerate(results):
        if i == bad:
            assert isinstance(result, ForeignImportError), result
            assert result.file == str(path)
            first, last = spans[bad]
            if damage == "cut":
                assert result.line == text.count("\n") + 1
                assert f"starts on line {first}" in str(result)
            else:
                assert first <= result.line <= last, (result, spans[bad])
        else:
            assert isinstance(result, ForeignSession), result
            assert result.provenance.original_id == f"conv-{i}"
            assert _surface(result) == generated[i].expected


def test_a_lone_surrogate_and_control_characters_are_kept_as_written(tmp_path: Path) -> None:
    text = "\ud800 \x1b[2J <b>\x00"
    conversation = {
        "id": "\udfff-id",
        "mapping": {
            "n": {
                "id": "n",
                "parent": None,
                "children": [],
                "message": {
                    "id": "n",
                    "author": {"role": "user"},
                    "content": {"content_type": "text", "parts": [text]},
                },
            },
        },
        "current_node": "n",
    }
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conversation]))
    (session,) = chatgpt.read_sessions([path])
    assert isinstance(session, ForeignSession)
    assert session.provenance.original_id == "\udfff-id"
    assert _surface(session) == [("user/message", "user", text)]


@pytest.mark.parametrize("indent", [None, 2])
def test_many_conversations_are_read_one_at_a_time(tmp_path: Path, indent: int | None) -> None:
    """The reader hands each conversation over before it reads the next."""
    conversations: list[dict[str, Any]] = [
        {"id": f"c{i}", "mapping": {}, "current_node": None} for i in range(50)
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(conversations, indent=indent))
    reads = 0

    real = chatgpt_files._file_chunks

    def counted(file: Any, head: bytes) -> Any:
        nonlocal reads
        for chunk in real(file, head):
            reads += 1
            yield chunk

    with (
        mock.patch.object(chatgpt_files, "_READ", 16),
        mock.patch.object(chatgpt_reader, "_file_chunks", counted),
    ):
        sessions = chatgpt.read_sessions([path])
        first = next(sessions)
        assert isinstance(first, ForeignSession) and first.provenance.original_id == "c0"
        assert reads * 16 < path.stat().st_size / 10
        assert len(list(sessions)) == 49


_EXPORT = (Path(__file__).parent / "chatgpt" / "export.json").read_bytes()


def _zipped(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", data)
    return out.getvalue()


_ZIPPED = _zipped(_EXPORT)


@_SETTINGS
@given(
    base=st.sampled_from([_EXPORT, _ZIPPED]),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=3)), max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_any_damage_to_a_file_is_errors_never_a_crash(
    tmp_path: Path, base: bytes, edits: list[tuple[int, bytes]], cut: int | None
) -> None:
    """Bytes overwritten or the file cut anywhere, plain or zipped: the reader yields
    sessions and ``ForeignImportError``\\ s, and raises nothing."""
    data = bytearray(base)
    for at, new in edits:
        at %= len(data)
        data[at : at + len(new)] = new
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    path = tmp_path / ("export.zip" if base is _ZIPPED else "conversations.json")
    path.write_bytes(bytes(data))
    results = list(chatgpt.read_sessions([path]))
    assert all(isinstance(r, (ForeignSession, ForeignImportError)) for r in results)
    assert len([r for r in results if isinstance(r, ForeignSession)]) <= 2
    for result in results:
        if isinstance(result, ForeignImportError):
            assert result.file == str(path) and result.line >= 0


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(export=_exports(), extra=st.integers(0, 100_000))
def test_a_zip_bomb_around_any_export_is_one_error_and_nothing_imported(
    tmp_path: Path, export: tuple[list[_Generated], str, list[tuple[int, int]]], extra: int
) -> None:
    """Whatever the export, a member compressed past MAX_ZIP_RATIO is refused before a
    byte of it is decompressed (the floor under which a ratio is not looked at lowered
    from 16 MiB, so that the bomb stays small)."""
    _generated, text, _spans = export
    # blank space deflates a thousand times: this much makes any export a bomb
    padding = 200 * len(text.encode()) + 100_000 + extra
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", text[:-2] + " " * padding + "]\n")
    with mock.patch.object(chatgpt_files, "_RATIO_FLOOR", 64 * 1024):
        results = list(chatgpt.read_sessions([path]))
    (error,) = results
    assert isinstance(error, ForeignImportError) and error.file == str(path)
    assert "refused as a zip bomb" in str(error)

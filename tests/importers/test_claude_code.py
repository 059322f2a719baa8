"""The Claude Code transcript reader (``core.importers.claude_code``) on hand-made fixtures
(``claude_code/``, written from the format as Claude Code writes it): the main chain on
the surface, everything else log-only, one reply over several lines, sessions over
several files, titles, images, compaction, and what a damaged file gives."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.importers import bounds, claude_code
from core.importers.foreign import SNIFF_BYTES, ForeignSession
from tests.importers.claude_code_helpers import (
    FIXTURES,
    never_referenced,
    person_and_model_texts,
    read_all,
    snapshot_text,
    store_and_check,
    surface_texts,
)

PROJECT = FIXTURES / "projects" / "-home-ada-calc"
SID = "5b0c2f3e-1d4a-4c7e-9f10-aa11bb22cc33"
MAIN = PROJECT / f"{SID}.jsonl"


def _the_session() -> ForeignSession:
    sessions, errors = read_all(claude_code.find_files(FIXTURES))
    assert errors == []
    (session,) = sessions
    return session


def test_find_files_lists_transcripts_and_subagents_sorted() -> None:
    found = claude_code.find_files(FIXTURES)
    assert found == sorted(found)
    assert {p.relative_to(PROJECT).as_posix() for p in found} == {
        f"{SID}.jsonl",
        f"{SID}/subagents/agent-a1b2c3.jsonl",
        "agent-d4e5f6.jsonl",
    }


def test_find_files_does_not_follow_symlinks(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.jsonl").write_text("{}\n")
    (tmp_path / "p" / "link.jsonl").symlink_to(tmp_path / "p" / "a.jsonl")
    (tmp_path / "loop").symlink_to(tmp_path)
    assert claude_code.find_files(tmp_path) == [tmp_path / "p" / "a.jsonl"]


def test_default_root_honours_claude_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/srv/claude")
    assert claude_code.default_root() == Path("/srv/claude/projects")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", "/home/ada")
    assert claude_code.default_root() == Path("/home/ada/.claude/projects")


def test_a_claude_config_folder_is_searched_in_its_projects(tmp_path: Path) -> None:
    (tmp_path / "projects" / "p").mkdir(parents=True)
    (tmp_path / "projects" / "p" / "s.jsonl").write_text("{}\n")
    (tmp_path / "history.jsonl").write_text("{}\n")  # not a transcript
    assert claude_code.find_files(tmp_path) == [tmp_path / "projects" / "p" / "s.jsonl"]


def test_the_session_header_title_and_provenance() -> None:
    session = _the_session()
    assert session.provenance.as_json() == {"tool": "claude-code", "file": str(MAIN), "id": SID}
    assert session.cwd == "/home/ada/calc"
    assert session.created_at == 1_759_309_200_000  # 2025-10-01T09:00:00.000Z
    assert session.title == "Adding a calculator CLI"  # the summary pointing at u-0012
    assert session.files[0] == str(MAIN) and len(session.files) == 3


def test_the_main_chain_is_the_surface() -> None:
    assert surface_texts(_the_session()) == [
        ("user/message", "Add an `add` command to calc.py"),
        ("assistant/message", "I'll look at calc.py first."),  # 3 lines, one reply
        ("tool/result", ""),
        ("assistant/message", ""),
        ("tool/result", ""),
        ("assistant/message", "Done: `calc.py add 1 2` prints 3."),
        # the abandoned branch (u-0010, u-0011) and the sidechain are not here
        ("user/message", "Now add sub, and look at this:\n[image]"),
        ("assistant/message", "sub is added."),
        # the meta caveat is not here; the command and its output are, as plugin text
        ("user/message", "<command-name>/cost</command-name>\n<command-message>cost"
         "</command-message>\n<command-args></command-args>"),
        ("user/message", "<local-command-stdout>Total cost: $0.01</local-command-stdout>"),
        ("user/message", "Add mul"),
        ("assistant/message", 'API Error: 529 {"type":"error","error":{"type":"overloaded_error",'
         '"message":"Overloaded"}}'),
        ("user/message", "Add mul please"),
        ("assistant/message", ""),
        ("tool/result", ""),
        ("user/message", "[Request interrupted by user for tool use]"),
        # across the compact boundary (null parentUuid, logicalParentUuid u-0021)
        ("user/message", "This session is being continued from a previous conversation that "
         "ran out of context. The summary below covers the earlier portion of the "
         "conversation.\n\nAda asked for add, sub and mul."),
        ("user/message", "Thanks! What's left?"),
        ("assistant/message", "Only div is left."),
    ]  # fmt: skip


def test_sources_turns_and_steps() -> None:
    session = _the_session()
    rows = []
    for event in session.events:
        if event.type == "user/message":
            rows.append(("u", event.data["source"]["kind"]))
        elif event.surface_op is not None:
            rows.append((event.type[0], event.data["turn"], event.data["step"]))
    assert rows == [
        ("u", "user"),
        ("a", 0, 0), ("t", 0, 0), ("a", 0, 1), ("t", 0, 1), ("a", 0, 2),
        ("u", "user"), ("a", 1, 0),
        ("u", "plugin"), ("u", "plugin"),
        ("u", "user"), ("a", 2, 0),
        ("u", "user"), ("a", 3, 0), ("t", 3, 0), ("u", "plugin"),
        ("u", "plugin"), ("u", "user"), ("a", 4, 0),
    ]  # fmt: skip


def test_blocks_reasoning_tool_calls_results_and_unknown_blocks() -> None:
    session = _the_session()
    surface = [e for e in session.events if e.surface_op is not None]
    first = surface[1].data
    assert first["message"]["content"] == [
        {"type": "reasoning", "text": "The user wants an add command."},
        {"type": "text", "text": "I'll look at calc.py first."},
        {
            "type": "tool-call",
            "id": "toolu_01",
            "name": "Read",
            "arguments": '{"file_path":"/home/ada/calc/calc.py"}',
        },
    ]
    assert first["message"]["id"] == "u-0002"
    assert first["message"]["source"] == {
        "kind": "model",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5-20250929",
    }
    assert first["usage"] == {"input_tokens": 10, "output_tokens": 5}
    result = surface[4].data["message"]
    assert result["source"] == {"kind": "tool", "callId": "toolu_02"}
    assert result["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "toolu_02",
            "content": [{"type": "text", "text": "Exit code 2\nunknown command"}],
            "isError": True,
        }
    ]
    api_error = surface[11].data["message"]
    assert api_error["source"]["model"] == "<synthetic>"
    last = surface[-1].data["message"]["content"]
    assert last[1]["type"] == "claude-code/web_search_tool_result"  # kept, ignored by dsh
    assert last[1]["block"]["tool_use_id"] == "srvtoolu_1"


def test_everything_else_is_log_only_and_kept() -> None:
    session = _the_session()
    log_only = [e for e in session.events if e.surface_op is None]
    assert [e.type for e in log_only] == [
        "claude-code/summary",
        "claude-code/file-history-snapshot",
        "claude-code/progress",
        "claude-code/user",  # the abandoned branch
        "claude-code/assistant",
        "claude-code/user",  # the inline sidechain
        "claude-code/assistant",
        "claude-code/user",  # the meta caveat
        "claude-code/system",  # the compact boundary
        "claude-code/weird-new-type",
        "claude-code/last-prompt",
        "claude-code/user",  # subagents/agent-a1b2c3.jsonl
        "claude-code/assistant",
        "claude-code/user",  # agent-d4e5f6.jsonl
    ]
    assert log_only[3].data["message"]["content"] == "Now add sub (first try)"
    assert log_only[9].data["payloadish"] == {"a": 1}
    # every event has a time, in epoch ms, from its record or the one before
    times = [e.time for e in session.events]
    assert all(isinstance(t, int) for t in times)
    assert times[-1] == 1_759_309_310_000  # 2025-10-01T09:01:50Z


def test_image_data_is_never_kept() -> None:
    session = _the_session()
    text = json.dumps([dict(e.data) for e in session.events])
    assert "AAAAAAAAAAAAAAAAAAAA" not in text
    assert "[image]" in text


async def test_the_fixture_imports_replays_and_is_referenced_without_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _the_session()
    source = await store_and_check(session, tmp_path / "dsh.sqlite3")
    shown = capsys.readouterr().out
    assert SID in shown and "Only div is left." in shown
    text = snapshot_text(source)
    assert [(i["role"], i["text"]) for i in source["conversation"]] == person_and_model_texts(
        session
    )
    for hidden in never_referenced(session):
        assert hidden not in text
    assert "Subagent answer" not in text and "Abandoned answer." not in text


# --------------------------------------------------------------------------- sessions and files


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _user(uuid: str, parent: str | None, text: str, sid: str = "s1", **kw: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": sid,
        "type": "user",
        "uuid": uuid,
        "timestamp": "2025-01-01T00:00:00Z",
        "cwd": "/w",
        "message": {"role": "user", "content": text},
        **kw,
    }


def _assistant(uuid: str, parent: str | None, text: str, sid: str = "s1") -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": sid,
        "type": "assistant",
        "uuid": uuid,
        "timestamp": "2025-01-01T00:00:01.5Z",
        "message": {
            "id": f"msg-{uuid}",
            "role": "assistant",
            "model": "claude-opus-4-1",
            "content": [{"type": "text", "text": text}],
        },
    }


def test_a_session_resumed_across_files_is_one_session_without_duplicates(
    tmp_path: Path,
) -> None:
    first = [_user("a", None, "one"), _assistant("b", "a", "two")]
    second = [*first, _user("c", "b", "three"), _assistant("d", "c", "four")]
    a = _write(tmp_path / "p" / "s1.jsonl", first)
    b = _write(tmp_path / "p" / "other.jsonl", second)
    sessions, errors = read_all([b, a])
    assert errors == []
    (session,) = sessions
    assert session.provenance.file == str(a)  # the file named after the session first
    assert person_and_model_texts(session) == [
        ("user", "one"),
        ("assistant", "two"),
        ("user", "three"),
        ("assistant", "four"),
    ]
    assert len(session.events) == 4


def test_one_file_with_several_sessions_gives_each(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mixed.jsonl",
        [
            _user("a", None, "first", sid="s1"),
            {"type": "summary", "summary": "Some title", "leafUuid": "zz"},
            _user("b", "a", "second", sid="s2"),  # its parent is in another session
            _assistant("c", "b", "reply", sid="s2"),
        ],
    )
    sessions, errors = read_all([path])
    assert errors == []
    assert [(s.provenance.original_id, person_and_model_texts(s)) for s in sessions] == [
        ("s1", [("user", "first")]),
        ("s2", [("user", "second"), ("assistant", "reply")]),
    ]
    assert sessions[0].title == "Some title"  # no sessionId: the file's first session's
    assert sessions[1].title is None


def test_files_without_a_conversation_give_no_session(tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    summary = _write(tmp_path / "s.jsonl", [{"type": "summary", "summary": "x", "leafUuid": "y"}])
    orphan = _write(
        tmp_path / "agent-1.jsonl", [_user("a", None, "sub", sid="gone", isSidechain=True)]
    )
    assert read_all([empty, summary, orphan]) == ([], [])


def test_records_without_uuids_chain_in_file_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "plain.jsonl",
        [
            {"type": "user", "timestamp": "2024-01-01T10:00:00Z", "message": {"content": "hi"}},
            {"type": "assistant", "message": {"model": "m", "content": [{"type": "text", "text": "yo"}]}},
            {"type": "user", "message": {"content": "bye"}},
        ],
    )  # fmt: skip
    ((session,), errors) = read_all([path])
    assert errors == [] and session.provenance.original_id == "plain"
    assert person_and_model_texts(session) == [("user", "hi"), ("assistant", "yo"), ("user", "bye")]
    again = read_all([path])[0][0]
    assert [e.data for e in again.events] == [e.data for e in session.events]  # stable ids


def test_a_custom_title_wins_and_titles_are_one_bounded_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s1.jsonl",
        [
            {"type": "summary", "summary": "The summary", "leafUuid": "a"},
            _user("a", None, "hi"),
            {"type": "custom-title", "customTitle": "Mine\n\tand  " + "x" * 500, "sessionId": "s1"},
        ],
    )
    ((session,), _) = read_all([path])
    assert session.title is not None
    assert session.title.startswith("Mine and xxx") and len(session.title) == 200


def test_a_528_kb_line_with_a_screenshot_is_read(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    image["source"]["data"] = "iVBORw0KGgo" + "Q" * 540_000  # type: ignore[index]
    record = _user("b", "a", "")
    record["message"]["content"] = [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "shot"}, image]},
        {"type": "text", "text": "see above"},
    ]  # fmt: skip
    path = _write(tmp_path / "s1.jsonl", [_user("a", None, "take one"), record])
    assert path.stat().st_size > 528_000
    ((session,), errors) = read_all([path])
    assert errors == []
    result = session.events[1].data["message"]["content"][0]["content"]
    assert result == [{"type": "text", "text": "shot"}, {"type": "text", "text": "[image]"}]
    assert sum(len(json.dumps(dict(e.data))) for e in session.events) < 2_000


# --------------------------------------------------------------------------- sniffing


def test_sniff_knows_claude_code_and_nothing_else(tmp_path: Path) -> None:
    assert claude_code.sniff(MAIN, MAIN.read_bytes()[:SNIFF_BYTES])
    big = json.dumps(_user("a", None, "x" * 200_000)).encode()
    assert claude_code.sniff(tmp_path / "x.jsonl", big[:SNIFF_BYTES])  # cut in its first line
    plain = b'{"type":"user","timestamp":"2024-01-01T10:00:00Z","message":{"content":"hello"}}\n'
    assert claude_code.sniff(tmp_path / "x.jsonl", plain)
    others = [
        b'{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}\n',
        b'{"type":"session","id":"s","created_at":1,"cwd":null}\n{"seq":0,"type":"user/message"}\n',
        b'{"type":"session","id":"s","createdAt":1,"version":3}\n',
        b'[{"title":"t","mapping":{},"current_node":"n"}]',
        b"\x28\xb5\x2f\xfd\x00\x00",
        b"",
        b"not json\n",
        b'{"type":"response_item","payload":{"type":"message"}}\n',
    ]
    for head in others:
        assert not claude_code.sniff(tmp_path / "x.jsonl", head), head


# --------------------------------------------------------------------------- damage


def _one_error(paths: list[Path]) -> tuple[str, int, str | None, str]:
    sessions, errors = read_all(paths)
    assert sessions == []
    (error,) = errors
    return error.file, error.line, error.original_id, str(error)


def test_a_bad_line_names_file_and_line_and_spoils_its_session(tmp_path: Path) -> None:
    good = [_user("a", None, "one"), _assistant("b", "a", "two")]
    cases: dict[str, tuple[str, str]] = {
        "notjson": ("{nope", "invalid JSON"),
        "array": ("[1, 2]", "expected a JSON object"),
        "content": (json.dumps({**_user("c", "b", ""), "message": {"content": 5}}), "content"),
        "message": (json.dumps({**_user("c", "b", ""), "message": "error"}), "message object"),
        "block": (json.dumps({**_user("c", "b", ""), "message": {"content": ["wow"]}}), "block"),
        "uuid": (json.dumps({**_user("c", "b", "x"), "uuid": 7}), "uuid"),
        "parent": (json.dumps({**_user("c", "b", "x"), "parentUuid": ["b"]}), "parentUuid"),
        "sidechain": (json.dumps({**_user("c", "b", "x"), "isSidechain": "no"}), "isSidechain"),
        "typeless": (json.dumps({"silly": "this"}), "string type"),
        "tool": (
            json.dumps(
                {**_user("c", "b", ""), "message": {"content": [{"type": "tool_use", "id": 1}]}}
            ),
            "tool_use block",
        ),
        "deep": (json.dumps({"type": "progress", "sessionId": "s1", "data": [[[[[[[[1]]]]]]]] * 1})
                 .replace("[1]", "[" * 80 + "1" + "]" * 80), "deeper"),
        "deeper": ('{"type":"x","d":' + "[" * 100_000 + "]" * 100_000 + "}", "deeper"),
        "dupkey": ('{"type":"user","type":"assistant"}', "invalid JSON"),
        "nan": ('{"type":"progress","sessionId":"s1","data":NaN}', "NaN is not a JSON number"),
        "huge-number": ('{"type":"progress","sessionId":"s1","data":1e999}', "too large"),
        "huge-mantissa": ('{"type":"progress","sessionId":"s1","data":' + "9" * 400 + ".5}", "too large"),
        "infinite-input": (
            json.dumps(_assistant("c", "b", "x")).replace(
                '{"type": "text", "text": "x"}',
                '{"type": "tool_use", "id": "t", "name": "n", "input": {"x": -Infinity}}',
            ),
            "-Infinity is not a JSON number",
        ),
    }  # fmt: skip
    for name, (line, words) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(
            "".join(json.dumps(r) + "\n" for r in good)
            + line
            + "\n"
            + json.dumps(_user("d", "c", "after"))
            + "\n"
        )
        file, number, original_id, text = _one_error([path])
        assert (file, number, original_id) == (str(path), 3, "s1"), name
        assert words in text and text.startswith("line 3: "), (name, text)


def test_a_torn_last_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text(
        json.dumps(_user("a", None, "one")) + "\n" + json.dumps(_user("b", "a", "x"))[:30]
    )
    file, line, _, text = _one_error([path])
    assert (file, line) == (str(path), 2) and "ends in the middle of a record" in text


def test_a_line_over_the_bound_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_LOG_LINE_BYTES", 10_000)
    path = _write(tmp_path / "s1.jsonl", [_user("a", None, "one"), _user("b", "a", "x" * 20_000)])
    file, line, original_id, text = _one_error([path])
    assert (file, line, original_id) == (str(path), 2, "s1") and "longer than" in text


def test_a_bad_file_spoils_only_its_sessions(tmp_path: Path) -> None:
    good = _write(tmp_path / "g.jsonl", [_user("a", None, "fine", sid="good")])
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps(_user("x", None, "s", sid="bad")) + "\n\xff\n")
    bad.write_bytes(bad.read_bytes().replace("\xff".encode(), b"\xff"))
    subagent = _write(
        tmp_path / "agent-x.jsonl", [_user("z", None, "sub", sid="good", isSidechain=True)]
    )
    subagent.write_text(subagent.read_text() + "{torn")
    sessions, errors = read_all([good, bad, subagent])
    assert sessions == []
    assert sorted((e.original_id, e.file, e.line) for e in errors) == [
        ("bad", str(bad), 2),
        ("good", str(subagent), 2),  # the subagent's file is part of "good"
    ]


def test_a_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    file, line, original_id, text = _one_error([fifo])
    assert (file, line, original_id) == (str(fifo), 0, "f") and "regular file" in text


def test_a_file_that_only_quotes_a_session_id_is_not_one_of_its_files(tmp_path: Path) -> None:
    quoting = {"type": "x-note", "about": {"sessionId": "s1"}}  # no sessionId of its own
    other = _write(tmp_path / "s2.jsonl", [_user("q", None, "mine", sid="s2"), quoting])
    own = _write(tmp_path / "s1.jsonl", [_user("a", None, "hi")])
    sessions, errors = read_all([other, own])
    assert errors == []
    assert [(s.provenance.original_id, s.files) for s in sessions] == [
        ("s2", (str(other),)),
        ("s1", (str(own),)),
    ]


def _peak_of_reading(root: Path) -> tuple[int, int]:
    """Sessions read from ``root`` (each dropped when the next comes) and the peak of
    Python allocations meanwhile."""
    import tracemalloc

    files = claude_code.find_files(root)
    tracemalloc.start()
    try:
        count = sum(1 for _ in claude_code.read_sessions(files))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


def test_memory_is_bounded_by_one_session_not_the_folder(tmp_path: Path) -> None:
    import random

    from tests.benchmarks.bench_import_claude import write_session

    peaks = []
    for sessions in (3, 12):
        root = tmp_path / str(sessions) / "projects" / "p"
        root.mkdir(parents=True)
        rng = random.Random(1)
        for n in range(sessions):
            sid = f"{n:08x}-0000-4000-8000-000000000000"
            write_session(root / f"{sid}.jsonl", sid, 300_000, rng)
        count, peak = _peak_of_reading(tmp_path / str(sessions))
        assert count == sessions
        peaks.append(peak)
    assert peaks[1] < peaks[0] * 1.5, peaks


def test_two_files_of_one_name_without_session_ids_are_two_sessions(tmp_path: Path) -> None:
    paths = []
    for folder, text in (("a", "first"), ("b", "second")):
        record = {"type": "user", "message": {"content": text}}
        paths.append(_write(tmp_path / folder / "session.jsonl", [record]))
    sessions, errors = read_all(paths)
    assert errors == []
    assert [
        (s.provenance.original_id, s.provenance.file, person_and_model_texts(s)) for s in sessions
    ] == [
        ("session", str(paths[0]), [("user", "first")]),
        ("session", str(paths[1]), [("user", "second")]),
    ]

"""``dsh import`` with sessions of other tools, through the real CLI entry on a real SQLite
file (and one run on PostgreSQL): what each file is, ``--from``, a tool's own folder,
incremental re-import, taken ids, failures and the all-or-nothing rule. The readers are
the toy ones of ``tests.importers.toy_foreign`` in place of Claude Code's, Codex's and
ChatGPT's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from core.importers.foreign_import import fallback_id
from tests.cli.conftest import Run
from tests.importers import toy_foreign
from tests.importers.toy_foreign import header_line, message, toy_file
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url

CREATED = 1_700_000_000_000


@pytest.fixture(autouse=True)
def toy_readers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    toy_foreign.install(monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        message("user" if i % 2 == 0 else "assistant", f"word{i}", CREATED + i)
        for i in range(start, n)
    ]


def claude(path: Path, sid: str, n: int, **more: Any) -> Path:
    return toy_file(path, [header_line("claude-code", sid, CREATED, **more), *chat(n)])


def dsh_export(path: Path, sid: str) -> Path:
    text = json.dumps({"type": "session", "id": sid, "created_at": CREATED, "cwd": None})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


def test_a_tool_file_is_recognised_imported_and_shown(dsh: Run, tmp_path: Path) -> None:
    source = claude(tmp_path / "s.jsonl", "cc-1", 3, title="Fix the parser", cwd="/p")
    result = dsh("import", str(source))
    assert result.code == 0, result
    assert result.out.splitlines() == [
        f"imported: {source} → cc-1",
        "1 imported, 0 updated, 0 unchanged, 0 conflicting (not merged), 0 failed, "
        "of 1 Claude Code session",
    ]
    listed = dsh("sessions")
    assert "cc-1" in listed.out and "Fix the parser" in listed.out
    shown = dsh("show", "Fix the parser")
    assert shown.code == 0 and "word2" in shown.out
    events = dsh("show", "cc-1", "--json").json()
    assert events[0]["type"] == "session/source"
    assert events[0]["data"] == {"tool": "claude-code", "file": str(source), "id": "cc-1"}
    found = dsh("search", "word1", "--json")
    assert found.code == 0 and "cc-1" in found.out


def test_re_import_is_incremental_and_an_edited_source_is_a_conflict(
    dsh: Run, tmp_path: Path
) -> None:
    source = claude(tmp_path / "s.jsonl", "cc-1", 2)
    assert dsh("import", str(source)).code == 0
    claude(source, "cc-1", 5)
    grown = dsh("import", str(source))
    assert grown.code == 0 and grown.out.splitlines()[0] == (
        f"updated (3 new events): {source} → cc-1"
    )
    same = dsh("import", str(source))
    assert same.code == 0 and same.out.splitlines()[0] == f"unchanged: {source} → cc-1"
    events = dsh("show", "cc-1", "--json").json()
    # the source event, the title (the first request's) and five messages, nothing twice
    types = [e["type"] for e in events]
    assert types[0] == "session/source" and types.count("session/title") == 1
    assert len(events) == 7
    toy_file(source, [header_line("claude-code", "cc-1", CREATED), message("user", "new", 1)])
    edited = dsh("import", str(source))
    assert edited.code == 1
    assert edited.out.splitlines()[0] == (
        f"conflict: {source} → cc-1: changed at the source since it was imported; not merged"
    )
    assert len(dsh("show", "cc-1", "--json").json()) == 7


def test_a_taken_id_gets_the_fallback_id_every_time(dsh: Run, tmp_path: Path) -> None:
    other = dsh_export(tmp_path / "mine.jsonl", "cc-1")
    assert dsh("import", str(other)).code == 0  # dsh's own session holds the id
    source = claude(tmp_path / "s.jsonl", "cc-1", 2)
    fallback = fallback_id("claude-code", "cc-1")
    first = dsh("import", str(source))
    assert first.out.splitlines()[0] == f"imported: {source} → {fallback}"
    claude(source, "cc-1", 3)
    again = dsh("import", str(source))
    assert again.out.splitlines()[0] == f"updated (1 new event): {source} → {fallback}"


def test_a_folder_holds_every_format_at_once(dsh: Run, tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    claude(root / "a" / "one.jsonl", "cc-1", 2)
    toy_file(root / "b" / "rollout.jsonl", [header_line("codex", "cx-1", CREATED), *chat(2)])
    dsh_export(root / "c" / "export.jsonl", "dsh-1")
    conversations = [
        {"header": header_line("chatgpt", "g-1", CREATED, title="Plan"), "lines": chat(2)},
        {"header": header_line("chatgpt", "g-2", CREATED), "lines": [{"role": "x"}]},
    ]
    (root / "d").mkdir()
    (root / "d" / "conversations.json").write_text(json.dumps(conversations))
    result = dsh("import", str(root))
    assert result.code == 1, result  # one ChatGPT conversation failed
    lines = result.out.splitlines()
    assert "imported: c/export.jsonl → dsh-1" in lines
    assert "imported: a/one.jsonl → cc-1" in lines
    assert "imported: b/rollout.jsonl → cx-1" in lines
    assert "imported: d/conversations.json → g-1" in lines
    assert (
        "failed: d/conversations.json:2: not a toy message (ChatGPT session g-2); nothing of it imported"
    ) in lines
    assert lines[-1] == (
        "1 imported, 0 updated, 0 unchanged, 0 conflicting (not merged), 1 failed, "
        "of 2 ChatGPT sessions"
    )
    assert "g-2" not in dsh("sessions").out
    again = dsh("import", str(root))
    assert "unchanged: a/one.jsonl → cc-1" in again.out.splitlines()
    assert "already present (same events, skipped): c/export.jsonl → dsh-1" in again.out


def test_from_restricts_to_one_format(dsh: Run, tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    source = claude(root / "one.jsonl", "cc-1", 2)
    toy_file(root / "two.jsonl", [header_line("codex", "cx-1", CREATED), *chat(2)])
    only = dsh("import", str(root), "--from", "codex")
    assert only.code == 0 and "cx-1" in only.out and "cc-1" not in only.out
    wrong = dsh("import", str(source), "--from", "codex")
    assert wrong.code == 1 and wrong.out == ""
    assert wrong.err.strip() == (
        f"dsh: error: {source} is not a Codex session file (--from codex); nothing imported"
    )
    native = dsh("import", str(source), "--from", "dsh")
    assert native.code == 1
    assert "is a Claude Code session file, not a dsh export" in native.err
    assert len(native.err.strip().splitlines()) == 1
    export = dsh_export(tmp_path / "e.jsonl", "dsh-1")
    assert dsh("import", str(export), "--from", "claude-code").code == 1
    assert dsh("import", str(export), "--from", "reference").code == 1
    ok = dsh("import", str(export), "--from", "dsh")
    assert ok.code == 0 and ok.out.strip() == "dsh-1"


def test_a_tools_own_folder_is_read_without_a_path(
    dsh: Run, tmp_path: Path, toy_readers: Path
) -> None:
    missing = dsh("import", "--from", "claude-code")
    assert missing.code == 1 and len(missing.err.strip().splitlines()) == 1
    assert f"{toy_readers / '.toy-claude'} does not exist" in missing.err
    claude(toy_readers / ".toy-claude" / "proj" / "s.jsonl", "cc-1", 2)
    found = dsh("import", "--from", "claude-code")
    assert found.code == 0 and found.out.splitlines()[0] == "imported: proj/s.jsonl → cc-1"


def test_a_path_is_needed_otherwise(
    dsh: Run, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for args in (("--from", "chatgpt"), ("--from", "dsh"), ()):
        with pytest.raises(SystemExit) as exited:
            dsh("import", *args)
        assert exited.value.code == 2
        assert "give a FILE or DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        dsh("import", "-", "--from", "codex")


def test_a_bad_line_names_file_and_line_and_stores_nothing_of_that_session(
    dsh: Run, tmp_path: Path
) -> None:
    root = tmp_path / "logs"
    claude(root / "good.jsonl", "cc-1", 2)
    bad = root / "bad\x1b[31m.jsonl"
    toy_file(bad, [header_line("claude-code", "cc-2", CREATED), *chat(3)])
    bad.write_text(bad.read_text() + '{"role": "user", "te\n')
    result = dsh("import", str(root))
    assert result.code == 1
    assert "\x1b" not in result.out
    assert (
        "failed: bad\\x1b[31m.jsonl:5: invalid JSON (Claude Code session cc-2); nothing of it imported"
        in (result.out.splitlines())
    )
    assert "imported: good.jsonl → cc-1" in result.out
    listed = dsh("sessions")
    assert "cc-1" in listed.out and "cc-2" not in listed.out


def test_a_session_the_store_refuses_is_stored_not_at_all(dsh: Run, tmp_path: Path) -> None:
    source = toy_file(
        tmp_path / "s.jsonl",
        [header_line("codex", "cx-1", CREATED), *chat(3), {"bad-event": True, "time": 9}],
    )
    result = dsh("import", str(source))
    assert result.code == 1 and result.out.startswith(f"failed: {source}: ")
    assert "cx-1" not in dsh("sessions").out


def test_hostile_names_titles_and_ids_are_escaped(dsh: Run, tmp_path: Path) -> None:
    source = toy_file(
        tmp_path / "x\x07y.jsonl",
        [
            header_line("claude-code", "id\x1b]0;pwn\x07", CREATED, title="[bold]t\x1b[2J"),
            *chat(1),
        ],
    )
    result = dsh("import", str(source))
    assert result.code == 0 and "\x1b" not in result.out and "\x07" not in result.out
    sid = fallback_id("claude-code", "id\x1b]0;pwn\x07")
    assert result.out.splitlines()[0].endswith(f"→ {sid}")
    assert "\x1b" not in dsh("sessions").out


def test_an_empty_folder_says_so(dsh: Run, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = dsh("import", str(tmp_path / "empty"))
    assert result.code == 1 and "no session logs" in result.out
    assert "nor sessions of Claude Code, Codex or ChatGPT" in result.out


def test_on_postgres_too(dsh: Run, tmp_path: Path, pg_cluster: Cluster) -> None:
    with pg_schema_url(pg_cluster) as url:
        source = claude(tmp_path / "s.jsonl", "cc-1", 2, title="On the server")
        first = dsh("import", str(source), db=url)  # type: ignore[arg-type]
        assert first.code == 0, first
        claude(source, "cc-1", 4, title="On the server")
        again = dsh("import", str(source), db=url)  # type: ignore[arg-type]
        assert again.out.splitlines()[0] == f"updated (2 new events): {source} → cc-1"
        listed = dsh("sessions", db=url)  # type: ignore[arg-type]
        assert "On the server" in listed.out


def test_a_folder_shows_a_progress_bar_on_a_terminal(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "d"
    claude(root / "a.jsonl", "cc-1", 2)
    claude(root / "b\x1b[1m.jsonl", "cc-2", 2)
    dsh_export(root / "c.jsonl", "dsh-1")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    result = dsh("import", str(root))
    assert result.code == 0, result
    assert "[....................] 0/3 c.jsonl" in result.err
    assert "[#############.......] 2/3 a.jsonl" in result.err
    assert "[####################] 3/3" in result.err
    assert "b\\x1b[1m.jsonl" in result.err and "\x1b[1m" not in result.err


def test_an_empty_file_a_tool_found_goes_to_its_reader(dsh: Run, tmp_path: Path) -> None:
    root = tmp_path / ".toy-claude"
    claude(root / "p" / "a.jsonl", "cc-1", 2)
    (root / "p" / "empty.jsonl").write_bytes(b"")
    result = dsh("import", str(root))
    lines = result.out.splitlines()
    assert (
        "failed: p/empty.jsonl:1: the file is empty (Claude Code file); nothing of it imported"
        in lines
    )
    assert not any(line.startswith("rejected") for line in lines)
    assert "imported: p/a.jsonl → cc-1" in lines


def test_a_relative_path_is_recorded_whole_and_shown_as_given(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude(tmp_path / "logs" / "s.jsonl", "cc-1", 2)
    monkeypatch.chdir(tmp_path)
    result = dsh("import", "logs/s.jsonl")
    assert result.out.splitlines()[0] == "imported: logs/s.jsonl → cc-1"
    source = dsh("show", "cc-1", "--json").json()[0]
    assert source["data"]["file"] == str(tmp_path / "logs" / "s.jsonl")
    again = dsh("import", "logs")
    assert again.out.splitlines()[0] == "unchanged: s.jsonl → cc-1"

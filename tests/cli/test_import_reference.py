"""``dsh import FILE|DIR`` with reference (deepseek-harness) logs, and
``dsh export --format reference``: through the real CLI entry, on a real SQLite file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

from core.jsoncodec import dumps_js
from tests.cli.conftest import Run

CREATED = 1_785_000_000_000
HEADER = {"type": "session", "version": 0, "id": "ref-1", "createdAt": CREATED, "cwd": "/w"}


def log(*records: Any, header: dict[str, Any] | None = None) -> bytes:
    lines = [header or HEADER, *records]
    return "".join(dumps_js(r) + "\n" for r in lines).encode()


def msg(seq: int, text: str, kind: str = "user/message") -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    data = {"id": f"m{seq}", "role": "user", "content": content, "source": {"kind": "user"}}
    return {"type": kind, "seq": seq, "time": CREATED + seq, "data": data, "surfaceOp": "append"}


def conversation() -> list[dict[str, Any]]:
    """A turn as the reference writes it: unknown types, a packed text row, a reply."""
    reply = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello there"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return [
        {"type": "turn/start", "seq": 0, "time": CREATED, "data": {"turn": 1}},
        msg(1, "hi \x1b[31m[bold]you[/bold]"),
        {"type": "step/start", "seq": 2, "time": CREATED + 2, "data": {"turn": 1, "step": 1}},
        {
            "type": "text-chunks",
            "seq0": 3,
            "time0": CREATED + 3,
            "data": {
                "turn": 1,
                "step": 1,
                "index": 0,
                "dt": [1, 1],
                "texts": ["Hel", "lo", " there"],
            },
        },
        {
            "type": "assistant/message",
            "seq": 6,
            "time": CREATED + 6,
            "data": {"turn": 1, "step": 1, "message": reply},
            "sourceEventSeqs": [3, 4, 5],
            "surfaceOp": "append",
        },
        {"type": "approval/asked", "seq": 7, "time": CREATED + 7, "data": {"tool": "<b>bash</b>"}},
        {"type": "turn/end", "seq": 8, "time": CREATED + 8, "data": {"turn": 1}},
    ]


def test_a_reference_log_imports_shows_and_exports_back(dsh: Run, tmp_path: Path) -> None:
    source = tmp_path / "session.jsonl"
    source.write_bytes(log(*conversation()))
    imported = dsh("import", str(source))
    assert imported.code == 0 and imported.out.strip() == "ref-1"
    shown = dsh("show", "ref-1")
    assert shown.code == 0 and "Hello there" in shown.out and "\x1b" not in shown.out
    events = dsh("show", "ref-1", "--json").json()
    assert [e["seq"] for e in events] == list(range(10))
    assert events[3]["data"]["chunk"] == {"type": "text-delta", "index": 0, "text": "Hel"}
    assert events[9]["type"] == "reference/session"
    out = tmp_path / "back.jsonl"
    assert dsh("export", "ref-1", "--format", "reference", "-o", str(out)).code == 0
    assert out.read_bytes() == source.read_bytes()


def test_reimporting_the_same_log_is_skipped_and_a_different_one_never_overwrites(
    dsh: Run, tmp_path: Path
) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(log(msg(0, "one")))
    assert dsh("import", str(source)).code == 0
    again = dsh("import", str(source))
    assert again.code == 0 and "already present" in again.err
    other = tmp_path / "b.jsonl"
    other.write_bytes(log(msg(0, "two")))
    clash = dsh("import", str(other))
    assert clash.code == 1 and "already exists with different events" in clash.err
    assert "one" in dsh("show", "ref-1").out and "two" not in dsh("show", "ref-1").out


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (log(msg(0, "a"), msg(1, "b"))[:-7], "line 3: the log ends in the middle of a record"),
        (b"\x89PNG\r\n\x1a\n", "line 1: not valid UTF-8"),
        (b'{"hello": 1}\n', "line 1: the first line must be the session header"),
    ],
)
def test_a_bad_file_is_rejected_with_file_and_line_and_nothing_stored(
    dsh: Run, tmp_path: Path, raw: bytes, words: str
) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(raw)
    result = dsh("import", str(source))
    assert result.code == 1 and str(source) in result.err and words in result.err
    assert "nothing imported" in result.err
    assert dsh("sessions", "--json").json() == []


def test_a_directory_imports_every_log_and_sums_up(dsh: Run, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "proj" / "s2").mkdir(parents=True)
    (root / "skip").mkdir()
    (root / "session.jsonl").write_bytes(log(*conversation()))  # files before folders
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = [log(header={**HEADER, "id": "ref-2"}), (dumps_js(msg(0, "zipped")) + "\n").encode()]
    zipped = b"".join(compressor.compress(f) for f in frames)
    (root / "proj" / "s2" / "session.jsonl.zstd").write_bytes(zipped)
    (root / "proj" / "copy.jsonl").write_bytes(log(*conversation()))  # same: skipped
    (root / "proj" / "clash.jsonl").write_bytes(log(msg(0, "other")))  # same id: conflict
    bad = bytearray(zipped)
    bad[-2] ^= 1
    (root / "proj" / "damaged.jsonl.zstd").write_bytes(bytes(bad))
    (root / "skip" / "notes.txt").write_text("not a log")
    result = dsh("import", str(root))
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[-1] == (
        "2 imported, 1 already present, 1 conflicting (not overwritten), 1 rejected, of 5 logs"
    )
    assert lines[0] == "imported: session.jsonl → ref-1"
    assert "imported: proj/s2/session.jsonl.zstd → ref-2" in lines
    assert "already present (same events, skipped): proj/copy.jsonl → ref-1" in lines
    assert any(
        x.startswith("conflict: proj/clash.jsonl: session ref-1 already exists") for x in lines
    )
    assert any(
        x.startswith("rejected: proj/damaged.jsonl.zstd: line 2: Zstandard frame 2")
        and "checksum mismatch" in x
        for x in lines
    )
    ids = {s["id"] for s in dsh("sessions", "--json").json()}
    assert ids == {"ref-1", "ref-2"}
    assert "zipped" in dsh("show", "ref-2").out
    assert "Hello there" in dsh("show", "ref-1").out


def test_a_directory_shows_a_progress_bar_on_a_terminal(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_bytes(log(msg(0, "a")))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    result = dsh("import", str(tmp_path / "d"))
    assert result.code == 0
    assert "[....................] 0/1 a.jsonl" in result.err
    assert "[####################] 1/1" in result.err


def test_an_empty_directory_says_so(dsh: Run, tmp_path: Path) -> None:
    result = dsh("import", str(tmp_path))
    assert result.code == 1 and "no session logs (*.jsonl, *.jsonl.zstd, *.jsonl.zst)" in result.out


def test_a_session_born_in_dsh_exports_as_a_reference_log(dsh: Run, tmp_path: Path) -> None:
    sid = dsh("new", "--cwd", "/here").out.strip()
    dsh("rename", sid, "A title")
    out = dsh("export", sid, "--format", "reference").out.splitlines()
    header = json.loads(out[0])
    assert header["type"] == "session" and header["id"] == sid and header["cwd"] == "/here"
    assert header["version"] == 0 and header["delegationDepth"] == 0
    assert json.loads(out[1])["type"] == "session/title" and json.loads(out[1])["seq"] == 0
    reimport = tmp_path / "r.jsonl"
    reimport.write_text("\n".join(out) + "\n")
    assert dsh("import", str(reimport), db=tmp_path / "other.sqlite3").code == 0


def test_hostile_ids_cwds_and_text_are_kept_exactly_and_shown_escaped(
    dsh: Run, tmp_path: Path
) -> None:
    sid = "evil\x1b]0;owned\x07\u202e\ud800"
    header = {**HEADER, "id": sid, "cwd": "/tmp/\x1b[2J"}
    record = msg(0, "[red]x[/red] \x1b[5m\ud83d")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "evil\x1b[1m.jsonl").write_bytes(log(record, header=header))
    result = dsh("import", str(tmp_path / "logs"))
    assert result.code == 0 and "\x1b" not in result.out and "\\x1b" in result.out
    listed = dsh("sessions", "--json").json()
    assert [(s["id"], s["cwd"]) for s in listed] == [(sid, "/tmp/\x1b[2J")]
    shown = dsh("show", sid)
    assert shown.code == 0 and "[red]x[/red]" in shown.out and "\x1b" not in shown.out
    out = tmp_path / "back.jsonl"
    assert dsh("export", sid, "--format", "reference", "-o", str(out)).code == 0
    assert out.read_bytes() == log(record, header=header)


def test_a_directory_also_takes_dsh_exports(dsh: Run, tmp_path: Path) -> None:
    sid = dsh("new", "--cwd", "/c").out.strip()
    (tmp_path / "d").mkdir()
    assert dsh("export", sid, "--format", "json", "-o", str(tmp_path / "d" / "x.jsonl")).code == 0
    (tmp_path / "d" / "r.jsonl").write_bytes(log(msg(0, "hello")))
    result = dsh("import", str(tmp_path / "d"), db=tmp_path / "other.sqlite3")
    assert result.code == 0
    assert result.out.splitlines()[-1].startswith("2 imported, 0 already present")

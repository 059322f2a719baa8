"""Hostile log files (issue 31 §1, §2, §4): ``dsh import`` and ``dsh replay FILE`` read a
log streamed and bounded, refuse a decompression bomb, an amplifying packed row or too many
events in one clear line (nothing stored), and read only regular files."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from core.importers import bounds
from core.importers.bounds import MAX_LOG_LINE_BYTES, MAX_PACKED_ROW_MEMBERS
from stores import SqliteSessionStore
from tui.cli.importing import import_log, import_path

MEMORY_CAP = 600 * 1024 * 1024
CREATED = 1_785_000_000_000


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_capped(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``dsh --db DB ARGS`` in a child process limited to ``MEMORY_CAP`` of address space."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "--db", str(db), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=_cap_memory,
    )


def frame(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


def reference_header(session_id: str = "bomb") -> bytes:
    head = {"type": "session", "id": session_id, "createdAt": CREATED, "version": 0}
    return (json.dumps(head) + "\n").encode()


def stored_sessions(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        count: int = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    return count


def bomb(path: Path, gib: int) -> Path:
    """A reference log: a header frame, then ``gib`` GiB of spaces in 64 MiB frames (a few
    KB on disk)."""
    spaces = frame(b" " * (64 << 20))
    path.write_bytes(frame(reference_header()) + spaces * (16 * gib))
    assert path.stat().st_size < 200_000
    return path


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.timeout(300)
def test_a_decompression_bomb_is_refused_in_one_line(tmp_path: Path) -> None:
    log = bomb(tmp_path / "bomb.jsonl.zst", 4)
    db = tmp_path / "dsh.sqlite3"
    line = one_error_line(run_capped(db, "import", str(log)))
    assert str(log) in line and f"{MAX_LOG_LINE_BYTES:,} bytes" in line, line
    assert stored_sessions(db) == 0
    # the same bounded reading for a replay of the file
    line = one_error_line(run_capped(db, "replay", "--text", str(log)))
    assert str(log) in line and f"{MAX_LOG_LINE_BYTES:,} bytes" in line, line


def dsh_log(count: int, session_id: str = "s", pad: int = 0) -> bytes:
    lines = [{"type": "session", "id": session_id, "created_at": CREATED, "cwd": None}]
    lines += [
        {
            "seq": i,
            "type": "x/note",
            "time": CREATED + i,
            "data": {"n": i, "pad": "p" * pad},
            "surface_op": None,
            "source_event_seqs": None,
        }
        for i in range(count)
    ]
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


async def test_a_log_past_the_size_bound_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = dsh_log(50) + b"\n" * 5_000  # trailing blank lines: fine, but they count
    monkeypatch.setattr(bounds, "MAX_LOG_BYTES", len(raw) - 1)
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        outcome = await import_log(store, raw)
        assert outcome.status == "rejected"
        assert f"larger than {len(raw) - 1:,} bytes (decompressed)" in outcome.reason
        assert await store.list_headers() == []
        monkeypatch.setattr(bounds, "MAX_LOG_BYTES", len(raw))
        assert (await import_log(store, raw)).status == "imported"
        assert len(await store.read_events("s")) == 50


def packed_row_log(*members: int) -> bytes:
    """A reference log of one packed ``text-chunks`` row per count of members."""
    out = frame(reference_header("amp"))
    seq0 = 0
    for count in members:
        data = {"turn": 0, "step": 0, "index": 0, "dt": [0] * (count - 1), "texts": [""] * count}
        row = {"type": "text-chunks", "seq0": seq0, "time0": CREATED, "data": data}
        out += frame((json.dumps(row) + "\n").encode())
        seq0 += count
    return out


@pytest.mark.timeout(120)
def test_an_amplifying_packed_row_is_refused_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "amp.jsonl.zst"
    log.write_bytes(packed_row_log(3_000_000))
    assert log.stat().st_size < 5_000
    db = tmp_path / "dsh.sqlite3"
    line = one_error_line(run_capped(db, "import", str(log)))
    assert str(log) in line and "line 2:" in line
    assert f"at most {MAX_PACKED_ROW_MEMBERS:,} in one row" in line, line
    assert stored_sessions(db) == 0


async def test_too_many_events_are_refused_and_nothing_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds, "MAX_IMPORT_EVENTS", 2_500)
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        outcome = await import_log(store, dsh_log(2_501))
        assert outcome.status == "rejected"
        assert outcome.reason == (
            "line 2502: the log holds more than 2,500 events, the most dsh imports in one session"
        )
        assert await store.list_headers() == []
        # a packed row counts each member
        log = tmp_path / "rows.jsonl.zst"
        log.write_bytes(packed_row_log(2_000, 2_000))
        outcome = await import_path(store, log)
        assert outcome.status == "rejected" and outcome.reason.startswith("line 3: ")
        assert "more than 2,500 events" in outcome.reason
        assert await store.list_headers() == []
        assert (await import_log(store, dsh_log(2_500))).status == "imported"


async def test_a_failure_late_in_a_long_log_stores_nothing(tmp_path: Path) -> None:
    raw = dsh_log(5_000) + b'{"seq": 5000, "type": "x/note"}\n'
    async with await SqliteSessionStore.open(tmp_path / "db.sqlite3") as store:
        outcome = await import_log(store, raw)
        assert outcome.status == "rejected"
        assert outcome.reason.startswith("line 5002: event is missing")
        assert await store.list_headers() == []


@pytest.mark.timeout(120)
def test_a_directory_with_a_fifo_and_a_device_link(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(dsh_log(3, "a"))
    os.mkfifo(logs / "b-fifo.jsonl")
    os.symlink("/dev/zero", logs / "c-zero.jsonl")
    (tmp_path / "outside.jsonl").write_bytes(dsh_log(2, "d"))
    os.symlink(tmp_path / "outside.jsonl", logs / "d-link.jsonl")
    db = tmp_path / "dsh.sqlite3"
    result = run_capped(db, "import", str(logs))
    assert "Traceback" not in result.stderr
    assert result.stdout.splitlines() == [
        "imported: a.jsonl → a",
        "skipped: b-fifo.jsonl: not a regular file (a FIFO)",
        "skipped: c-zero.jsonl: not a regular file (a device)",
        "imported: d-link.jsonl → d",
        "2 imported, 0 already present, 0 conflicting (not overwritten), 0 rejected, "
        "of 4 logs (2 skipped: not regular files)",
    ]
    assert result.returncode == 0
    for name, kind in (("b-fifo.jsonl", "a FIFO"), ("c-zero.jsonl", "a device")):
        line = one_error_line(run_capped(db, "import", str(logs / name)))
        assert line == (
            f"dsh: error: cannot import {logs / name}: not a regular file ({kind}); "
            "nothing imported"
        )
        line = one_error_line(run_capped(db, "replay", "--text", str(logs / name)))
        assert line.endswith(f"not a regular file ({kind})"), line
    assert stored_sessions(db) == 2

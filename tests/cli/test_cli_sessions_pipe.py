"""``dsh sessions`` into a pipe or a file (issue 30): one line per row, its cells separated
by a tab, nothing padded or aligned, the header line first; what it writes grows with what
it lists, never with the widest cell times the rows (one 20 MB cwd made a 10 GB file)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from pathlib import Path

from core.display import single_line
from stores import open_store
from tests.acp.harness import dsh_command
from tests.cli.conftest import Run

HUGE = 1 << 20  # a 1 MiB cwd, written before the limits (or by hand)
ROWS = 40


def test_a_piped_listing_is_tab_separated(dsh: Run) -> None:
    assert dsh("demo").code == 0
    sid = dsh("new", "--cwd", "/w\tx").out.strip()
    assert dsh("rename", sid, "A  spaced\ttitle").code == 0
    listed = dsh("sessions")
    assert listed.code == 0
    head, *lines = listed.out.splitlines()
    # the four columns of issue 31 (a profile column only once some session chose one)
    assert head == "id\ttitle\tcwd\tlast active"
    rows = [line.split("\t") for line in lines]
    assert all(len(row) == 4 for row in rows), rows
    by_id = {row[0]: row[1:] for row in rows}
    assert by_id[sid] == ["A spaced title", "/w\\tx", "just now"]  # no raw tab
    listing = dsh("sessions", "--json").json()
    assert list(by_id) == [row["id"] for row in listing]
    for row in listing:
        shown = [single_line(row["title"] or "", 60), single_line(row["cwd"] or "—")]
        assert by_id[row["id"]][:2] == shown
    assert all(line == line.strip() and "  " not in line.split("\t")[0] for line in lines)
    chose = dsh("new", "--profile", "offline").out.strip()
    head, *lines = dsh("sessions").out.splitlines()
    assert head == "id\ttitle\tcwd\tlast active\tprofile"
    cells = {line.split("\t")[0]: line.split("\t")[4] for line in lines}
    assert cells[chose] == "offline" and cells[sid] == "offline"  # the default's name


async def _seed(db: Path) -> None:
    async with await open_store(db) as store:
        for n in range(ROWS):
            await store.create_session(f"s{n:02}", cwd=f"/w/{n}", created_at=n + 1)
            await store.append(f"s{n:02}", "session/title", {"title": f"title {n}"})


def test_a_huge_cwd_costs_its_own_size_in_a_file(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    asyncio.run(_seed(db))
    with sqlite3.connect(db) as raw:  # a row written before the limits
        raw.execute("UPDATE sessions SET cwd = ? WHERE id = ?", (b"/" + b"c" * HUGE, b"s07"))
    raw.close()
    out = tmp_path / "sessions.txt"
    with out.open("wb") as file:
        done = subprocess.run(
            [*dsh_command(), "--db", str(db), "sessions"],
            stdout=file,
            stderr=subprocess.PIPE,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(tmp_path),
                "XDG_CONFIG_HOME": str(tmp_path / "config"),
            },
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    size = out.stat().st_size
    assert HUGE < size < HUGE + 100 * ROWS, size  # the cwd once, and ~40 short rows
    lines = out.read_bytes().splitlines()
    assert len(lines) == 1 + ROWS
    assert max(len(line) for line in lines if b"c" * 100 not in line) < 100

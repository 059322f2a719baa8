"""A log written on a machine whose clock ran ahead (issue 31, Timestamps): it imports
and replays whole, and its future times are shown as their dates."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from core.log import now_ms
from tests.cli.conftest import Run


def test_a_log_from_a_clock_ahead_imports_and_shows_its_date(dsh: Run, tmp_path: Path) -> None:
    ahead = now_ms() + 400 * 86_400_000  # more than a year ahead
    head = {"type": "session", "id": "ahead", "createdAt": ahead, "cwd": "/w", "version": 0}
    event = {
        "type": "x/note",
        "seq": 0,
        "time": ahead + 5,
        "data": {"note": "from the future"},
    }
    log = tmp_path / "ahead.jsonl"
    log.write_text(json.dumps(head) + "\n" + json.dumps(event) + "\n", encoding="utf-8")
    result = dsh("import", str(log))
    assert (result.code, result.out) == (0, "ahead\n"), result.err
    date = datetime.fromtimestamp(ahead / 1000).strftime("%Y-%m-%d")
    listing = dsh("sessions")
    assert listing.code == 0
    [row] = [line for line in listing.out.splitlines() if line.startswith("ahead")]
    header = listing.out.splitlines()[0].split("\t")
    assert row.split("\t")[header.index("last active")] == date, listing.out
    replay = dsh("replay", "--text", str(log))
    assert replay.code == 0 and f"{date} " in replay.out, replay.err

"""``dsh replay FILE`` of a large log holds memory bounded by a page, not by the log
(issue 31 §6): a log four times as long replays as text and as SVG with about the same
peak resident memory (measured for each ``dsh`` subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CREATED = 1_785_000_000_000
PAD = 10_000  # characters of text an event: 1,000 events make a log of about 10 MB


def write_log(path: Path, count: int) -> None:
    """A dsh export of ``count`` messages, a user's and the assistant's in turn."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "session", "id": "big", "created_at": CREATED}) + "\n")
        for seq in range(count):
            uid = f"00000000-0000-4000-8000-{seq:012d}"
            text = f"message {seq} " + "lorem ipsum " * (PAD // 12)
            if seq % 2 == 0:
                kind = "user/message"
                data: dict[str, object] = {
                    "id": uid,
                    "role": "user",
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user"},
                }
            else:
                kind = "assistant/message"
                message = {
                    "id": uid,
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "model", "provider": "offline", "model": "echo-1"},
                }
                data = {"turn": seq // 2 + 1, "step": 0, "message": message, "finish": "completed"}
            event = {"seq": seq, "type": kind, "time": CREATED + seq, "data": data}
            event |= {"surface_op": "append", "source_event_seqs": None}
            out.write(json.dumps(event) + "\n")


def peak_mb(args: list[str], env: dict[str, str]) -> float:
    """The peak resident memory of one ``dsh`` run, in MB (it must succeed)."""
    code = "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, err.decode(errors="replace")
    return usage.ru_maxrss / 1024


def test_replay_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "d")}
    env |= {"TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "100"}
    (tmp_path / "tmp").mkdir()
    peaks: dict[tuple[str, int], float] = {}
    for count in (1_000, 4_000):  # about 10 MB and 40 MB
        log = tmp_path / f"log{count}.jsonl"
        write_log(log, count)
        peaks["text", count] = peak_mb(["replay", str(log), "--text"], env)
        svg = str(tmp_path / "shot.svg")
        peaks["svg", count] = peak_mb(["replay", str(log), "--svg", svg], env)
        log.unlink()
    for mode in ("text", "svg"):
        # Held whole, 30 MB more of log took about 65 MB more memory (a page: none).
        growth = peaks[mode, 4_000] - peaks[mode, 1_000]
        assert growth < 25, f"{mode}: {peaks}"
    assert list((tmp_path / "tmp").iterdir()) == [], "the temporary database is removed"


async def test_an_interrupted_replay_stops_at_once_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.shared.replay import open_replay

    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    log = tmp_path / "log.jsonl"
    write_log(log, 4_000)
    task = asyncio.create_task(open_replay(str(log), at=None))
    for _ in range(500):  # until the temporary database is being filled
        if list(spool.glob("*/replay.sqlite3-wal")):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert not task.done()
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 2, "the import stopped at its next batch"
    assert list(spool.iterdir()) == [], "the temporary database is removed"

"""Importing a Claude Code folder (issue 33): messages per second and peak memory of one
child process that reads a generated ``projects/`` folder with ``core.importers.claude_code``
and stores every session in a new SQLite store (``import_session``, a ``session/source``
event first, as the importer does).

    python -m tests.benchmarks.bench_import_claude [--mb 1000] [--largest-mb 20]
        [--keep DIR [--reuse]]

The folder holds sessions of about 2 MB (one of ``--largest-mb``) in a few project
folders, each as Claude Code writes them: a prompt, replies of a thinking, a text and a
tool call line (one ``message.id``), a progress line and a tool result of about 1.5 KB,
a subagent transcript beside some. Peak memory is the child's peak RSS (``ru_maxrss``):
it should follow the largest session, not the folder. In the benchmark suite
(``python -m tests.benchmarks --only import_claude``) the folder is 100 MB (20 MB with
``--quick``).

Measured on 2026-12-03 (2 cores shared with other jobs, load 4-6), ``--mb 1000
--largest-mb 20``: 1,005 MB, 487 sessions, 501,951 messages (712,237 events) imported in
408 s, 1,230 messages/s (2.5 MB/s); peak RSS 158 MB against 37 MB for the same child on an
empty folder. The reader alone (``read_sessions``, nothing stored) took 97 s (52 s of CPU),
5,170 messages/s, peak RSS 126 MB: storing is three quarters of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks._common import Row, Settings

START = 1_746_000_000  # seconds
MODEL = "claude-sonnet-4-5-20250929"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dogs",
    "while",
    "a",
    "compiler",
    "checks",
    "every",
    "branch",
    "of",
    "this",
    "module",
    "and",
    "the",
    "tests",
    "run",
    "again",
    "after",
    "each",
    "small",
    "change",
    "to",
    "the",
    "parser",
    "code",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _iso(seconds: float) -> str:
    whole = int(seconds)
    ms = int((seconds - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{ms:03d}Z"


def write_session(path: Path, sid: str, target: int, rng: random.Random) -> tuple[int, int]:
    """A transcript of about ``target`` bytes at ``path``: ``(bytes, messages)``, messages
    counted as dsh will store them (a person's prompt, a reply, a tool result)."""
    base = {"userType": "external", "cwd": f"/home/dev/{path.parent.name}", "sessionId": sid}
    base |= {"version": "2.0.14", "gitBranch": "main"}
    size = messages = count = 0
    parent: str | None = None
    clock = float(START + rng.randrange(10_000_000))
    lines: list[str] = []

    def add(kind: str, **fields: Any) -> None:
        nonlocal parent, count, clock, size
        count += 1
        clock += rng.random() * 3
        uuid = f"{sid[:23]}-{count:012d}"
        record = {"parentUuid": parent, "isSidechain": False, **base, "type": kind}
        record |= {"uuid": uuid, "timestamp": _iso(clock), **fields}
        line = json.dumps(record)
        lines.append(line)
        size += len(line) + 1
        parent = uuid

    with path.open("w", encoding="utf-8") as out:
        lines.append(json.dumps({"type": "summary", "summary": _text(rng, 6), "leafUuid": "x"}))
        while size < target:
            add("user", message={"role": "user", "content": _text(rng, 30)})
            messages += 1
            for step in range(rng.randint(1, 4)):
                mid = f"msg_{count}_{step}"
                head = {"id": mid, "type": "message", "role": "assistant", "model": MODEL}
                usage = {"input_tokens": 1200, "output_tokens": 300}
                thinking = {"type": "thinking", "thinking": _text(rng, 60), "signature": "c2ln"}
                add("assistant", message={**head, "content": [thinking], "usage": usage})
                text = {"type": "text", "text": _text(rng, 50)}
                add("assistant", message={**head, "content": [text], "usage": usage})
                call_id = f"toolu_{count}"
                call = {"type": "tool_use", "id": call_id, "name": "Bash"}
                call["input"] = {"command": "pytest -q", "description": _text(rng, 8)}
                add("assistant", message={**head, "content": [call], "usage": usage})
                add("progress", data={"type": "hook_progress"}, toolUseID=call_id)
                result = {"type": "tool_result", "tool_use_id": call_id}
                result["content"] = _text(rng, 250)
                add("user", message={"role": "user", "content": [result]})
                messages += 2
            if len(lines) > 500:
                out.write("".join(x + "\n" for x in lines))
                lines.clear()
        out.write("".join(x + "\n" for x in lines))
    return size, messages


def write_folder(root: Path, megabytes: float, largest_mb: float) -> dict[str, int]:
    """The ``projects/`` folder under ``root``, about ``megabytes`` MB."""
    rng = random.Random(33)
    target = int(megabytes * 1_000_000)
    total = messages = sessions = 0
    sizes = [int(largest_mb * 1_000_000)]
    while sum(sizes) < target:
        sizes.append(rng.randint(1_000_000, 3_000_000))
    for index, size in enumerate(sizes):
        project = root / "projects" / f"-home-dev-project{index % 7}"
        project.mkdir(parents=True, exist_ok=True)
        sid = f"{index:08x}-0000-4000-8000-{rng.randrange(16**12):012x}"
        wrote, count = write_session(project / f"{sid}.jsonl", sid, size, rng)
        if index % 5 == 1:  # a subagent's transcript, log-only in its session
            agents = project / sid / "subagents"
            agents.mkdir(parents=True)
            wrote += _write_subagent(agents / "agent-a1.jsonl", sid)
        total += wrote
        messages += count
        sessions += 1
    return {"bytes": total, "messages": messages, "sessions": sessions, "largest": sizes[0]}


def _write_subagent(path: Path, sid: str) -> int:
    line = {"parentUuid": None, "isSidechain": True, "sessionId": sid, "type": "user"}
    line |= {"uuid": f"agent-{sid}", "timestamp": _iso(START), "message": {"content": "explore"}}
    text = json.dumps(line) + "\n"
    path.write_text(text)
    return len(text)


def child(root: str, db: str) -> None:
    """Import the folder (in this process) and print the figures as one JSON line."""
    import asyncio
    import resource

    from core.importers import claude_code
    from core.importers.foreign import ForeignImportError, source_event
    from core.log import SessionHeader
    from stores import SqliteSessionStore

    async def run() -> dict[str, Any]:
        started = time.perf_counter()
        sessions = messages = events = 0
        errors: list[str] = []
        async with await SqliteSessionStore.open(Path(db)) as store:
            for item in claude_code.read_sessions(claude_code.find_files(Path(root))):
                if isinstance(item, ForeignImportError):
                    errors.append(str(item))
                    continue
                prov = item.provenance
                header = SessionHeader(prov.original_id, item.created_at, item.cwd)
                batch = [source_event(prov, item.created_at), *item.events]
                await store.import_session(header, batch)
                sessions += 1
                events += len(batch)
                messages += sum(1 for e in item.events if e.surface_op is not None)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {
            "seconds": seconds,
            "sessions": sessions,
            "messages": messages,
            "events": events,
            "errors": errors[:3],
            "peak_rss": peak,
        }

    print(json.dumps(asyncio.run(run())))


def run_child(root: Path, db: Path) -> dict[str, Any]:
    code = (
        "import sys; from tests.benchmarks.bench_import_claude import child; child(*sys.argv[1:])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    out = subprocess.run(
        [sys.executable, "-c", code, str(root), str(db)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def baseline_rss(work: Path) -> int:
    """The peak RSS of the same child importing an empty folder into a new store."""
    empty = work / "empty"
    (empty / "projects").mkdir(parents=True, exist_ok=True)
    peak: int = run_child(empty, work / "empty.sqlite3")["peak_rss"]
    return peak


def existing_folder(work: Path) -> dict[str, int]:
    """What ``write_folder`` said of the folder already in ``work`` (``--reuse``)."""
    sizes = {p: p.stat().st_size for p in (work / "projects").rglob("*.jsonl")}
    sessions = [size for p, size in sizes.items() if not p.name.startswith("agent-")]
    total, largest = sum(sizes.values()), max(sessions)
    return {"bytes": total, "messages": -1, "sessions": len(sessions), "largest": largest}


def measure(
    megabytes: float, largest_mb: float, work: Path, *, reuse: bool = False
) -> dict[str, Any]:
    started = time.perf_counter()
    if reuse and (work / "projects").is_dir():
        made = existing_folder(work)
    else:
        made = write_folder(work, megabytes, largest_mb)
    made["write_seconds"] = round(time.perf_counter() - started, 1)
    db = work / "bench.sqlite3"
    db.unlink(missing_ok=True)
    result = run_child(work, db)
    result["baseline_rss"] = baseline_rss(work)
    result["folder"] = made
    result["db_bytes"] = db.stat().st_size
    return result


def rows(result: dict[str, Any]) -> list[Row]:
    folder = result["folder"]
    size = f"{folder['bytes'] / 1e6:,.0f} MB, {folder['sessions']} sessions"
    rate = result["messages"] / result["seconds"]
    peak, base = result["peak_rss"] / 1e6, result["baseline_rss"] / 1e6
    largest = folder["largest"] / 1e6
    note = (
        f"{result['messages']:,} messages ({result['events']:,} events) in "
        f"{result['seconds']:.1f} s, {folder['bytes'] / 1e6 / result['seconds']:.1f} MB/s"
    )
    return [
        Row("import claude-code: throughput", size, rate, "messages/s", "", None, note=note),
        Row(
            "import claude-code: peak RSS",
            size,
            peak,
            "MB",
            "bounded by the largest session",
            peak - base < 40 * largest + 200,
            baseline=base,
            ratio=peak / base,
            note=f"largest session {largest:.0f} MB; baseline: the same child on an empty folder",
        ),
    ]


def run_workload(settings: Settings) -> list[Row]:
    megabytes, largest = (20, 4) if settings.quick else (100, 10)
    with tempfile.TemporaryDirectory() as scratch:
        result = measure(megabytes, largest, Path(scratch))
    assert not result["errors"], result["errors"]
    return rows(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=100, help="folder size in MB")
    parser.add_argument("--largest-mb", type=float, default=10, help="the largest session")
    parser.add_argument("--keep", type=Path, help="work in this directory (kept)")
    parser.add_argument("--reuse", action="store_true", help="import the --keep folder as it is")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        result = measure(args.mb, args.largest_mb, work, reuse=args.reuse)
    print(json.dumps(result, indent=1))
    for row in rows(result):
        print(f"{row.workload}: {row.ours:,.0f} {row.unit}  ({row.size}; {row.note})")
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

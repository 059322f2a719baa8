"""``dsh import`` of many sessions into SQLite (issue 36): messages per second of one
child process importing a folder of dsh logs the way ``dsh import DIR`` does
(``tui.cli.importing.import_path`` per file, one store), and optionally a cProfile of it.

    python -m tests.benchmarks.bench_import_index [--sessions 400] [--exchanges 50]
        [--chunks 0] [--reps 3] [--tree DIR ...] [--profile N]

The folder holds ``--sessions`` logs of ``--exchanges`` exchanges each: a question of
about 30 words and a reply of about 80 (5% of messages with a CJK sentence), the reply
after ``--chunks`` streamed chunk events (0: none, as an import from ``llm`` would hold).
Each ``--tree`` is a source tree of dsh (default: this one) run in its own child, the
trees alternating in every repetition (so one run compares two versions on the same,
shared machine); the figures are medians. ``--profile N`` prints the N costliest
functions (cumulative) of one more import per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CREATED = 1_785_000_000_000
WORDS = (
    "the quick brown fox jumps over lazy dogs while a compiler checks every branch of "
    "this module and the tests run again after each small change to the parser code "
    "index search import batch row trigger table session message reply question"
).split()
CJK = "我们在这里测试全文检索的中文句子"


def _text(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    if rng.random() < 0.05:
        text += " " + CJK
    return text


def write_folder(root: Path, sessions: int, exchanges: int, chunks: int) -> int:
    """The logs under ``root``: the messages they hold."""
    rng = random.Random(36)
    root.mkdir(parents=True, exist_ok=True)
    messages = 0
    for s in range(sessions):
        sid = f"bench-{s:05d}"
        head = {"type": "session", "id": sid, "created_at": CREATED + s, "cwd": "/w"}
        lines = [json.dumps(head)]
        seq, clock = 0, CREATED + s * 1_000_000

        def add(type_: str, data: dict[str, object], op: object, seqs: object = None) -> None:
            nonlocal seq, clock
            event = {"seq": seq, "type": type_, "time": clock, "data": data}
            event |= {"surface_op": op, "source_event_seqs": seqs}
            lines.append(json.dumps(event, ensure_ascii=False))
            seq += 1
            clock += 1000

        for e in range(exchanges):
            add(
                "user/message",
                {
                    "id": f"u{s}-{e}",
                    "role": "user",
                    "content": [{"type": "text", "text": _text(rng, 30)}],
                    "source": {"kind": "user"},
                },
                "append",
            )
            reply = _text(rng, 80)
            first = seq
            if chunks:
                words = reply.split(" ")
                step = max(1, len(words) // chunks)
                pieces = [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
                pieces = [p + " " for p in pieces[:-1]] + [pieces[-1]]
                for piece in pieces:
                    add("assistant/chunk", {"text": piece}, None)
                reply = "".join(pieces)
            add(
                "assistant/message",
                {
                    "id": f"a{s}-{e}",
                    "role": "assistant",
                    "content": [{"type": "text", "text": reply}],
                    "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
                },
                "append",
                list(range(first, seq)) if chunks else None,
            )
            messages += 2
        (root / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return messages


def child(folder: str, db: str, profile: str) -> None:
    """Import every log of ``folder`` into a new store at ``db`` (in this process, as
    ``dsh import DIR`` does) and print ``{"seconds", "imported"}`` as one JSON line."""
    import asyncio
    import cProfile
    import pstats

    from stores import SqliteSessionStore
    from tui.cli.importing import import_path

    paths = sorted(Path(folder).glob("*.jsonl"))

    async def run() -> dict[str, float]:
        imported = 0
        started = time.perf_counter()
        async with await SqliteSessionStore.open(Path(db)) as store:
            for path in paths:
                outcome = await import_path(store, path)
                assert outcome.status == "imported", outcome
                imported += 1
        return {"seconds": time.perf_counter() - started, "imported": imported}

    if int(profile):
        # The store's work runs on its connection's thread (aiosqlite's): profile that.
        import aiosqlite.core

        profiler = cProfile.Profile()
        worker = aiosqlite.core._connection_worker_thread

        def profiled(tx: object) -> None:
            profiler.runcall(worker, tx)

        aiosqlite.core._connection_worker_thread = profiled  # type: ignore[assignment]
        result = asyncio.run(run())
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(int(profile))
        stats.sort_stats("cumulative").print_stats(int(profile))
    else:
        result = asyncio.run(run())
    print(json.dumps(result))


def run_child(tree: Path, folder: Path, db: Path, profile: int = 0) -> dict[str, float]:
    db.unlink(missing_ok=True)
    code = "import sys; from tests.benchmarks.bench_import_index import child; child(*sys.argv[1:])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(db), str(profile)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    if profile:
        print(f"--- profile of {tree}", file=sys.stderr)
        print(out.stderr, file=sys.stderr)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--exchanges", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=0, help="chunk events per reply")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="a dsh source tree")
    parser.add_argument("--profile", type=int, default=0, help="print N profile lines")
    args = parser.parse_args(argv)
    trees = args.tree or [Path(__file__).resolve().parents[2]]
    with tempfile.TemporaryDirectory(prefix="dsh-bench-import-") as scratch:
        folder = Path(scratch) / "logs"
        messages = write_folder(folder, args.sessions, args.exchanges, args.chunks)
        print(f"{args.sessions} sessions x {args.exchanges} exchanges: {messages:,} messages")
        rates: dict[Path, list[float]] = {tree: [] for tree in trees}
        sizes: dict[Path, int] = {}
        for rep in range(args.reps):
            for tree in trees if rep % 2 == 0 else trees[::-1]:
                db = Path(scratch) / "bench.sqlite3"
                result = run_child(tree, folder, db)
                rates[tree].append(messages / result["seconds"])
                sizes[tree] = db.stat().st_size
        first = statistics.median(rates[trees[0]])
        for tree in trees:
            rate = statistics.median(rates[tree])
            samples = ", ".join(f"{r:,.0f}" for r in rates[tree])
            print(
                f"{tree}: {rate:,.0f} messages/s (x{rate / first:.2f}; {samples}); "
                f"file {sizes[tree] / 1e6:,.1f} MB"
            )
        if args.profile:
            for tree in trees:
                run_child(tree, folder, Path(scratch) / "profile.sqlite3", args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

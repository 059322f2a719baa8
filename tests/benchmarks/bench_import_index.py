"""``dsh import`` of many sessions into SQLite (issue 36): messages per second of one
child process importing a folder of dsh logs the way ``dsh import DIR`` does
(``tui.cli.importing.import_path`` per file, one store), and optionally a cProfile of it.

    python -m tests.benchmarks.bench_import_index [--sessions 400] [--exchanges 50]
        [--chunks 0] [--words 30,80] [--reps 3] [--tree DIR ...] [--profile N] [--appends N]

The folder holds ``--sessions`` logs of ``--exchanges`` exchanges each: a question of
``--words`` 30 words and a reply of 80 (5% of messages with a CJK sentence), the reply
after ``--chunks`` streamed chunk events (0: none, as an import from ``llm`` would hold).
Each ``--tree`` is a source tree of dsh (default: this one; ``DIR:noindex`` for one with
the search index switched off, ``stores.sqlite.search.SEARCH_INDEX``) run in its own child, the
trees alternating in every repetition (so one run compares two versions on the same,
shared machine); the figures are medians. ``--profile N`` prints the N costliest
functions of one more import per tree (the store's thread: aiosqlite's worker), by own
and by cumulative time; ``--appends N`` then times N single-message appends to each
tree's database (a reply's path: one message a transaction).

Measured on 2026-12-04 (2 cores shared with five other jobs, load 3-5; ``git archive`` of
22e8713 against issue 36's branch, children alternating): 2,000 sessions x 50
exchanges (200,000 messages) of 20 and 40 words (the sizes of the ``llm`` corpus), 7
pairs in two runs: 10,387 and 9,979 messages/s before, 17,223 and 14,382 after, the
median pair 1.41x (1.26-2.02x); with the index switched off, 16,259 before and 17,232
after (``read_header`` in one hand-over): the index's upkeep went from about a third of
the import to within the noise. Questions of 30 and replies of 80 words, 1,000
sessions: 9,548 before, 12,966 after (1.36x, 6 pairs). Single-message appends cost the
same either way (one FTS5 statement a transaction, by trigger or not: 1,980 and 1,973
a second, 4,391 with the index off): what the index costs there is FTS5's work per
transaction (a segment written at each commit, merged later), not per row.
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
_VOCABULARY = (
    "the quick brown fox jumps over lazy dogs while a compiler checks every branch of this "
    "module and the tests run again after each small change to the parser code index "
    "search import batch row trigger table session message reply"
)
WORDS = _VOCABULARY.split()
CJK = "我们在这里测试全文检索的中文句子"


def _text(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    if rng.random() < 0.05:
        text += " " + CJK
    return text


def _add(lines: list[str], clock: int, type_: str, data: object, op: object, seqs: object) -> None:
    seq = len(lines) - 1
    event = {"seq": seq, "type": type_, "time": clock + seq * 1000, "data": data}
    event |= {"surface_op": op, "source_event_seqs": seqs}
    lines.append(json.dumps(event, ensure_ascii=False))


def write_folder(
    root: Path, sessions: int, exchanges: int, chunks: int, words: tuple[int, int] = (30, 80)
) -> int:
    """The logs under ``root``: the messages they hold."""
    rng = random.Random(36)
    root.mkdir(parents=True, exist_ok=True)
    messages = 0
    for s in range(sessions):
        sid = f"bench-{s:05d}"
        head = {"type": "session", "id": sid, "created_at": CREATED + s, "cwd": "/w"}
        lines = [json.dumps(head)]
        clock = CREATED + s * 1_000_000

        def add(type_: str, data: dict[str, object], op: object, seqs: object = None) -> None:
            _add(lines, clock, type_, data, op, seqs)  # noqa: B023 (called in this iteration)

        for e in range(exchanges):
            add(
                "user/message",
                {
                    "id": f"u{s}-{e}",
                    "role": "user",
                    "content": [{"type": "text", "text": _text(rng, words[0])}],
                    "source": {"kind": "user"},
                },
                "append",
            )
            reply = _text(rng, words[1])
            first = len(lines) - 1
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
                list(range(first, len(lines) - 1)) if chunks else None,
            )
            messages += 2
        (root / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return messages


def child(folder: str, db: str, profile: str, index: str = "1") -> None:
    """Import every log of ``folder`` into a new store at ``db`` (in this process, as
    ``dsh import DIR`` does) and print ``{"seconds", "imported"}`` as one JSON line
    (``index`` "0": with the search index switched off, what the rest costs)."""
    import asyncio
    import cProfile
    import pstats

    import stores.sqlite.search
    from stores import SqliteSessionStore
    from tui.cli.importing import import_path

    stores.sqlite.search.SEARCH_INDEX = index == "1"

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


def child_appends(db: str, count: str, index: str = "1") -> None:
    """Append ``count`` messages to the store at ``db``, one per transaction (a reply's
    message as the engine appends it: the index's worst case), a question and a reply
    alternating over the store's sessions; print ``{"seconds"}`` as one JSON line."""
    import asyncio

    import stores.sqlite.search
    from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, assistant_message, user_message
    from stores import SqliteSessionStore

    stores.sqlite.search.SEARCH_INDEX = index == "1"
    rng = random.Random(7)

    async def run() -> dict[str, float]:
        async with await SqliteSessionStore.open(Path(db)) as store:
            sids = [h.id for h in await store.list_headers()][:50]
            texts = [_text(rng, 60) for _ in range(int(count))]
            started = time.perf_counter()
            for i, text in enumerate(texts):
                sid = sids[i % len(sids)]
                if i % 2:
                    data = {"turn": 1, "step": 0}
                    data["message"] = assistant_message(text, provider="p", model="m")
                    await store.append(sid, ASSISTANT_MESSAGE, data, surface_op="append")
                else:
                    await store.append(sid, USER_MESSAGE, user_message(text), surface_op="append")
            return {"seconds": time.perf_counter() - started}

    print(json.dumps(asyncio.run(run())))


def _split(tree: Path) -> tuple[Path, str]:
    if tree.name.endswith(":noindex"):
        return tree.with_name(tree.name.removesuffix(":noindex")), "0"
    return tree, "1"


def _run_in(tree: Path, function: str, *args: str) -> tuple[dict[str, float], str]:
    """``function`` of this module run with ``args`` in a child on ``tree`` (its
    ``PYTHONPATH``, no ``DSH_`` settings): the figures its last line prints, and its
    standard error."""
    code = f"import sys; from tests.benchmarks.bench_import_index import {function}; "
    code += f"{function}(*sys.argv[1:])"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result, out.stderr


def run_appends(tree: Path, db: Path, count: int) -> dict[str, float]:
    """``child_appends`` run on ``tree`` (see ``run_child``)."""
    tree, index = _split(tree)
    return _run_in(tree, "child_appends", str(db), str(count), index)[0]


def run_child(tree: Path, folder: Path, db: Path, profile: int = 0) -> dict[str, float]:
    """``child`` run on ``tree`` (``DIR:noindex``: with the search index off)."""
    tree, index = _split(tree)
    db.unlink(missing_ok=True)
    result, err = _run_in(tree, "child", str(folder), str(db), str(profile), index)
    if profile:
        print(f"--- profile of {tree}", file=sys.stderr)
        print(err, file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--exchanges", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=0, help="chunk events per reply")
    parser.add_argument("--words", default="30,80", help="words of a question and of a reply (Q,R)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="a dsh source tree")
    parser.add_argument("--profile", type=int, default=0, help="print N profile lines")
    parser.add_argument(
        "--appends", type=int, default=0, help="then time N single-message appends to it"
    )
    args = parser.parse_args(argv)
    trees = args.tree or [Path(__file__).resolve().parents[2]]
    with tempfile.TemporaryDirectory(prefix="dsh-bench-import-") as scratch:
        folder = Path(scratch) / "logs"
        q, r = (int(n) for n in args.words.split(","))
        messages = write_folder(folder, args.sessions, args.exchanges, args.chunks, (q, r))
        print(f"{args.sessions} sessions x {args.exchanges} exchanges: {messages:,} messages")
        rates: dict[Path, list[float]] = {tree: [] for tree in trees}
        appends: dict[Path, list[float]] = {tree: [] for tree in trees}
        sizes: dict[Path, int] = {}
        for rep in range(args.reps):
            for tree in trees if rep % 2 == 0 else trees[::-1]:
                db = Path(scratch) / "bench.sqlite3"
                result = run_child(tree, folder, db)
                rates[tree].append(messages / result["seconds"])
                sizes[tree] = db.stat().st_size
                if args.appends:
                    seconds = run_appends(tree, db, args.appends)["seconds"]
                    appends[tree].append(args.appends / seconds)
        first = statistics.median(rates[trees[0]]) if args.reps else 0.0
        for tree in trees if args.reps else ():
            rate = statistics.median(rates[tree])
            samples = ", ".join(f"{r:,.0f}" for r in rates[tree])
            print(
                f"{tree}: {rate:,.0f} messages/s (x{rate / first:.2f}; {samples}); "
                f"file {sizes[tree] / 1e6:,.1f} MB"
            )
            if args.appends:
                rate = statistics.median(appends[tree])
                samples = ", ".join(f"{r:,.0f}" for r in appends[tree])
                print(f"  then {args.appends:,} single-message appends: {rate:,.0f}/s ({samples})")
        if args.profile:
            for tree in trees:
                run_child(tree, folder, Path(scratch) / "profile.sqlite3", args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A large stored session (issue 31 §6): peak memory (RSS) and time of ``dsh show``,
``show --json``, ``export`` (json, reference, md) and ``replay --svg``/``--text`` of its
export, each a ``dsh`` subprocess, today and (same run) as the code was before they were
streamed (``BASE_COMMIT``, read with ``git archive``).

The session is built in SQLite: turns of a user message, streamed chunks, a reply, a
tool result, an event of a type dsh does not know; about ``DSH_BENCH_BIG_MB`` megabytes of
log (default 1024; 48 with ``--quick``). Run it alone, e.g.
``DSH_BENCH_BIG_MB=300 python -m tests.benchmarks --only big_session``, or
``python -m tests.benchmarks.bench_big_session --mb 300``.

``replay`` reads a file, which another change streams; its figure here is for the file
read whole (its memory is the file's) plus what drawing needs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    user_message,
)
from stores import SqliteSessionStore
from tests.benchmarks._common import Row, Settings

BASE_COMMIT = "dcbf3f6"
"""The tree before ``dsh show``/``export`` were streamed: the baseline's code."""
ROOT = Path(__file__).resolve().parents[2]
SESSION = "big-session"
_WORDS = "the quick brown fox jumps over the lazy dog while streaming a long session "


def _text(n: int, size: int) -> str:
    body = (_WORDS * (size // len(_WORDS) + 1))[:size]
    return f"turn {n}: {body}"


def _turn(n: int, at: int) -> list[NewEvent]:
    out = [NewEvent(USER_MESSAGE, user_message(_text(n, 1500)), "append", time=at)]
    for i in range(8):
        chunk = {"type": "text-delta", "index": 0, "text": _text(i, 60)}
        out.append(
            NewEvent(ASSISTANT_CHUNK, {"turn": n, "step": 0, "chunk": chunk}, time=at + 1 + i)
        )
    reply = assistant_message(_text(n, 3000), provider="offline", model="echo-1")
    out.append(
        NewEvent(ASSISTANT_MESSAGE, {"turn": n, "step": 0, "message": reply}, "append", time=at + 9)
    )
    result = {
        "id": f"r{n}",
        "role": "user",
        "content": [
            {"type": "tool-result", "toolCallId": f"c{n}", "isError": False, "content": []}
        ],
        "source": {"kind": "tool", "callId": f"c{n}"},
    }
    out.append(
        NewEvent(TOOL_RESULT, {"turn": n, "step": 1, "message": result}, "append", time=at + 10)
    )
    out.append(NewEvent("step/start", {"turn": n, "note": _text(n, 200)}, time=at + 11))
    return out


async def _count(path: Path) -> int:
    async with await SqliteSessionStore.open(path) as store:
        _header, last, _rows = await store.read_surface_tail(SESSION, 0)
        return 0 if last is None else last + 1


async def build(path: Path, megabytes: int) -> int:
    """A session of about ``megabytes`` MB of log in a new SQLite file; its event count."""
    per_turn = sum(len(str(e.data)) for e in _turn(0, 0))
    turns = max(1, megabytes * 1_000_000 // per_turn)
    count = 0
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session(SESSION, created_at=1_700_000_000_000)
        batch: list[NewEvent] = []
        for n in range(turns):
            batch += _turn(n, 1_700_000_000_000 + n * 20)
            if len(batch) >= 2_000:
                count += len(await store.append_batch(SESSION, batch))
                batch = []
        if batch:
            count += len(await store.append_batch(SESSION, batch))
    return count


def _measure(argv: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Peak RSS (MB: the child's VmHWM), wall time (s) and exit status of one command,
    its output discarded."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode("utf-8", "replace")
    peak_kb = usage.ru_maxrss  # where /proc is missing: an upper bound
    for line in err.splitlines():
        if line.startswith("dsh-bench-peak-kb "):
            peak_kb = int(line.split()[1])
    if proc.returncode:
        print(f"  {' '.join(argv[3:])}: exit {proc.returncode}: {err.strip()}", file=sys.stderr)
    return peak_kb / 1024, time.perf_counter() - started, proc.returncode


@contextlib.contextmanager
def _baseline_tree() -> Iterator[Path | None]:
    """The source tree at ``BASE_COMMIT`` (with today's built speedups), or ``None``."""
    with tempfile.TemporaryDirectory(prefix="dsh-base-") as tmp:
        archive = Path(tmp) / "base.tar"
        try:
            with archive.open("wb") as out:
                subprocess.run(["git", "archive", BASE_COMMIT], cwd=ROOT, stdout=out, check=True)
        except (OSError, subprocess.CalledProcessError):
            yield None
            return
        tree = Path(tmp) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        for built in (ROOT / "core").glob("_speedups*.so"):
            shutil.copy2(built, tree / "core" / built.name)
        yield tree


_MAIN = """
import atexit, sys

def _peak():  # the process's own high-water mark: ru_maxrss of a child also counts the
    # parent's pages it was forked with, so a small command looked as big as its parent
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    print("dsh-bench-peak-kb", line.split()[1], file=sys.stderr)
    except OSError:
        pass

atexit.register(_peak)
from tui.cli.commands import main
sys.exit(main())
"""


def _commands(db: Path, out: Path) -> list[tuple[str, list[str]]]:
    dsh = [sys.executable, "-c", _MAIN, "--db", str(db)]
    replay = [sys.executable, "-c", _MAIN, "replay", str(out / "log.jsonl")]
    return [
        ("show", [*dsh, "show", SESSION]),
        ("show --json", [*dsh, "show", SESSION, "--json"]),
        ("export json", [*dsh, "export", SESSION, "--format", "json", "-o", str(out / "log.jsonl")]),
        ("export reference", [*dsh, "export", SESSION, "--format", "reference", "-o", str(out / "ref.jsonl")]),
        ("export md", [*dsh, "export", SESSION, "--format", "md", "-o", str(out / "log.md")]),
        ("replay --svg", [*replay, "--svg", str(out / "screen.svg")]),
        ("replay --text", [*replay, "--text"]),
    ]  # fmt: skip


def _env(tree: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(
        PYTHONPATH=str(tree),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    return env


def measure(megabytes: int, *, db: Path | None = None, baseline: bool = True) -> list[Row]:
    """The figures for a session of about ``megabytes`` MB, built in ``db`` when that file
    does not exist yet (and kept), else in a temp file."""
    with tempfile.TemporaryDirectory(prefix="dsh-big-") as tmp:
        base = Path(tmp)
        if db is None:
            db = base / "big.sqlite3"
        if not db.exists():
            started = time.perf_counter()
            asyncio.run(build(db, megabytes))
            print(f"  built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        count = asyncio.run(_count(db))
        size = db.stat().st_size / 1e6
        print(f"  {count:,} events, {size:,.0f} MB of SQLite", file=sys.stderr)
        label = f"{count:,} ev, {size:,.0f} MB"
        ours_out, base_out = base / "ours", base / "base"
        ours_out.mkdir()
        base_out.mkdir()
        figures: dict[str, tuple[float, float, int]] = {}
        for name, argv in _commands(db, ours_out):
            figures[name] = _measure(argv, cwd=ROOT, env=_env(ROOT, base))
            print(
                f"  {name}: {figures[name][0]:,.0f} MB, {figures[name][1]:.1f} s", file=sys.stderr
            )
        before: dict[str, tuple[float, float, int]] = {}
        with _baseline_tree() as tree:
            if tree is not None and baseline:
                for name, argv in _commands(db, base_out):
                    before[name] = _measure(argv, cwd=tree, env=_env(tree, base))
                    print(
                        f"  before: {name}: {before[name][0]:,.0f} MB, {before[name][1]:.1f} s",
                        file=sys.stderr,
                    )
        rows: list[Row] = []
        for name, (rss, seconds, code) in figures.items():
            was = before.get(name)
            bounded = not name.startswith("replay")  # replay reads its file whole (today)
            rows.append(
                Row(
                    workload=f"big_session {name}",
                    size=label,
                    ours=rss,
                    unit="MB",
                    target="< 100 MB + log/10" if bounded else "-",
                    met=(rss < 100 + size / 10 and code == 0) if bounded else None,
                    baseline=None if was is None else was[0],
                    ratio=None if was is None else rss / was[0],
                    note=f"{seconds:.1f} s"
                    + ("" if was is None else f" (before: {was[1]:.1f} s)")
                    + ("" if code == 0 else f"; exit {code}"),
                )
            )
        return rows


def run_workload(settings: Settings) -> list[Row]:
    megabytes = 48 if settings.quick else int(os.environ.get("DSH_BENCH_BIG_MB", "1024"))
    return measure(megabytes)


def main(argv: list[str] | None = None) -> int:
    from tests.benchmarks._common import format_table

    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_big_session")
    parser.add_argument("--mb", type=int, default=1024, help="size of the log (MB)")
    parser.add_argument("--db", type=Path, help="the database: built when missing, kept")
    parser.add_argument("--no-baseline", action="store_true", help="today's code only")
    args = parser.parse_args(argv)
    print(format_table(measure(args.mb, db=args.db, baseline=not args.no_baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

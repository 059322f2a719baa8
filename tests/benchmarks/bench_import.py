"""``dsh import`` of a large log, by hand (issue 31 §6): peak RSS and time of one child
process importing a generated log, then importing it again (already present: the stored
session is compared with the file), and ``dsh replay --text`` of a decompression bomb.

    python -m tests.benchmarks.bench_import [--mb 300] [--zstd] [--keep DIR]

The log is a dsh export of ``x/note`` events of about 600 bytes each (``--zstd``: a
reference log in Zstandard frames of 1,000 lines), written streamed. Before issue 31 the
import took 3-4 times the log's size; streamed, its peak is that of a batch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

CREATED = 1_785_000_000_000


def write_log(path: Path, megabytes: int, *, compressed: bool) -> tuple[int, int]:
    """The log at ``path``: ``(events, decompressed bytes)``."""
    target = megabytes * 1_000_000
    compress = zstandard.ZstdCompressor(write_checksum=True).compress
    if compressed:
        head = {"type": "session", "id": "big", "createdAt": CREATED, "cwd": "/w", "version": 0}
    else:
        head = {"type": "session", "id": "big", "created_at": CREATED, "cwd": "/w"}
    size = count = 0
    with path.open("wb") as out:
        lines = [json.dumps(head)]
        while size < target:
            event: dict[str, object] = {"type": "x/note", "seq": count, "time": CREATED + count}
            event["data"] = {"n": count, "text": f"note {count} " + "lorem ipsum dolor " * 30}
            if not compressed:
                event |= {"surface_op": None, "source_event_seqs": None}
            lines.append(json.dumps(event))
            count += 1
            if len(lines) >= 1000:
                size += _flush(out, lines, compress if compressed else None)
        size += _flush(out, lines, compress if compressed else None)
    return count, size


def _flush(out: object, lines: list[str], compress: object) -> int:
    data = "".join(x + "\n" for x in lines).encode()
    lines.clear()
    out.write(compress(data) if compress else data)  # type: ignore[attr-defined, operator]
    return len(data)


def run_child(*args: str) -> tuple[int, float, int, str]:
    """``(exit status, seconds, peak RSS in bytes, last stderr line)`` of ``dsh ARGS``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(p.returncode, rss, (p.stderr.strip().splitlines() or [''])[-1][:200], sep='\\t')\n"
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "tui.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seconds = time.perf_counter() - started
    status, rss, last = out.rstrip("\n").split("\t")
    return int(status), seconds, int(rss) * 1024, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=300, help="decompressed log size in MB")
    parser.add_argument("--zstd", action="store_true", help="a reference log in Zstandard")
    parser.add_argument("--keep", type=Path, help="work in this directory (kept)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        log = work / ("big.jsonl.zst" if args.zstd else "big.jsonl")
        db = work / "bench.sqlite3"
        db.unlink(missing_ok=True)
        events, size = write_log(log, args.mb, compressed=args.zstd)
        print(
            f"log: {events:,} events, {size / 1e6:,.0f} MB ({log.stat().st_size / 1e6:,.0f} MB on disk)"
        )
        for label in ("import", "import again (present)"):
            status, seconds, rss, last = run_child("--db", str(db), "import", str(log))
            print(f"{label}: exit {status}, {seconds:.1f} s, peak RSS {rss / 1e6:,.0f} MB  {last}")
        bomb = work / "bomb.jsonl.zst"
        head = {"type": "session", "id": "bomb", "createdAt": CREATED, "version": 0}
        spaces = zstandard.ZstdCompressor(write_checksum=True).compress(b" " * (64 << 20))
        bomb.write_bytes(
            zstandard.ZstdCompressor(write_checksum=True).compress(
                json.dumps(head).encode() + b"\n"
            )
            + spaces * 16
        )
        status, seconds, rss, last = run_child("--db", str(db), "replay", "--text", str(bomb))
        print(
            f"replay --text of a 1 GiB bomb: exit {status}, {seconds:.1f} s, peak RSS {rss / 1e6:,.0f} MB  {last}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m tests.benchmarks [--quick] [--json PATH] [--only NAME ...]``."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks import (
    bench_append,
    bench_big_session,
    bench_candidates,
    bench_import_claude,
    bench_latest_events,
    bench_llm,
    bench_mcp_read,
    bench_meter,
    bench_open,
    bench_prepare,
    bench_prepare_scale,
    bench_replay,
    bench_retention,
    bench_rls,
    bench_search,
    bench_storage,
    bench_stores,
    bench_team_load,
    bench_team_search,
    bench_ui,
)
from tests.benchmarks._common import Row, Settings, format_table

WORKLOADS: dict[str, Callable[[Settings], Any]] = {
    "retention": bench_retention.run_workload,
    "candidates": bench_candidates.run_workload,
    "prepare": bench_prepare.run_workload,
    "append": bench_append.run_workload,
    "ui": bench_ui.run_workload,
    "stores": bench_stores.run_workload,
    "storage": bench_storage.run_workload,
    "prepare_scale": bench_prepare_scale.run_workload,
    "replay": bench_replay.run_workload,
    "search": bench_search.run_workload,
    "open": bench_open.run_workload,
    "rls": bench_rls.run_workload,
    "team_search": bench_team_search.run_workload,
    "team_load": bench_team_load.run_workload,
    "big_session": bench_big_session.run_workload,
    "latest_events": bench_latest_events.run_workload,
    "meter": bench_meter.run_workload,
    "mcp_read": bench_mcp_read.run_workload,
    "import_claude": bench_import_claude.run_workload,
    "llm": bench_llm.run_workload,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(WORKLOADS), metavar="NAME", help="run only these"
    )
    args = parser.parse_args(argv)
    settings = Settings(quick=args.quick)
    names = args.only or list(WORKLOADS)
    rows: list[Row] = []
    timings: dict[str, float] = {}
    for name in names:
        print(f"running {name}…", file=sys.stderr, flush=True)
        started = time.perf_counter()
        result = WORKLOADS[name](settings)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        rows += result
        timings[name] = time.perf_counter() - started
        print(f"  {name} done in {timings[name]:.1f} s", file=sys.stderr, flush=True)
    print(format_table(rows))
    if args.json is not None:
        payload = {
            "quick": settings.quick,
            "machine": {
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
            },
            "workload_seconds": timings,
            "rows": [row.as_json() for row in rows],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Workload: ``dsh mcp``'s ``read_session`` on a 1,000,000-event session (200,000 with
``--quick``), beside ``prepare`` called directly on the same source.

The source is ``bench_prepare_scale``'s (turns of a user message, 80 streamed chunks, a
tool call and result, the reply; a compaction checkpoint over the first tenth). Three
timings, each the median of several reads after one warm-up read (the first two taken
in turn, so that whatever else the machine does weighs on both alike; the third once the
first two are done, its client alone in this process):

- ``prepare``: ``SessionReferenceService.prepare`` with one reference to the source, the
  bounded path a message's mention takes (default budget, 64 KiB);
- ``read_session`` in process: ``tui.mcp.sessions.read_session`` (finding the session,
  its title, then the same ``prepare``);
- ``read_session`` over stdio: a real ``dsh mcp`` process called by the SDK's client,
  the whole round trip (request, the read, the JSON-RPC answer with text and structured
  content, the client's parsing).

The snapshot the server returns is checked to be the very text ``prepare`` made.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from core.config import DshConfig
from core.log import SessionHeader
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceInput, SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.benchmarks._common import Row, Settings, median
from tests.benchmarks.bench_prepare_scale import source_events
from tui.mcp import sessions
from tui.shared.runtime import open_runtime

SOURCE = "source"


@asynccontextmanager
async def _mcp_client(path: Path) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """A real ``dsh mcp`` on ``path`` and a call of its ``read_session`` of the source."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    script = Path(sys.executable).with_name("dsh")
    command, head = (str(script), []) if script.exists() else (sys.executable, ["-m", "tui.cli"])
    with tempfile.TemporaryDirectory(prefix="dsh-bench-mcp-") as home:
        params = StdioServerParameters(
            command=command,
            args=[*head, "--db", str(path), "mcp"],
            env={"XDG_CONFIG_HOME": home, "XDG_STATE_HOME": home, "XDG_DATA_HOME": home},
            cwd=os.getcwd(),
        )
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()

            async def call() -> Any:
                result = await client.call_tool("read_session", {"session_id": SOURCE})
                assert not result.is_error, result
                return result

            yield call


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    result = await fn()
    return time.perf_counter() - started, result


async def run_workload(settings: Settings) -> list[Row]:
    events = 200_000 if settings.quick else 1_000_000
    reps = settings.reps(15, 7)
    prepare_t: list[float] = []
    inproc_t: list[float] = []
    stdio_t: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-", dir=Path.home()) as tmp:
        path = Path(tmp) / "mcp-read.sqlite3"
        batch = source_events(events)
        count = len(batch)
        async with await SqliteSessionStore.open(path) as store:
            await store.import_session(SessionHeader(SOURCE, 1_700_000_000_000, "/src"), batch)
            del batch
            service = SessionReferenceService(SessionQuery(store))
            target = SessionHeader("reader", 0)
            refs = [SessionReferenceInput(SOURCE, SOURCE)]  # untitled: labelled by its id
            config = DshConfig(database=path)
            async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:

                async def prepare() -> Any:
                    return await service.prepare(target, [], refs)

                async def read() -> Any:
                    return await sessions.read_session(rt, SOURCE)

                prepared, snapshot = await prepare(), await read()
                # In turn, so that whatever else the machine does weighs on both alike.
                for _ in range(reps):
                    for samples, fn in ((prepare_t, prepare), (inproc_t, read)):
                        seconds, _ = await _timed(fn)
                        samples.append(seconds)
        # The server process alone on the database (no client's reads in this one).
        async with _mcp_client(path) as over_stdio:
            answer = await over_stdio()
            for _ in range(reps):
                seconds, _ = await _timed(over_stdio)
                stdio_t.append(seconds)
        expected = prepared.additional_context["content"][0]["text"]
        if snapshot.text != expected:
            raise AssertionError("read_session's snapshot differs from prepare's")
        if answer.content[0].text != expected:
            raise AssertionError("dsh mcp's read_session differs from prepare's snapshot")
    size = f"{count:,} events"
    kib = len(expected.encode()) / 1024
    base = median(prepare_t)
    inproc, stdio = median(inproc_t), median(stdio_t)
    return [
        Row(
            "mcp read_session (in process) vs prepare",
            size,
            inproc,
            "s",
            "<= prepare + 10 ms",
            inproc <= base + 0.010,
            baseline=base,
            ratio=inproc / base,
            note="baseline column: SessionReferenceService.prepare with one reference, "
            f"called directly; the snapshot is {kib:.0f} KiB, identical",
            samples=inproc_t,
            baseline_samples=prepare_t,
        ),
        Row(
            "mcp read_session over stdio (dsh mcp) vs prepare",
            size,
            stdio,
            "s",
            "<= prepare + 50 ms",
            stdio <= base + 0.050,
            baseline=base,
            ratio=stdio / base,
            note="the SDK client's whole round trip to a real dsh mcp process; baseline "
            "column: prepare called directly",
            samples=stdio_t,
            baseline_samples=prepare_t,
        ),
    ]

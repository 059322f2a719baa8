"""Workload 7: ``prepare`` bounded by what it keeps: one source of 10,000 and one of
1,000,000 events of the same shape, default budget (64 KiB).

Each turn: a user message, 40 streamed chunks, a tool call and its result, 40 more
chunks, the assistant message and a turn end (85 events); a compaction checkpoint
replaces the first tenth of the conversation. The floor reads the same source with plain
``sqlite3`` and JSON-decodes every one of its events (each pack inflated and split): what
any algorithm that looks at all of them must at least do. Peak memory is the tracemalloc
peak of one ``prepare`` beside the bytes of the source object it keeps.
"""

from __future__ import annotations

import json
import random
import sqlite3
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
    NewEvent,
    Replace,
    SessionHeader,
    assistant_message,
    text_block,
    user_message,
)
from core.references import SessionReferenceInput, SessionReferenceService
from core.surface import fold_surface
from stores import SessionQuery, SqliteSessionStore
from stores.sqlite import _DATA, _body_parts, _rebuild_lines, _ReplyTexts, _text, _unlink_runs
from tests.benchmarks._common import Row, Settings, median, time_async, time_sync

WORDS = [
    "the",
    "build",
    "runs",
    "and",
    "release",
    "notes",
    "mention",
    "checkout",
    "中文",
    "测试",
    "latency",
    "budget",
]


def source_events(total: int, seed: int = 7) -> list[NewEvent]:
    rng = random.Random(seed)
    out: list[NewEvent] = []
    surface: list[int] = []
    turn = 0
    t = 1_764_000_000_000
    compacted = False
    while len(out) < total - 90:
        turn += 1
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60)))
        surface.append(len(out))
        out.append(NewEvent(USER_MESSAGE, user_message(words, id=f"u{turn}"), "append", time=t))
        parts: list[str] = []
        for half in range(2):
            for i in range(40):
                piece = rng.choice(WORDS) + " "
                parts.append(piece)
                chunk = {"type": "text-delta", "index": half * 40 + i, "text": piece}
                out.append(
                    NewEvent(ASSISTANT_CHUNK, {"turn": turn, "step": half, "chunk": chunk}, time=t)
                )
            if half == 0:
                call = {
                    "turn": turn,
                    "step": 0,
                    "call": {"id": f"c{turn}", "name": "grep", "arguments": "{}"},
                }
                out.append(NewEvent("tool/call", call, time=t))
                result = user_message(
                    "match " * rng.randint(1, 30), source={"kind": "tool", "callId": f"c{turn}"}
                )
                surface.append(len(out))
                out.append(
                    NewEvent(
                        TOOL_RESULT, {"turn": turn, "step": 1, "message": result}, "append", time=t
                    )
                )
        message = assistant_message(
            [text_block("".join(parts))], provider="p", model="m", id=f"a{turn}"
        )
        surface.append(len(out))
        out.append(
            NewEvent(
                ASSISTANT_MESSAGE, {"turn": turn, "step": 1, "message": message}, "append", time=t
            )
        )
        out.append(NewEvent(TURN_END, {"turn": turn, "status": "completed"}, time=t))
        t += 30_000
        if not compacted and len(out) >= total // 10:
            compacted = True
            summary = user_message(
                "<compacted-summary>\nwhat happened so far\n</compacted-summary>",
                source=COMPACT_CHECKPOINT_SOURCE,
            )
            out.append(
                NewEvent(
                    USER_MESSAGE, summary, Replace(surface[0], surface[-1]), list(surface), time=t
                )
            )
            surface = [len(out) - 1]
    return out


def floor(path: Path, sid: str) -> int:
    """Plain sqlite3: every event of the source, JSON-decoded (packs inflated, each line's
    JSON text rebuilt as the store lays it out, see ``stores.sqlite._pack``: a chunk run's
    skeleton put back, a run linked to its reply given its texts from the reply)."""
    conn = sqlite3.connect(path)
    try:
        count = 0
        (key,) = conn.execute("SELECT key FROM sessions WHERE id = ?", (sid.encode(),)).fetchone()
        replies = _ReplyTexts.of(conn, key)
        rows = conn.execute(
            f"SELECT seq, kind, {_DATA} FROM events WHERE session = ? ORDER BY seq", (key,)
        )
        for seq, kind, data in rows:
            if kind == 3:
                body = _unlink_runs(zlib.decompress(data), seq, None, replies)
                _types, _times, lines, runs = _body_parts(body.decode())
                count += len([json.loads(line) for line in _rebuild_lines(lines, runs)])
            else:
                json.loads(_text(data))
                count += 1
        return count
    finally:
        conn.close()


class _FullOnly:
    """The query as 1d17249's prepare used it (no outline read): every surface event is
    read, projected and retained, the before figure."""

    def __init__(self, query: SessionQuery) -> None:
        self._query = query

    async def read_surface(self, session_id: str) -> Any:
        return await self._query.read_surface(session_id)


async def one_size(tmp: Path, events: int, reps: int) -> dict[str, Any]:
    path = tmp / f"source-{events}.sqlite3"
    batch = source_events(events)
    async with await SqliteSessionStore.open(path) as store:
        await store.import_session(SessionHeader("source", 1_700_000_000_000, "/src"), batch)
        count = len(batch)
        del batch
        target = await store.create_session("target", cwd="/t")
        service = SessionReferenceService(SessionQuery(store))
        refs = [SessionReferenceInput("source", "Source")]

        async def ours() -> Any:
            prepared = await service.prepare(target, "hi", refs)
            assert prepared.additional_context is not None
            return prepared

        ours_t: list[float] = []
        floor_t: list[float] = []
        for _ in range(reps):
            ours_t += (await time_async(ours, 1))[0]
            floor_t += time_sync(lambda: floor(path, "source"), 1)[0]
        full_service = SessionReferenceService(_FullOnly(SessionQuery(store)))  # type: ignore[arg-type]

        async def full() -> Any:
            return await full_service.prepare(target, "hi", refs)

        full_t = (await time_async(full, max(1, reps // 2)))[0]
        # Opening the session: its newest page (tui.transcript's PAGE_SIZE items) with
        # every seq of its surface (read_surface_window: what the app and `dsh show
        # --tail` read when a replace is among the newest rows, just after a compaction,
        # and the seqs the transcript pages back through), and the newest page alone
        # (read_surface_page: what they read otherwise, as here).
        query = SessionQuery(store)
        window_t = (await time_async(lambda: query.read_surface_window("source", 24), reps))[0]
        page_t = (await time_async(lambda: query.read_surface_page("source", 24), reps))[0]
        tail_t = (await time_async(lambda: query.read_surface_tail("source", 24), reps))[0]
        nodes = len((await query.read_surface_seqs("source"))[0])
        prepared = await ours()
        kept = len(json.dumps(prepared.additional_context, ensure_ascii=False).encode())
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base, _ = tracemalloc.get_traced_memory()
            await ours()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        compacted, folded = await after_compaction(store, reps)
    return {
        "compacted": compacted,
        "folded": folded,
        "events": count,
        "ours": median(ours_t),
        "full": median(full_t),
        "window": median(window_t),
        "page": median(page_t),
        "tail": median(tail_t),
        "floor": median(floor_t),
        "nodes": nodes,
        "peak": peak - base,
        "kept": kept,
    }


async def after_compaction(store: SqliteSessionStore, reps: int) -> tuple[float, float]:
    """Median seconds of ``SessionQuery.read_surface`` (what a reply sends the model)
    once the source is compacted down to a checkpoint and one new message, and of what
    it did before: fold every surface event (``read_surface_events``). Run last: it
    changes the source."""
    query = SessionQuery(store)
    seqs = (await query.read_surface_seqs("source"))[0]
    summary = user_message("summary of everything so far", source=COMPACT_CHECKPOINT_SOURCE)
    op = Replace(seqs[0], seqs[-1])
    await store.append_batch("source", [NewEvent(USER_MESSAGE, summary, op, list(seqs))])
    await store.append("source", USER_MESSAGE, user_message("and now?"), surface_op="append")

    async def folded() -> Any:
        return fold_surface((await store.read_surface_events("source"))[2])

    now = (await time_async(lambda: query.read_surface("source"), reps))[0]
    before = (await time_async(folded, reps))[0]
    if list((await query.read_surface("source")).events) != await folded():
        raise AssertionError("read_surface differs from the fold of every surface event")
    return median(now), median(before)


async def run_workload(settings: Settings) -> list[Row]:
    small_n, large_n = (10_000, 200_000) if settings.quick else (10_000, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-", dir=Path.home()) as tmp:
        small = await one_size(Path(tmp), small_n, settings.reps(7, 3))
        large = await one_size(Path(tmp), large_n, settings.reps(5, 2))
    growth = large["ours"] / small["ours"]
    of_floor = large["ours"] / large["floor"]
    mem = large["peak"] / large["kept"]
    size = f"{large['events']:,} vs {small['events']:,} events"

    def flat(label: str, key: str) -> Row:
        """A read that must not grow with the session: within 3x of the small source's."""
        return Row(
            label,
            f"{large['events']:,} events",
            large[key],
            "s",
            "independent of length",
            large[key] <= 3 * small[key],
            baseline=small[key],
            ratio=large[key] / small[key],
            note="baseline column: the same on the small source (met: within 3x of it)",
        )

    def before_after(label: str, key: str, before: str, note: str) -> Row:
        """The large source's ``key`` beside what it took before (``before``)."""
        return Row(
            label,
            f"{large['events']:,} events",
            large[key],
            "s",
            "(before/after)",
            None,
            baseline=large[before],
            ratio=large[key] / large[before],
            note=note,
        )

    return [
        Row(
            "prepare scale: large / small source",
            size,
            large["ours"],
            "s",
            "<= 3x the small",
            growth <= 3,
            baseline=small["ours"],
            ratio=growth,
            note="baseline column: the same prepare on the small source",
        ),
        before_after(
            "prepare scale: outline + kept bodies vs whole surface",
            "ours",
            "full",
            "baseline column: the full algorithm (read, project, retain the whole "
            f"surface); on the small source {small['ours'] * 1e3:.1f} vs "
            f"{small['full'] * 1e3:.1f} ms",
        ),
        Row(
            "open: newest page (read_surface_window 24)",
            f"{large['events']:,} events",
            large["window"],
            "s",
            "< 300 ms (the page's reads)",
            large["window"] < 0.3,
            baseline=small["window"],
            ratio=large["window"] / small["window"],
            note=(
                "baseline column: the same on the small source; the app's drawing not "
                f"included; it returns every surface seq ({large['nodes']:,} vs "
                f"{small['nodes']:,})"
            ),
        ),
        flat("open: newest page alone (read_surface_page 24)", "page"),
        before_after(
            "reply: read_surface once compacted to 2 nodes",
            "compacted",
            "folded",
            "what a reply reads for the model; baseline column: the fold of every "
            "surface event it did before; on the small source "
            f"{small['compacted'] * 1e3:.2f} vs {small['folded'] * 1e3:.1f} ms (the "
            f"checkpoint kept holds its {large['nodes']:,} or {small['nodes']:,} "
            "source seqs)",
        ),
        flat("show --tail 24 (read_surface_tail)", "tail"),
        Row(
            "prepare scale: large source vs floor",
            f"{large['events']:,} events",
            large["ours"],
            "s",
            "<= 0.1x floor",
            of_floor <= 0.1,
            baseline=large["floor"],
            ratio=of_floor,
            note="floor: plain sqlite3 reading and json-decoding every event of the source",
        ),
        Row(
            "prepare scale: peak memory",
            f"{large['events']:,} events",
            large["peak"] / 1e6,
            "MB",
            "<= 3x bytes kept",
            mem <= 3,
            baseline=large["kept"] / 1e6,
            ratio=mem,
            note="baseline column: MB of the source object kept; tracemalloc peak",
        ),
    ]

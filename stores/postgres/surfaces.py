"""The PostgreSQL store's surface tracking: ``dsh_surface_nodes`` and ``dsh_surface_sums``
kept in step with each batch (issue 15), and the upgrade that folded every surface once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from core.errors import StoreError
from core.jsoncodec import loads_exact
from core.log import SurfaceOutline, ValidatedEvent, build_event
from core.references.projection import projection_code
from core.surface import fold_surface
from stores.columns import decode_op, decode_seqs, decode_text
from stores.surfaces import folded_nodes, node_runs
from stores.validation import KIND_SURFACE

_IS_REPLACE = """kind = 1 AND surface_op <> '"append"'"""
"""A surface event that is not an append: the WHERE of the ``dsh_events_replaces`` index
(migration step 6 wrote it: never change it) and of the query that reads it
(``read_surface_nodes``), which the planner can prove implies the index's."""


_INSERT_NODE_SQL = (
    "INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection) VALUES ($1, $2, $3, $4)"
)


async def _track_surface(
    conn: asyncpg.Connection,
    key: int,
    first: int,
    batch: Sequence[ValidatedEvent],
    codes: Sequence[int | None],
) -> None:
    """Keep ``dsh_surface_nodes`` and ``dsh_surface_sums`` in step with a batch whose
    surface operations were checked (so every replace's range is on the surface): the
    runs of nodes it adds (``stores.surfaces.node_runs``), each written after the nodes
    its replace shadows went."""
    runs, sums = node_runs(
        first,
        [
            (offset, v.surface_op, code)
            for offset, (v, code) in enumerate(zip(batch, codes, strict=True))
            if v.surface_op is not None and code is not None
        ],
    )
    for run in runs:
        lo = None
        op = run.replace
        if op is not None:
            ends = await conn.fetch(
                "SELECT pos FROM dsh_surface_nodes WHERE session_key = $1 "
                "AND seq IN ($2, $3) ORDER BY pos",
                key,
                op.start,
                op.end,
            )
            if not ends:
                raise StoreError(f"the surface index lacks seqs {op.start}..{op.end}")
            lo, hi = ends[0][0], ends[-1][0]
            for (gone,) in await conn.fetch(
                "SELECT dsh_shadow_nodes($1, $2, $3)",
                key,
                lo,
                hi,
            ):
                sums.remove(gone)
        await conn.executemany(_INSERT_NODE_SQL, run.rows(key, lo))
    if sums.messages or sums.bytes:
        await conn.execute(
            "INSERT INTO dsh_surface_sums (session_key, messages, bytes) VALUES ($1, $2, $3) "
            "ON CONFLICT (session_key) DO UPDATE "
            "SET messages = dsh_surface_sums.messages + excluded.messages, "
            "bytes = dsh_surface_sums.bytes + excluded.bytes",
            key,
            sums.messages,
            sums.bytes,
        )


_BACKFILL_REPORT_MIN = 100_000
"""An upgrade folding at least this many surface rows reports its progress."""
_BACKFILL_BATCH = 50_000


async def _backfill_surfaces(
    conn: asyncpg.Connection,
    progress: Callable[[int, int], None] | None,
    only: list[int] | None = None,
) -> None:
    """Migration to schema 3: fold every session's surface once into
    ``dsh_surface_nodes`` and ``dsh_surface_sums`` (positions: the node's rank, below
    every later seq). ``only``: these sessions alone (schema 8, nodes and sums gone)."""
    total = await conn.fetchval(f"SELECT count(*) FROM dsh_events WHERE kind = {KIND_SURFACE}")
    report = progress if progress is not None and total >= _BACKFILL_REPORT_MIN else None
    if only is not None:
        report = None
    done = 0
    keys = [row[0] for row in await conn.fetch("SELECT key FROM dsh_sessions ORDER BY key")]
    if only is not None:
        keys = only
    for key in keys:
        # Pages by seq (keyset), not a cursor: a cursor's portal would stay open to the
        # end of the transaction, and a later step's ALTER TABLE dsh_events refuses to
        # run while one is ("being used by active queries in this session").
        outline: list[SurfaceOutline] = []
        after = -1
        try:
            while rows := await conn.fetch(
                "SELECT seq, type, time, data, surface_op, source_event_seqs, projection "
                f"FROM dsh_events WHERE session_key = $1 AND kind = {KIND_SURFACE} "
                "AND seq > $2 ORDER BY seq LIMIT $3",
                key,
                after,
                _BACKFILL_BATCH,
            ):
                after = rows[-1][0]
                for seq, type_, time, data, op_json, seqs_json, code in rows:
                    op = decode_op(op_json)
                    seqs = None if seqs_json is None else decode_seqs(seqs_json)
                    if code is None:  # written before schema 2
                        event = build_event(
                            seq, decode_text(type_), time, loads_exact(data), op, seqs
                        )
                        code = projection_code(event)
                    outline.append(SurfaceOutline(seq, op, seqs, code))
                done += len(rows)
                if report is not None:
                    report(done, total)
            nodes = fold_surface(outline)
        except (ValueError, TypeError) as err:  # InvalidEventError is a ValueError
            raise StoreError(f"cannot upgrade: a stored event is corrupt ({err})") from err
        rows, sums = folded_nodes(key, nodes)
        await conn.executemany(_INSERT_NODE_SQL, rows)
        if sums.messages:
            await conn.execute(
                "INSERT INTO dsh_surface_sums (session_key, messages, bytes) VALUES ($1, $2, $3)",
                key,
                sums.messages,
                sums.bytes,
            )
    if report is not None and done < total:
        report(total, total)

"""The surface rules every store keeps the same way (issues 15 and 35), backend-free: the
surface a batch with a replace is checked against, which nodes a batch adds and which its
replaces take the place of, which messages leave the search index with them, and the nodes
an upgrade writes for a surface folded whole.

Each store reads and writes its own tables in its own dialect (``stores.postgres.surfaces``,
the SQLite store's surface module); the arithmetic is here, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.log import Event, Replace, SurfaceOp, SurfaceOutline
from core.references.projection import MessageSums
from core.surface import SurfaceFolder
from stores.columns import decode_op, decode_seqs

__all__ = ["NodeRun", "fold_stored", "folded_nodes", "node_runs", "shadowed_seqs"]

NodeRow = tuple[int, int, int, int]
"""A row of a surface-node table: ``(session key, pos, seq, projection)``."""


def fold_stored(rows: Iterable[Sequence[Any]]) -> SurfaceFolder[None]:
    """The surface folded from a session's stored surface rows ``(seq, surface_op,
    source_event_seqs)`` (the columns' JSON, ``stores.columns``) in seq order: what a
    batch with a replace is checked against (``stores.validation.check_batch``). A stored
    op that does not decode raises ``ValueError`` or ``TypeError``."""
    folder: SurfaceFolder[None] = SurfaceFolder()
    for seq, op, seqs in rows:
        folder.apply(seq, decode_op(op), None if seqs is None else decode_seqs(seqs), None)
    return folder


@dataclass(slots=True)
class NodeRun:
    """Surface nodes a batch adds one after another, written together. A run after the
    first starts with a ``replace`` (its own ``seq`` and ``projection``): the store looks
    up the positions of the nodes holding ``replace.start`` and ``replace.end``, removes
    the nodes between them (inclusive; their codes leave the sums), and the replace's node
    takes the first one's position. ``appends`` (``(seq, projection)``) follow, each at
    the position of its seq (below every later one)."""

    replace: Replace | None = None
    seq: int = -1
    projection: int = 0
    appends: list[tuple[int, int]] = field(default_factory=list)

    def rows(self, key: int, pos: int | None = None) -> list[NodeRow]:
        """The run's rows for session ``key``; ``pos``: the replace node's position (the
        first node it shadows)."""
        head: list[NodeRow] = []
        if self.replace is not None:
            assert pos is not None, "a replace's node takes the position it shadows"
            head.append((key, pos, self.seq, self.projection))
        return head + [(key, seq, seq, code) for seq, code in self.appends]


def node_runs(
    first: int, surface: Iterable[tuple[int, SurfaceOp, int]]
) -> tuple[list[NodeRun], MessageSums]:
    """How a batch appended from seq ``first``, whose surface operations were checked (so
    every replace's range is on the surface), changes a session's surface nodes: its runs
    in order (none empty), and the sums its own nodes add (the store subtracts the codes of
    the nodes its replaces remove). ``surface``: the batch's surface events as
    ``(offset in the batch, surface op, projection code)``, in order."""
    runs = [NodeRun()]
    sums = MessageSums()
    for offset, op, code in surface:
        seq = first + offset
        if isinstance(op, Replace):
            runs.append(NodeRun(op, seq, code))
        else:
            runs[-1].appends.append((seq, code))
        sums.add(code)
    return [run for run in runs if run.replace is not None or run.appends], sums


def shadowed_seqs(events: Iterable[Event], folder: SurfaceFolder[Any]) -> list[int]:
    """The seqs whose messages leave the search index after ``events`` were appended: the
    sources of each of their replaces that are not on the surface after the batch
    (``folder``, which holds it whenever the batch has a replace)."""
    gone: list[int] = []
    for event in events:
        op = event.surface_op
        if op is not None and op != "append":
            gone.extend(seq for seq in event.source_event_seqs or () if seq not in folder)
    return gone


def folded_nodes(key: int, nodes: Sequence[SurfaceOutline]) -> tuple[list[NodeRow], MessageSums]:
    """The node rows of a surface folded whole (``core.surface.fold_surface``), for an
    upgrade's backfill: each node at its rank (below every later seq); and their sums."""
    rows = [(key, pos, n.seq, n.projection) for pos, n in enumerate(nodes)]
    return rows, MessageSums(n.projection for n in nodes)

"""The rules every store keeps the same way (``stores.surfaces``, ``stores.search``,
``stores.sharing``), without a backend: the node upkeep of a batch played on a model of a
surface-node table agrees with folding the whole log, whatever the batches."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ShareError
from core.log import Event, Replace, SurfaceOp, SurfaceOutline
from core.references.projection import MessageSums
from core.search import rank_hits
from core.surface import SurfaceFolder, fold_surface
from stores.columns import encode_op, encode_seqs
from stores.search import SearchPlan, plan_search
from stores.sharing import share_target
from stores.surfaces import NodeRun, fold_stored, folded_nodes, node_runs, shadowed_seqs

KEY = 7

CODES = st.one_of(st.just(-1), st.integers(0, 4_000))
"""Projection codes: no message, or ``4 * bytes + 2 * checkpoint + assistant``."""


class NodeTable:
    """A model of a store's surface-node table (position -> seq, projection), kept the
    way both SQL stores keep theirs from ``node_runs``."""

    def __init__(self) -> None:
        self.nodes: dict[int, tuple[int, int]] = {}
        self.sums = MessageSums()

    def write(self, first: int, surface: list[tuple[int, SurfaceOp, int]]) -> None:
        runs, sums = node_runs(first, surface)
        assert all(run.replace is not None or run.appends for run in runs)
        assert all(run.replace is not None for run in runs[1:])
        for run in runs:
            pos = None
            if run.replace is not None:
                ends = sorted(
                    p
                    for p, (s, _) in self.nodes.items()
                    if s in (run.replace.start, run.replace.end)
                )
                assert ends, "a checked replace's range is on the surface"
                pos = ends[0]
                for p in [p for p in self.nodes if ends[0] <= p <= ends[-1]]:
                    sums.remove(self.nodes.pop(p)[1])
            for key, p, seq, code in run.rows(KEY, pos):
                assert key == KEY and p not in self.nodes
                self.nodes[p] = (seq, code)
        self.sums.messages += sums.messages
        self.sums.bytes += sums.bytes

    def seqs(self) -> list[int]:
        return [seq for _, (seq, _) in sorted(self.nodes.items())]


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[SurfaceOutline | None], list[int]]:
    """A valid log (``None``: a log-only event; else its outline) and where batches end."""
    folder: SurfaceFolder[None] = SurfaceFolder()
    log: list[SurfaceOutline | None] = []
    for seq in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["log", "append", "append", "replace"]))
        surface = folder.seqs()
        if kind == "log":
            log.append(None)
            continue
        op: SurfaceOp = "append"
        sources: tuple[int, ...] | None = None
        if kind == "replace" and surface:
            i = draw(st.integers(0, len(surface) - 1))
            j = draw(st.integers(i, len(surface) - 1))
            op = Replace(surface[i], surface[j])
            sources = tuple(surface[i : j + 1])
        folder.apply(seq, op, sources, None)
        log.append(SurfaceOutline(seq, op, sources, draw(CODES)))
    cuts = sorted(draw(st.sets(st.integers(0, len(log)), max_size=6)) | {0, len(log)})
    return log, cuts


@settings(max_examples=150, deadline=None)
@given(logs())
def test_node_runs_keep_the_nodes_and_sums_of_the_folded_surface(
    drawn: tuple[list[SurfaceOutline | None], list[int]],
) -> None:
    log, cuts = drawn
    table = NodeTable()
    for start, end in itertools.pairwise(cuts):
        table.write(
            start,
            [
                (row.seq - start, row.surface_op, row.projection)
                for row in log[start:end]
                if row is not None
            ],
        )
    folded = fold_surface(row for row in log if row is not None)
    assert table.seqs() == [node.seq for node in folded]
    want = MessageSums(node.projection for node in folded)
    assert (table.sums.messages, table.sums.bytes) == (want.messages, want.bytes)
    rows, sums = folded_nodes(KEY, folded)
    assert [(seq, code) for _, _, seq, code in rows] == [(n.seq, n.projection) for n in folded]
    assert [pos for _, pos, _, _ in rows] == list(range(len(folded)))
    assert (sums.messages, sums.bytes) == (want.messages, want.bytes)


@given(logs())
def test_fold_stored_folds_the_stored_columns(
    drawn: tuple[list[SurfaceOutline | None], list[int]],
) -> None:
    rows = [row for row in drawn[0] if row is not None]
    stored = [
        (
            r.seq,
            encode_op(r.surface_op),
            None if r.source_event_seqs is None else encode_seqs(r.source_event_seqs),
        )
        for r in rows
    ]
    assert fold_stored(stored).seqs() == [node.seq for node in fold_surface(rows)]


def test_a_run_of_appends_and_a_replace() -> None:
    runs, sums = node_runs(10, [(0, "append", 8), (2, Replace(3, 10), 12), (3, "append", -1)])
    assert runs == [NodeRun(None, appends=[(10, 8)]), NodeRun(Replace(3, 10), 12, 12, [(13, -1)])]
    assert runs[1].rows(KEY, 4) == [(KEY, 4, 12, 12), (KEY, 13, 13, -1)]
    assert (sums.messages, sums.bytes) == (2, 5)
    # A batch that starts with a replace has no first run of appends.
    assert [run.replace for run in node_runs(5, [(0, Replace(1, 2), 0)])[0]] == [Replace(1, 2)]
    with pytest.raises(AssertionError):
        runs[1].rows(KEY)


def test_shadowed_seqs_are_the_sources_that_left_the_surface() -> None:
    folder: SurfaceFolder[None] = SurfaceFolder()
    events = [
        Event(0, "t", 0, {}, "append"),
        Event(1, "t", 0, {}, "append"),
        Event(2, "t", 0, {}),
        Event(3, "t", 0, {}, Replace(0, 1), (0, 1)),
        Event(4, "t", 0, {}, "append", (3,)),
    ]
    for event in events:
        if event.surface_op is not None:
            folder.apply(event.seq, event.surface_op, event.source_event_seqs, None)
    assert shadowed_seqs(events, folder) == [0, 1]
    assert shadowed_seqs(events[:2], folder) == []


def test_plan_search() -> None:
    assert plan_search("   ", 5) is None
    with pytest.raises(ValueError):
        plan_search("   ", 0)  # a bad limit is refused whatever the query
    plan = plan_search("Chi chi words", 3)
    assert plan == SearchPlan(["Chi", "words"], 3)  # distinct terms, folded
    assert plan is not None
    found = [("s", 2, "chi words"), ("s", 1, "no"), ("t", 0, "CHI WORDS again")]
    assert plan.rank(found) == rank_hits(found, plan.terms, 3)


def test_share_target_checks_the_session_then_the_user() -> None:
    assert share_target("s", "bob") == ("s", "bob")
    with pytest.raises(TypeError):
        share_target(1, "")  # the id first
    with pytest.raises(ShareError):
        share_target("s", "")

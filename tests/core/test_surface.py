"""Surface folding (SPEC §2.3): node order, replace by value, provenance, rejection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidEventError
from core.log import ASSISTANT_CHUNK, USER_MESSAGE, Event, Replace, SurfaceOp, user_message
from core.surface import SurfaceFolder, fold_surface


def ev(seq: int, op: SurfaceOp | None = "append", sources: tuple[int, ...] | None = None) -> Event:
    if op is None:
        return Event(seq, ASSISTANT_CHUNK, 0, {"chunk": {}})
    return Event(seq, USER_MESSAGE, 0, user_message(str(seq)), op, sources)


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]


def test_appends_keep_order_and_log_only_events_are_skipped() -> None:
    assert seqs(fold_surface([ev(0), ev(1, None), ev(2)])) == [0, 2]


def test_replace_returns_node_order_not_seq_order() -> None:
    log = [ev(0), ev(1), ev(2), ev(3, Replace(0, 1), (0, 1))]
    assert seqs(fold_surface(log)) == [3, 2]


def test_replace_of_a_single_node_and_of_everything() -> None:
    assert seqs(fold_surface([ev(0), ev(1), ev(2, Replace(1, 1), (1,))])) == [0, 2]
    everything = [ev(0), ev(1), ev(2), ev(3, Replace(0, 2), (0, 1, 2))]
    assert seqs(fold_surface(everything)) == [3]


def test_replace_finds_nodes_by_value_among_current_nodes() -> None:
    log = [
        ev(0),
        ev(1),
        ev(2),
        ev(3, Replace(1, 2), (1, 2)),
        ev(4),
        ev(5, Replace(3, 4), (3, 4, 1)),
    ]
    assert seqs(fold_surface(log)) == [0, 5]


@pytest.mark.parametrize(
    ("log", "message"),
    [
        ([ev(0), ev(1, Replace(5, 5), (0,))], "not on the surface"),
        ([ev(0), ev(1), ev(2, Replace(1, 0), (0, 1))], "comes after"),
        ([ev(0), ev(1), ev(2, Replace(0, 1), (0,))], "missing [1]"),
        ([ev(0), ev(1), ev(2, Replace(0, 1), None)], "missing [0, 1]"),
        (
            [ev(0), ev(1), ev(2, Replace(0, 0), (0,)), ev(3, Replace(0, 0), (0,))],
            "not on the surface",
        ),
        ([ev(0), ev(1, "append", (1,))], "not lower"),
        ([ev(0), ev(1, None), ev(2, Replace(1, 1), (1,))], "not on the surface"),
    ],
)
def test_invalid_operations_are_rejected(log: list[Event], message: str) -> None:
    with pytest.raises(InvalidEventError, match=message.replace("[", r"\[").replace("]", r"\]")):
        fold_surface(log)


def test_extra_earlier_provenance_is_allowed() -> None:
    log = [ev(0), ev(1, None), ev(2), ev(3, Replace(2, 2), (0, 1, 2))]
    assert seqs(fold_surface(log)) == [0, 3]


def test_rejected_operation_leaves_the_folder_unchanged() -> None:
    folder: SurfaceFolder[int] = SurfaceFolder()
    for s in range(3):
        folder.apply(s, "append", None, s)
    with pytest.raises(InvalidEventError):
        folder.apply(3, Replace(2, 0), (0, 1, 2), 3)
    with pytest.raises(InvalidEventError):
        folder.apply(3, Replace(0, 1), (0,), 3)
    assert folder.items() == [0, 1, 2]
    assert folder.apply(3, Replace(0, 1), (0, 1), 3) == [0, 1]
    assert folder.items() == [3, 2] and folder.seqs() == [3, 2]
    assert len(folder) == 2 and 3 in folder and 0 not in folder


def test_long_folds_are_linear_enough() -> None:
    n = 100_000
    log = [ev(i) for i in range(n)]
    log.append(ev(n, Replace(0, n - 1), tuple(range(n))))
    assert seqs(fold_surface(log)) == [n]


# --------------------------------------------------------------------------- property test

op_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.just(0), st.just(0), st.booleans()),
        st.tuples(st.just("log"), st.just(0), st.just(0), st.booleans()),
        st.tuples(st.just("replace"), st.integers(0, 30), st.integers(0, 30), st.booleans()),
    ),
    max_size=40,
)


@given(op_strategy)
@settings(max_examples=400)
def test_folding_matches_a_simple_list_model(ops: list[tuple[str, int, int, bool]]) -> None:
    model: list[int] = []
    folder: SurfaceFolder[int] = SurfaceFolder()
    seq = 0
    for kind, a, b, full_provenance in ops:
        if kind == "log":
            seq += 1  # log-only events take a seq but never reach the surface
            continue
        if kind == "append":
            model.append(seq)
            folder.apply(seq, "append", None, seq)
            seq += 1
            continue
        valid = a in model and b in model and model.index(a) <= model.index(b)
        run = model[model.index(a) : model.index(b) + 1] if valid else []
        provenance = tuple(run) if full_provenance else tuple(run[:-1])
        expect_ok = valid and full_provenance
        if expect_ok:
            folder.apply(seq, Replace(a, b), provenance, seq)
            i = model.index(a)
            model[i : model.index(b) + 1] = [seq]
            seq += 1
        else:
            with pytest.raises(InvalidEventError):
                folder.apply(seq, Replace(a, b), provenance, seq)
        assert folder.items() == model


def _fold_with_folder(log: list[Event]) -> list[int] | str:
    folder: SurfaceFolder[int] = SurfaceFolder()
    try:
        for e in log:
            if e.surface_op is not None:
                folder.apply(e.seq, e.surface_op, e.source_event_seqs, e.seq)
    except InvalidEventError:
        return "error"
    return folder.items()


log_strategy = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.just(0),
            st.just(0),
            st.lists(st.integers(0, 40), max_size=2, unique=True),
        ),
        st.tuples(st.just("log"), st.just(0), st.just(0), st.just([])),
        st.tuples(
            st.just("replace"),
            st.integers(0, 40),
            st.integers(0, 40),
            st.lists(st.integers(0, 40), max_size=8, unique=True),
        ),
    ),
    max_size=40,
)


@given(log_strategy)
@settings(max_examples=400)
def test_fold_surface_fast_path_agrees_with_the_folder(
    ops: list[tuple[str, int, int, list[int]]],
) -> None:
    log: list[Event] = []
    for seq, (kind, a, b, sources) in enumerate(ops):
        if kind == "log":
            log.append(ev(seq, None))
        elif kind == "append":
            log.append(ev(seq, "append", tuple(sources) or None))
        else:
            # give replaces the provenance they need half of the time
            log.append(
                ev(
                    seq,
                    Replace(a, b),
                    tuple(sorted(set(sources) | set(range(min(a, b), max(a, b) + 1))))
                    if a % 2
                    else tuple(sources),
                )
            )
    expected = _fold_with_folder(log)
    try:
        got: list[int] | str = seqs(fold_surface(log))
    except InvalidEventError:
        got = "error"
    assert got == expected

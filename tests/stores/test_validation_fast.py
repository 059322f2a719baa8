"""The append path's fast paths against their plain versions. ``validate_batch``'s fast path for the common event shapes against its plain path: the
same validated events (types, data detached and frozen, JSON text, ops, times) for every
batch, and for a batch the fast path does not take, exactly the plain path's outcome
(its result, or its error and message)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import jsoncodec, log
from core.errors import InvalidEventError
from core.jsoncodec import FrozenDict, dumps_js
from core.log import ASSISTANT_CHUNK, USER_MESSAGE, NewEvent, Replace, now_ms
from core.timestamps import MAX_EPOCH_MS
from stores import validation
from stores.sqlite import _header_fields, _pack_header
from tests.core.test_speedups import encodable, json_like
from tests.core.test_speedups_reads import same


class _Dict(dict[str, Any]):
    pass


class _Str(str):
    pass


class _Int(int):
    pass


class _NewEvent(NewEvent):
    pass


datas = st.one_of(
    st.dictionaries(st.text(max_size=4), encodable, max_size=4),
    st.dictionaries(st.text(max_size=4), encodable, max_size=4).map(FrozenDict),
    st.dictionaries(st.text(max_size=4), encodable, max_size=3).map(_Dict),
    st.dictionaries(st.text(max_size=4), json_like, max_size=3),
    st.sampled_from([[], "x", None, {1: 2}, {"f": 1.5}, {"n": float("nan")}]),
)
types = st.sampled_from(
    [ASSISTANT_CHUNK, USER_MESSAGE, "turn/end", "x/unknown", "", _Str("turn/end"), 3, None]
)
ops = st.sampled_from([None, None, "append", _Str("append"), Replace(0, 0), "bogus", 1])
seqs = st.sampled_from([None, None, None, (), [0], [1, 1], "0"])


def _times() -> st.SearchStrategy[Any]:
    now = now_ms()
    return st.one_of(
        st.none(),
        st.integers(0, now),
        st.sampled_from(
            [
                -1,
                0,
                True,
                1.0,
                _Int(5),
                MAX_EPOCH_MS,
                MAX_EPOCH_MS + 1,
                2**70,
                now + 2 * 86_400_000,
            ]
        ),
    )


new_events = st.builds(
    lambda cls, t, d, o, s, tm: cls(t, d, o, s, tm),
    st.sampled_from([NewEvent, NewEvent, NewEvent, _NewEvent]),
    types,
    datas,
    ops,
    seqs,
    _times(),
)
batches = st.lists(new_events | st.sampled_from([None, "event"]), max_size=6)


_CLOCK = re.compile(r"\(the clock says \d+\)")


class _Seq(Sequence[Any]):
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        return self.items[index]


def _outcome(run: Any, events: list[Any]) -> tuple[str, Any]:
    try:
        return "ok", run(events)
    except InvalidEventError as err:
        return "InvalidEventError", str(err)
    except (TypeError, ValueError) as err:
        return type(err).__name__, str(err)


def _plain(events: list[Any]) -> tuple[str, Any]:
    """The plain path, with the C encoder's fast path off as well (dumps_js as before)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsoncodec, "_encode_js", None)
        return _outcome(validation._validate_plain, events)


def _agree(got: list[Any], want: list[Any], events: list[Any], before: int, after: int) -> None:
    assert len(got) == len(want)
    for g, w, e in zip(got, want, events, strict=True):
        assert type(g) is type(w) is validation.ValidatedEvent
        assert (g.type, g.data_json, g.surface_op, g.source_event_seqs) == (
            w.type,
            w.data_json,
            w.surface_op,
            w.source_event_seqs,
        )
        assert type(g.type) is type(w.type) and type(g.surface_op) is type(w.surface_op)
        assert same(g.data, w.data)
        assert g.data is not e.data
        if e.time is None:  # each path read the clock itself
            assert before <= g.time <= after and before <= w.time <= after
        else:
            assert g.time is e.time and w.time is e.time


@settings(max_examples=150)
@given(batches)
def test_the_fast_path_gives_exactly_the_plain_paths_outcome(
    events: list[Any],
) -> None:
    before = now_ms()
    fast = validation._validate_common(events)
    fast_py = validation._py_validate_common(events, MAX_EPOCH_MS, now_ms)
    if validation.SPEEDUPS:
        assert validation._c_validate_common is not None  # the C loop is the one in use
        assert (fast is None) is (fast_py is None)
    else:  # DSH_PURE_PYTHON=1: no fast path; the plain path decides (and must agree below)
        assert fast is None
    got = _outcome(validation.validate_batch, events)
    want = _plain(events)
    after = now_ms()
    assert got[0] == want[0]
    if got[0] == "ok":
        _agree(got[1], want[1], events, before, after)
    else:  # the same message, but for the clock it quotes (read at another moment)
        assert _CLOCK.sub("", got[1]) == _CLOCK.sub("", want[1])
        assert fast is None  # the fast path never decides an error
    if fast is not None:
        _agree(fast, want[1], events, before, after)
    if fast_py is not None:
        assert got[0] == "ok"
        _agree(fast_py, want[1], events, before, after)
    # Any other sequence takes the plain path, and the same batch as a tuple the same way.
    assert validation._validate_common(_Seq(events)) is None
    assert (validation._validate_common(tuple(events)) is None) is (fast is None)


@settings(max_examples=100)
@given(
    st.lists(
        st.builds(
            NewEvent,
            st.sampled_from([ASSISTANT_CHUNK, "turn/end"]),
            st.dictionaries(st.text(max_size=4), encodable, max_size=4),
            st.none(),
            st.none(),
            st.integers(0, now_ms()) | st.none(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_common_batches_take_the_fast_path(
    events: list[NewEvent],
) -> None:
    """Batches of the common shapes with 64-bit ints are all taken by the fast path."""
    fits = all(jsoncodec.encode_frozen(e.data) is not None for e in events)  # wider ints are not
    before = now_ms()
    fast = validation._validate_common(events)
    want = _plain(events)
    assert (fast is not None) is fits
    if fast is not None:
        assert want[0] == "ok"
        _agree(fast, want[1], events, before, now_ms())


def test_the_fast_path_is_off_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "SPEEDUPS", False)
    events = [NewEvent("turn/end", {"turn": 1}, time=5)]
    assert validation._validate_common(events) is None
    assert validation.validate_batch(events)[0].data_json == '{"turn":1}'


@settings(max_examples=200)
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=()), max_size=4)
        | st.sampled_from(["a", "x/y", "\x7f", "a\x00", "\t", "é", '"q"', "b\\s", "\ud800", "中"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    st.integers(0, 2),
    st.lists(st.integers(-(2**70), 2**70) | st.integers(-5, 5), min_size=1, max_size=6),
    st.lists(st.lists(st.integers(-(2**64), 2**64), min_size=5, max_size=5), max_size=3),
)
def test_a_packs_header_is_json_dumps_of_it(
    table: list[str], mode: int, deltas: list[int], runs: list[list[int]]
) -> None:
    """The header line of a pack (stores.sqlite._pack_header's fast encoding) is exactly
    what json.dumps wrote before when every type name is printable ASCII, else what
    dumps_js writes (json.dumps escaped an astral character and a pair of lone surrogates
    alike); as a pack holds it (four fields when a type is not printable ASCII), it
    reads back as the very fields, for every type name, time and chunk run."""
    index: int | list[int] = 0 if mode == 0 else [i % len(table) for i in range(len(deltas))]
    fields: list[Any] = [table, index, deltas, runs] if runs else [table, index, deltas]
    plain = all(t.isascii() and t.isprintable() for t in table)
    want = json.dumps(fields, separators=(",", ":")) if plain else dumps_js(fields)
    assert _pack_header(fields) == want
    assert _pack_header([[_Str(t) for t in table], *fields[1:]]) == want
    # As _pack_blob writes it: with four fields (runs or none) when a type is not plain.
    written = fields if plain or runs else [*fields, []]
    assert _header_fields(_pack_header(written)) == written


def test_the_fast_path_reads_the_clock_the_plain_path_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events without a time get core.log.now_ms as the plain path finds it (the UI tests
    fix that clock), while given times are checked against the real one as before."""
    ticks = iter(range(1_000, 2_000))
    monkeypatch.setattr(log, "now_ms", lambda: next(ticks))
    events = [
        NewEvent(ASSISTANT_CHUNK, {"i": 0}),
        NewEvent(ASSISTANT_CHUNK, {"i": 1}, time=now_ms()),
        NewEvent(ASSISTANT_CHUNK, {"i": 2}),
    ]
    fast = validation._validate_common(events)
    tick = 1_000
    if validation.SPEEDUPS:
        assert fast is not None and [fast[0].time, fast[2].time] == [tick, tick + 1]
        tick += 2
    else:  # DSH_PURE_PYTHON=1: no fast path, and it read no clock
        assert fast is None
    assert [v.time for v in validation._validate_plain(events)][::2] == [tick, tick + 1]
    tick += 2
    py = validation._py_validate_common(events, MAX_EPOCH_MS, log.now_ms)
    if validation.SPEEDUPS:
        assert py is not None and [py[0].time, py[2].time] == [tick, tick + 1]
        tick += 2
    else:  # its encoder (encode_frozen) is the C one: it declines every batch
        assert py is None
    times = [v.time for v in validation.validate_batch(events)][::2]
    assert times[0] >= tick and times == [times[0], times[0] + 1]
    assert times[0] == tick or not validation.SPEEDUPS  # the plain path's own reads


@pytest.mark.parametrize(
    "data",
    [
        {"title": "t" * 1025},
        {"title": "\ud800" * 342},
        {"title": "t", "note": "n" * 8192},
        {"title": 5, "note": "\ud800" * 2000},  # 6 bytes each as JSON: over the event's
    ],
    ids=["title", "surrogate-title", "data", "data-no-title"],
)
def test_a_title_over_the_limits_is_left_to_the_plain_path(data: dict[str, Any]) -> None:
    """Neither fast loop (C, Python) takes a batch whose title event is over the limits of
    ``core.limits``: the plain path refuses it, naming the limit."""
    events = [NewEvent("turn/start", {"turn": 1}), NewEvent("session/title", data)]
    assert validation._validate_common(events) is None
    assert validation._py_validate_common(events, MAX_EPOCH_MS, now_ms) is None
    got = _outcome(validation.validate_batch, events)
    assert got == _plain(events)
    assert got[0] == "InvalidEventError" and "may hold at most" in got[1]
    fits = [NewEvent("session/title", {"title": "t" * 1024})]
    assert validation._validate_common(fits) is not None or not validation.SPEEDUPS
    assert validation._py_validate_common(fits, MAX_EPOCH_MS, now_ms) is not None

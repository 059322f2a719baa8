"""The transcript's paging arithmetic on its own (tui/app/transcript/window.py): no Textual."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.app.transcript.window import (
    Span,
    earlier_mount_start,
    earlier_read,
    first_mounted,
    load_earlier_label,
    place_to_keep,
    prune_count,
)

FEW = settings(max_examples=60, deadline=None)
pages = st.integers(min_value=1, max_value=30)


@FEW
@given(st.integers(min_value=0, max_value=500), pages)
def test_a_load_mounts_the_newest_page(count: int, page: int) -> None:
    first = first_mounted(count, page)
    assert 0 <= first <= count
    assert count - first == min(count, page)


def test_first_mounted_examples() -> None:
    assert first_mounted(0, 24) == 0
    assert first_mounted(10, 24) == 0
    assert first_mounted(24, 24) == 0
    assert first_mounted(25, 24) == 1


@FEW
@given(st.lists(st.integers(), max_size=80, unique=True), pages)
def test_reading_earlier_pages_reads_every_unread_seq_once_newest_first(
    unread: list[int], page: int
) -> None:
    left, read_back = list(unread), []
    while left:
        plan = earlier_read(left, page)
        assert 1 <= len(plan.page) <= page
        assert list(plan.page) == left[-len(plan.page) :]
        # The context is the seq just before the page, read along but not consumed.
        if len(left) > len(plan.page):
            assert plan.context == left[-len(plan.page) - 1]
            assert plan.seqs == left[-len(plan.page) - 1 :]
        else:
            assert plan.context is None and plan.seqs == left
        read_back[:0] = plan.page
        del left[-len(plan.page) :]
    assert read_back == unread
    assert earlier_read([], page).seqs == []


def test_earlier_read_examples() -> None:
    plan = earlier_read([1, 2, 3, 4, 5], 2)
    assert plan.page == (4, 5) and plan.context == 3 and plan.seqs == [3, 4, 5]
    plan = earlier_read([1, 2], 2)
    assert plan.page == (1, 2) and plan.context is None


@FEW
@given(st.integers(min_value=0, max_value=400), pages)
def test_mounting_earlier_pages_reaches_the_first_item_a_page_at_a_time(
    first: int, page: int
) -> None:
    steps, at = 0, first
    while at > 0:
        start = earlier_mount_start(at, page)
        assert 0 <= start < at and at - start <= page
        at, steps = start, steps + 1
    assert steps == -(-first // page)  # the ceiling: every page full but the oldest
    assert earlier_mount_start(0, page) == 0


@FEW
@given(
    st.integers(min_value=0, max_value=600),
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=1, max_value=40),
)
def test_pruning_leaves_a_page_of_room_below_the_limit(
    mounted: int, max_mounted: int, page: int
) -> None:
    max_mounted = max(max_mounted, page)  # as the transcript guarantees
    gone = prune_count(mounted, max_mounted, page)
    if mounted <= max_mounted:
        assert gone == 0
    else:
        assert gone >= mounted - max_mounted
        assert mounted - gone == max_mounted - page


def test_prune_examples() -> None:
    assert prune_count(200, 200, 24) == 0
    assert prune_count(201, 200, 24) == 25  # down to 176: the next 24 items prune nothing
    assert prune_count(176 + 24, 200, 24) == 0


def test_load_earlier_label() -> None:
    assert load_earlier_label(0, reading=False) is None
    assert load_earlier_label(0, reading=True) == "Loading earlier messages…"
    assert load_earlier_label(5, reading=True) == "Loading earlier messages…"
    assert load_earlier_label(1234, reading=False) == "Load earlier messages (1,234 more)"


# --------------------------------------------------------------------------- the place kept


def stacked(heights: list[int]) -> list[Span]:
    spans, top = [], 0
    for height in heights:
        spans.append(Span(top, top + height))
        top += height
    return spans


@FEW
@given(st.lists(st.integers(min_value=0, max_value=12), max_size=30), st.integers(0, 300))
def test_the_place_is_the_first_item_starting_in_view_else_the_one_across_its_top(
    heights: list[int], top: int
) -> None:
    spans = stacked(heights)
    place = place_to_keep(spans, top)
    starting = [i for i, s in enumerate(spans) if s.top >= top]
    across = [i for i, s in enumerate(spans) if s.top < top < s.bottom]
    if starting:
        assert place == (starting[0], spans[starting[0]].top - top)
    elif across:
        assert place == (across[0], spans[across[0]].top - top)
        assert place[1] < 0
    else:
        assert place is None


def test_the_place_reads_no_further_than_needed() -> None:
    read: list[int] = []

    def spans() -> Iterator[Span]:
        for index, span in enumerate(stacked([3] * 100)):
            read.append(index)
            yield span

    assert place_to_keep(spans(), 7) == (3, 2)
    assert read == [0, 1, 2, 3]


def test_the_plain_modules_import_no_textual_and_no_rich() -> None:
    """The arithmetic of the app's widgets is importable (and testable) without Textual."""
    import ast
    from pathlib import Path

    import tui.app.busy
    import tui.app.composer.history
    import tui.app.composer.mentions
    import tui.app.transcript.window

    for module in (
        tui.app.busy,
        tui.app.composer.history,
        tui.app.composer.mentions,
        tui.app.transcript.window,
    ):
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        imported = {
            name.split(".")[0]
            for node in ast.walk(tree)
            for name in (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        assert not imported & {"textual", "rich", "tui"}, (module.__name__, imported)

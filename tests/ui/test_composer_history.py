"""Up/Down through sent messages and the ``@`` rules on their own (tui/app/composer/
history.py and mentions.py): no Textual."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.app.composer.history import HistoryStep, SentHistory, clean_history
from tui.app.composer.mentions import at_limit, mention_query, opens_picker, refuses_pick

FEW = settings(max_examples=60, deadline=None)
texts = st.text(alphabet="ab \n", max_size=4)


def history(entries: list[str], *, incomplete: bool = False) -> SentHistory:
    walk = SentHistory()
    walk.replace(entries)
    walk.incomplete = incomplete
    return walk


@FEW
@given(st.lists(texts, max_size=12))
def test_clean_history_drops_blanks_and_repeats_only(entries: list[str]) -> None:
    cleaned = clean_history(entries)
    assert all(entry.strip() for entry in cleaned)
    assert all(a != b for a, b in itertools.pairwise(cleaned))
    assert clean_history(cleaned) == cleaned
    it = iter(entries)
    assert all(entry in it for entry in cleaned)  # a subsequence, in order
    assert set(cleaned) == {entry for entry in entries if entry.strip()}


@FEW
@given(st.lists(texts, max_size=8), texts)
def test_up_walks_to_the_oldest_and_down_walks_back_to_the_draft(
    entries: list[str], draft: str
) -> None:
    walk = history(entries)
    shown, text = [], draft
    while (step := walk.up(text)) is not None and step.show is not None:
        shown.append(step.show)
        text = step.show
    assert shown == list(reversed(walk.entries))
    if not walk.entries:
        assert walk.up(draft) is None  # the key is the editor's
        return
    assert step == HistoryStep()  # at the oldest: the key is used, nothing changes
    back = []
    while (step := walk.down(text)) is not None:
        assert step.show is not None
        back.append(step.show)
        text = step.show
    assert back == [*walk.entries[1:], draft]
    assert walk.index is None


def test_editing_a_recalled_entry_makes_it_the_draft() -> None:
    walk = history(["one", "two", "three"])
    assert walk.up("mine") == HistoryStep(show="three")
    assert walk.up("three") == HistoryStep(show="two")
    assert walk.down("two, edited") is None  # not walking any more: Down is the editor's
    assert walk.up("two, edited") == HistoryStep(show="three")  # starts over from the newest
    assert walk.down("three") == HistoryStep(show="two, edited")  # the edit was kept


def test_older_messages_are_asked_for_once_at_the_oldest_entry() -> None:
    walk = history(["one"], incomplete=True)
    assert walk.up("") == HistoryStep(show="one")
    assert walk.up("one") == HistoryStep(want_older=True)
    assert walk.up("one") == HistoryStep()
    walk.incomplete = True
    walk.replace(["zero", "one"], keep_place=True)  # the owner read one more
    assert walk.index == 1 and walk.up("one") == HistoryStep(show="zero")


def test_an_empty_history_asks_for_older_messages_only_on_an_empty_draft() -> None:
    walk = history([], incomplete=True)
    assert walk.up("typed") is None
    assert walk.up("") == HistoryStep(want_older=True)
    assert walk.up("") is None


@FEW
@given(st.lists(texts, min_size=1, max_size=8), st.lists(texts, max_size=8), st.data())
def test_keep_place_goes_on_from_the_entry_shown(
    newer: list[str], older: list[str], data: st.DataObject
) -> None:
    walk = history(newer)
    if not walk.entries:
        return
    steps = data.draw(st.integers(min_value=1, max_value=len(walk.entries)))
    text = ""
    for _ in range(steps):
        step = walk.up(text)
        assert step is not None and step.show is not None
        text = step.show
    walk.replace([*older, *walk.entries], keep_place=True)
    assert walk.index is not None
    assert walk.entries[walk.index] == text
    kept = clean_history(newer)
    assert walk.entries[-len(kept) :] == kept


def test_add_skips_blanks_and_repeats_and_ends_the_walk() -> None:
    walk = history(["one"])
    walk.up("")
    walk.add("one")
    walk.add("  ")
    walk.add("two")
    assert walk.entries == ["one", "two"] and walk.index is None


# --------------------------------------------------------------------------- the @ rules


def test_an_at_sign_opens_the_picker_only_after_nothing_or_whitespace() -> None:
    assert opens_picker("") and opens_picker(" ") and opens_picker("\t")
    assert not opens_picker("e") and not opens_picker("@") and not opens_picker(".")


@FEW
@given(
    st.text(alphabet="ab @", max_size=8),
    st.text(alphabet="xy", max_size=6),
    st.text(alphabet="z @", max_size=6),
)
def test_the_query_is_what_follows_the_at_sign_up_to_the_cursor(
    before: str, query: str, after: str
) -> None:
    line = f"{before}@{query}{after}"
    at = len(before)
    assert mention_query(line, at, at + 1 + len(query)) == query
    assert mention_query(line, at, at) is None  # the cursor went back to the @
    assert mention_query(line, at, at - 1) is None
    if after.startswith(" "):
        assert mention_query(line, at, at + 2 + len(query)) is None  # a space gives up
    assert mention_query(line.replace("@", "#"), at, at + 1 + len(query)) is None  # @ gone
    assert mention_query(line, len(line), len(line) + 1) is None  # past the end


def test_reference_limit() -> None:
    assert not at_limit(2, 3) and at_limit(3, 3) and at_limit(4, 3)
    assert refuses_pick(["a", "b", "c"], "d", 3)
    assert not refuses_pick(["a", "b", "c"], "a", 3)  # mentioned again: counts once
    assert not refuses_pick(["a", "a", "b"], "c", 3)
    assert not refuses_pick([], "a", 1) and refuses_pick(["a"], "b", 1)

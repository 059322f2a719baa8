"""Unit tests of the mention-chip arithmetic (tui/chips.py): no UI."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.references import SessionReferenceInput, format_session_reference_mention
from tui.app.composer.chips import ChipTable, is_opener, snap, strip_openers, widen


def mention(session_id: str, label: str) -> str:
    return format_session_reference_mention(SessionReferenceInput(session_id, label))


K8S = mention("demo-k8s", "Kubernetes upgrade plan")


def test_a_chip_is_an_opener_and_its_label() -> None:
    table = ChipTable()
    chip = table.add("Kubernetes upgrade plan", K8S)
    assert is_opener(chip[0])
    assert chip[1:] == "Kubernetes upgrade plan"
    assert table.display(chip) == "@Kubernetes upgrade plan"
    assert "dsh-session" not in chip


def test_expand_gives_the_full_mention_back() -> None:
    table = ChipTable()
    text = f"see {table.add('Kubernetes upgrade plan', K8S)} and more"
    assert table.expand(text) == f"see {K8S} and more"


def test_chipify_then_expand_is_the_identity() -> None:
    table = ChipTable()
    raw = f"a {K8S} b {mention('x', 'X [1]')}\nline two {K8S}"
    chipped = table.chipify(raw)
    assert "dsh-session" not in chipped
    assert (
        table.display(chipped)
        == "a @Kubernetes upgrade plan b @X [1]\nline two @Kubernetes upgrade plan"
    )
    assert table.expand(chipped) == raw


def test_same_mention_reuses_its_opener() -> None:
    table = ChipTable()
    assert table.add("A", mention("a", "A")) == table.add("A", mention("a", "A"))
    assert table.add("A", mention("a", "A")) != table.add("A", mention("b", "A"))


def test_invalid_or_multiline_mentions_stay_raw() -> None:
    table = ChipTable()
    broken = "@[x](dsh-session:!!!)"
    assert table.chipify(broken) == broken


def test_openers_from_outside_are_dropped() -> None:
    table = ChipTable()
    forged = "\U000f0000Kubernetes"
    assert table.chipify(forged) == "Kubernetes"
    assert strip_openers("a\U000f0001b") == "ab"


def test_a_cut_chip_is_no_longer_a_chip() -> None:
    table = ChipTable()
    chip = table.add("Beta", mention("b", "Beta"))
    cut = chip[:-1]  # the label lost a character
    assert table.spans(cut) == []
    assert table.expand(cut) == "@Bet"


def test_spans_snap_and_widen() -> None:
    table = ChipTable()
    text = "ab " + table.add("Beta", mention("b", "Beta")) + " c"
    [span] = table.spans(text)
    assert (span.start, span.end) == (3, 8)
    assert snap(5, [span], forward=True) == 8
    assert snap(5, [span], forward=False) == 3
    assert snap(3, [span], forward=True) == 3
    assert snap(8, [span], forward=False) == 8
    assert widen(7, 8, [span]) == (3, 8)  # Backspace at the end takes the whole chip
    assert widen(3, 4, [span]) == (3, 8)  # Delete at the start too
    assert widen(0, 2, [span]) == (0, 2)
    assert widen(1, 5, [span]) == (1, 8)


@settings(max_examples=40, deadline=None)
@given(
    before=st.text(max_size=12),
    label=st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != ""),
    after=st.text(max_size=12),
)
def test_expand_round_trips_any_surrounding_text(before: str, label: str, after: str) -> None:
    table = ChipTable()
    before, after = strip_openers(before), strip_openers(after)
    raw = mention("sid", label)
    chip = table.add(label, raw)
    assert table.expand(before + chip + after) == before + raw + after


@settings(max_examples=40, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.text(max_size=8),
            st.builds(
                mention, st.sampled_from(["a", "b-2", "会话"]), st.text(min_size=1, max_size=8)
            ),
        ),
        max_size=6,
    )
)
def test_chipify_then_expand_gives_the_text_back(pieces: list[str]) -> None:
    table = ChipTable()
    text = strip_openers("".join(pieces))
    assert table.expand(table.chipify(text)) == text

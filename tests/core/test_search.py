"""core/search.py: the one rule of full-text search (terms, matching, snippets, ranking)."""

from __future__ import annotations

import pytest

from core.log import Event, user_message
from core.search import (
    MAX_TERMS,
    RANK_WINDOW,
    SNIPPET_WIDTH,
    bm25_scores,
    check_search_limit,
    find_spans,
    indexed_text,
    make_hit,
    matches,
    rank_hits,
    search_terms,
)


def test_terms_are_split_at_whitespace_deduplicated_and_bounded() -> None:
    assert search_terms("  Retry  policy retry\tPOLICY\n") == ["Retry", "policy"]
    assert search_terms(" ".join(f"t{i}" for i in range(20))) == [f"t{i}" for i in range(MAX_TERMS)]
    assert search_terms("   ") == []
    with pytest.raises(TypeError):
        search_terms(3)  # type: ignore[arg-type]


def test_matching_is_every_term_case_folded() -> None:
    assert matches("The RETRY Policy", ["retry", "pol"])
    assert not matches("The RETRY", ["retry", "pol"])
    assert not matches("anything", [])
    assert matches("ΠΟΛΙΤΙΚΗ", ["πολιτικη"])
    assert find_spans("ab AB aB", ["ab"]) == [(0, 2), (3, 5), (6, 8)]
    # The longer of two overlapping terms wins.
    assert find_spans("retrying", ["retry", "retrying"]) == [(0, 8)]


def test_a_snippet_is_a_safe_window_around_the_first_match() -> None:
    text = "a" * 100 + " needle " + "\x1b[31m" + "b" * 100
    hit = make_hit("s", 3, text, ["NEEDLE"])
    assert (hit.session_id, hit.seq) == ("s", 3)
    assert len(hit.snippet) == SNIPPET_WIDTH
    assert hit.snippet[0] == "…" and hit.snippet[-1] == "…"
    assert [hit.snippet[a:b] for a, b in hit.spans] == ["needle"]
    assert hit.snippet.isprintable()
    # A match at the very end pulls the window back: the snippet is still full.
    end = make_hit("s", 0, "x" * 200 + " tail", ["tail"])
    assert end.snippet.endswith("tail") and len(end.snippet) == SNIPPET_WIDTH
    assert [end.snippet[a:b] for a, b in end.spans] == ["tail"]


def test_indexed_text_is_the_projection_made_storable() -> None:
    event = Event(0, "user/message", 1, user_message("a\x00b \ud800"), "append", None)
    assert indexed_text(event) == "a\ufffdb \ufffd"
    log_only = Event(1, "user/message", 1, user_message("x"), None, None)
    assert indexed_text(log_only) is None


def test_bm25_prefers_more_occurrences_and_shorter_texts() -> None:
    scores = bm25_scores(["kappa kappa", "kappa " + "x " * 50, "kappa"], ["kappa"])
    assert scores[0] > scores[2] > scores[1]


def test_ranking_looks_at_the_newest_window_only() -> None:
    found = [("s", seq, "term" if seq else "term term term") for seq in range(RANK_WINDOW + 5)]
    found.reverse()  # newest first
    hits = rank_hits(found, ["term"], 3)
    assert 0 not in [h.seq for h in hits]  # the best text is older than the window
    assert [h.seq for h in hits] == [RANK_WINDOW + 4, RANK_WINDOW + 3, RANK_WINDOW + 2]


def test_limits_are_positive_ints() -> None:
    assert check_search_limit(1) == 1
    for bad in (0, -1, True, 1.0, None):
        with pytest.raises(ValueError):
            check_search_limit(bad)

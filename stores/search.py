"""Message search as every store plans and shapes it (issues 18 and 35), backend-free:
the query's terms and the result's size checked once and in one order, and the candidate
messages each store finds its own way (FTS5 on SQLite, a trigram index on PostgreSQL, a scan
in memory) ranked the same way (``core.search.rank_hits``). What a match is, and how hits
are ranked, is ``core.search``'s."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.search import SearchHit, check_search_limit, rank_hits, search_terms

__all__ = ["SearchPlan", "plan_search"]


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """A search to run: its distinct ``terms`` (``core.search.search_terms``) and how
    many hits at most (``limit``)."""

    terms: list[str]
    limit: int

    def rank(self, found: Iterable[tuple[str, int, str]]) -> list[SearchHit]:
        """The hits among ``found`` (session id, seq, text; newest first), ranked. Slow
        for a common word over large messages: a store runs it off its connection."""
        return rank_hits(found, self.terms, self.limit)


def plan_search(query: str, limit: int) -> SearchPlan | None:
    """What ``search_messages(query, limit=limit)`` looks for; ``None`` when the query
    holds no term (no hits, nothing to read). A bad ``limit`` raises ``ValueError`` even
    then."""
    terms = search_terms(query)
    wanted = check_search_limit(limit)
    if not terms:
        return None
    return SearchPlan(terms, wanted)

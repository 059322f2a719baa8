"""Finding messages by their words, as ``dsh search`` and ``dsh mcp``'s ``search_sessions``
both do: one code path, so the two return the same hits in the same JSON rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.search import SearchHit, unindexed_notice

if TYPE_CHECKING:  # (``dsh search``'s one-shot read builds ``FoundMessages`` without it)
    from tui.shared.runtime import Runtime

__all__ = ["FoundMessages", "find_messages"]


@dataclass(frozen=True, slots=True)
class FoundMessages:
    """The hits, best first, each session's latest title, and ``note``: what a host says
    beside them when some sessions of a read-only database are not indexed yet."""

    hits: list[SearchHit]
    titles: dict[str, str]
    note: str | None

    def json_rows(self) -> list[dict[str, Any]]:
        """The rows ``dsh search --json`` prints: ``{"session_id", "title", "seq",
        "snippet"}`` per hit (``title``: null for an untitled session)."""
        return [
            {
                "session_id": h.session_id,
                "title": self.titles.get(h.session_id),
                "seq": h.seq,
                "snippet": h.snippet,
            }
            for h in self.hits
        ]


async def find_messages(rt: Runtime, query: str, limit: int) -> FoundMessages:
    """At most ``limit`` (positive: the caller checks it) messages containing every word
    of ``query``, best first (``SessionQuery.search_messages``)."""
    hits = await rt.query.search_messages(query, limit=limit)
    unindexed = getattr(rt.store, "unindexed_sessions", None)
    note = unindexed_notice(await unindexed()) if unindexed is not None else None
    titles = await rt.query.read_titles(sorted({h.session_id for h in hits}))
    return FoundMessages(hits, {sid: t.title for sid, t in titles.items()}, note)

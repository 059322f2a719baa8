"""The PostgreSQL store's message search (issue 18, ``core.search``): the index kept in
step with the surface, its rebuild (schema 7), and the query (the owner's function finds,
``rank_hits`` ranks).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from core.log import Event
from core.search import RANK_WINDOW, SearchHit, like_pattern
from core.surface import SurfaceFolder
from stores.postgres.connection import PgConnection
from stores.postgres.rows import IDS_OF_KEYS_SQL, read_id
from stores.postgres.team import REINDEX_SQL
from stores.search import plan_search
from stores.surfaces import shadowed_seqs

_REINDEX_BATCH = 20
"""Sessions indexed per statement by the upgrade to schema 7 (its progress steps)."""


async def _reindex(conn: asyncpg.Connection, progress: Callable[[int, int], None] | None) -> None:
    """Migration to schema 7: index the current surface's messages of every session
    again, in SQL (``stores.postgres.team``), a few sessions per statement; ``progress`` gets
    (sessions done, sessions in all) after each."""
    keys = [row[0] for row in await conn.fetch("SELECT key FROM dsh_sessions ORDER BY key")]
    for start in range(0, len(keys), _REINDEX_BATCH):
        batch = keys[start : start + _REINDEX_BATCH]
        await conn.execute(REINDEX_SQL, batch)
        if progress is not None:
            progress(start + len(batch), len(keys))


@functools.cache
def _same_upper() -> dict[str, str]:
    """Each uppercase letter (beyond ASCII) and every character whose uppercase it is."""
    groups: dict[str, dict[str, None]] = {}
    for code in (*range(0x80, 0xD800), *range(0xE000, 0x20000)):
        char = chr(code)
        upper = char.upper()
        if len(upper) == 1 and upper != char:
            groups.setdefault(upper, {upper: None})[char] = None
    return {upper: "".join(chars) for upper, chars in groups.items()}


def _case_regex(term: str) -> str | None:
    """A case-sensitive POSIX regex that matches ``term`` in any case, for a term with
    letters beyond ASCII (``None`` for another term: ILIKE folds it right in every
    locale). ILIKE folds by the database's LC_CTYPE, which in a C-locale database is ASCII
    only; this folds the way ``core.search.matches`` does (which checks every row)
    whatever the locale. Every other character is literal (an ASCII one escaped)."""
    if term.isascii():
        return None
    groups = _same_upper()
    out: list[str] = []
    cased = False
    for char in term:
        upper = char.upper()
        variants = groups.get(upper if len(upper) == 1 else char)
        if variants is not None or char.lower() != char or upper != char:
            found = dict.fromkeys(variants or "")
            found.update(dict.fromkeys(c for c in (char, char.lower(), upper) if len(c) == 1))
            cased = cased or not char.isascii()
            out.append("[" + "".join(found) + "]")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out) if cased else None


async def _index_events(
    conn: asyncpg.Connection, key: int, events: Sequence[Event], folder: SurfaceFolder[None]
) -> None:
    """Keep the session's search index in step with its surface after ``events`` (in the
    append's transaction): the table's trigger indexes their messages; this drops those
    their replaces shadowed (``folder`` holds the surface after the batch whenever it has
    a replace), through the owner's function (members may not delete search rows)."""
    gone = shadowed_seqs(events, folder)
    if gone:
        await conn.execute("SELECT dsh_unindex($1, $2::bigint[])", key, gone)


class Search(PgConnection):
    """``search_messages``."""

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        plan = plan_search(query, limit)
        if plan is None:
            return []
        terms = plan.terms
        regexes = [_case_regex(t) for t in terms]
        patterns = [
            like_pattern(t) if r is None else r for t, r in zip(terms, regexes, strict=True)
        ]
        flags = [r is not None for r in regexes]

        async def body(conn: asyncpg.Connection) -> tuple[list[Any], list[Any]]:
            # The owner's function applies the access rule and uses the trigram index
            # (stores.postgres.team); the ids come from dsh_sessions under row security, which
            # checks the rule a second time.
            found = list(
                await conn.fetch(
                    "SELECT session_key, seq, text FROM dsh_search_find($1, $2, $3)",
                    patterns,
                    flags,
                    RANK_WINDOW,
                )
            )
            keys = sorted({row[0] for row in found})
            ids = list(await conn.fetch(IDS_OF_KEYS_SQL, keys)) if keys else []
            return found, ids

        found, ids = await self._run(body, write=False, isolation="repeatable_read")

        def rank() -> list[SearchHit]:
            names = {key: sid for key, raw, size in ids if (sid := read_id(raw, size)) is not None}
            rows = [(names[key], seq, text) for key, seq, text in found if key in names]
            return plan.rank(rows)

        return await asyncio.to_thread(rank)

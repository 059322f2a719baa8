"""Tidying a SQLite file when a store that wrote closes (``_tidy``): merging a small
search index into one segment, giving free pages back.
"""

from __future__ import annotations

import sqlite3

_TIDY_MAX_BLOCKS = 1024
"""The largest search index (in FTS5 blocks of at most 4,050 bytes) that ``_tidy``
merges into one segment when a store closes: about 0.13 s of work on the machines dsh is
measured on (0.126 ms a block)."""
_TIDY_MERGE_BLOCKS = 64
"""Blocks written by one ``merge`` step of ``_tidy`` (each step is its own transaction)."""
_TIDY_FREE_PAGES = 2048
"""The most free pages ``_tidy`` gives back when a store closes (16 MiB, about 0.15 s:
0.07 ms a page on the benchmark's database); the rest go at later closes."""


def _tidy(raw: sqlite3.Connection, upgraded: bool = False) -> None:
    """What a store that wrote (or ``upgraded`` the file: a migration that drops an index
    frees its pages without changing a row) does before it closes (on its connection's
    thread), all of it optional, each step its own transaction, none waiting for a lock
    (another process writing: it is skipped):

    - a search index of at most ``_TIDY_MAX_BLOCKS`` blocks in several segments, whose
      largest segment is less than nine tenths of it, is merged into one (FTS5's
      automerge leaves up to three segments of each size: on the storage benchmark's
      database they were 30 % of the index: 9.8 B/event against 6.9 merged);
    - the free pages of a database created with ``auto_vacuum = INCREMENTAL`` (every new
      one since issue 15; an older file would need a VACUUM to change it) go back to the
      file system, at most ``_TIDY_FREE_PAGES`` (pages freed by merges and rewritten packs,
      which would otherwise be reused only by later appends).

    A larger index is left to automerge: a merge that ``_tidy`` could not finish would be
    finished by the next appends, a little in each, which slows them (see
    ``_rebuild_search_index``)."""
    if raw.total_changes == 0 and not upgraded:
        return  # nothing written since the store opened
    (timeout,) = raw.execute("PRAGMA busy_timeout").fetchone()
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        if _search_index_worth_merging(raw):
            for _ in range(2 * _TIDY_MAX_BLOCKS // _TIDY_MERGE_BLOCKS):
                before = raw.total_changes
                raw.execute(
                    "INSERT INTO search_index (search_index, rank) VALUES ('merge', ?)",
                    (-_TIDY_MERGE_BLOCKS,),
                )
                if raw.total_changes - before < 2:
                    break  # FTS5 found nothing left to merge
        (vacuum,) = raw.execute("PRAGMA auto_vacuum").fetchone()
        (free,) = raw.execute("PRAGMA freelist_count").fetchone()
        if vacuum == 2 and free:  # INCREMENTAL
            # Each step of the statement frees one page, and the sqlite3 module steps a
            # statement without columns once: one execution a page, in one transaction.
            raw.execute("BEGIN IMMEDIATE")
            try:
                for _ in range(min(free, _TIDY_FREE_PAGES)):
                    raw.execute("PRAGMA incremental_vacuum(1)")
                raw.execute("COMMIT")
            except BaseException:
                raw.execute("ROLLBACK")
                raise
    except sqlite3.Error:
        pass  # busy, full, read-only: the file stays as it was, which is fine
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _search_index_worth_merging(raw: sqlite3.Connection) -> bool:
    """Whether ``_tidy`` merges the search index: at most ``_TIDY_MAX_BLOCKS`` blocks in
    more than one segment, the largest under nine tenths of them. A block's rowid is
    its segment's id shifted by 37 bits (FTS5's on-disk layout; ids below 2**37 are
    FTS5's own records), which only guides this choice: the merge itself is FTS5's."""
    sizes = [
        n
        for (n,) in raw.execute(
            "SELECT count(*) FROM (SELECT id FROM search_index_data WHERE id >= ? LIMIT ?) "
            "GROUP BY id >> 37",
            (1 << 37, _TIDY_MAX_BLOCKS + 1),
        )
    ]
    total = sum(sizes)
    return len(sizes) > 1 and total <= _TIDY_MAX_BLOCKS and max(sizes) < 0.9 * total

"""The ``llm`` workload on PostgreSQL: a team database made the README's way on a
throwaway cluster (as ``bench_team_search`` does: ``pg_trgm`` in ``public``, a database
owned by ``dsh_admin``, who opens dsh first so the tables are its, and a plain member,
``alice`` of ``dsh_users``: no superuser, no ``BYPASSRLS``), the corpus imported by the
member with ``dsh import DIR`` (``--db`` the member's URL), and the member's store, whose
``search_messages`` runs under row security (every session is the member's own, so the
hits are SQLite's)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from core.store import SessionStore
from stores import open_store

DATABASE = "dsh_llm"
ADMIN = "dsh_admin"


@dataclass
class TeamStore:
    store: SessionStore
    url: str
    import_seconds: float
    sizes: dict[str, int]  # bytes of dsh_events, dsh_search and its trigram index


def _import(corpus: Path, dsh: list[str], env: dict[str, str]) -> float:
    """Seconds of ``dsh import DIR`` (nothing else runs meanwhile)."""
    started = time.perf_counter()
    subprocess.run([*dsh, "import", str(corpus)], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def member_store(
    corpus: Path, dsh: list[str], env: dict[str, str]
) -> AsyncIterator[TeamStore | None]:
    """The member's store of the imported corpus, or ``None`` without PostgreSQL's
    binaries (said on stderr)."""
    from tests.pgcluster import ALICE, TEAM_GROUP, find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        print("  llm: no PostgreSQL binaries: the PostgreSQL rows are left out", file=sys.stderr)
        yield None
        return
    with running_cluster(bindir) as cluster:
        cluster.psql(f"CREATE ROLE {ADMIN} LOGIN")
        cluster.psql(f"CREATE DATABASE {DATABASE} OWNER {ADMIN}")
        cluster.psql(
            f"CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; "
            f"GRANT USAGE ON SCHEMA public TO {TEAM_GROUP}",
            database=DATABASE,
        )
        admin = await open_store(cluster.url(DATABASE, user=ADMIN))
        await admin.close()
        url = cluster.url(DATABASE, user=ALICE)
        took = _import(corpus, dsh, {**env, "DSH_DB": url})
        root = await asyncpg.connect(cluster.url(DATABASE))
        try:
            await root.execute("VACUUM ANALYZE")
            rows = await root.fetch(
                "SELECT c::text, pg_total_relation_size(c) FROM unnest(ARRAY['dsh_events', "
                "'dsh_search', 'dsh_search_trgm']::regclass[]) AS c"
            )
            sizes = {name: int(size) for name, size in rows}
            sizes["database"] = int(await root.fetchval(f"SELECT pg_database_size('{DATABASE}')"))
        finally:
            await root.close()
        store = await open_store(url)
        try:
            yield TeamStore(store, url, took, sizes)
        finally:
            await store.close()

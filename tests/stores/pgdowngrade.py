"""Take a PostgreSQL schema written by this dsh back to an older schema version, for
upgrade tests: each step's undo, newest first. A new migration step needs its undo here
(``downgrade_sql`` refuses to guess)."""

from __future__ import annotations

from stores.postgres import MIGRATIONS, SCHEMA_VERSION, session_row_security
from stores.postgres.team import _JSON as _TEAM_JSON
from stores.postgres.team import MEMBER_FUNCTIONS

_RLS_TABLES = (
    "dsh_sessions",
    "dsh_events",
    "dsh_reply_leases",
    "dsh_surface_nodes",
    "dsh_surface_sums",
    "dsh_search",
)
_SESSION_KEYED = (*_RLS_TABLES[1:], "dsh_search_pending")


def _policies(table: str) -> list[str]:
    """The policies step 4 gave ``table`` (read by grantees, written by the owner)."""
    return [sql for sql in session_row_security(table) if sql.startswith("CREATE POLICY")]


UNDO: dict[int, str] = {
    # Step 2 (issue 15): the surface tables. The projection column stays (step 1's).
    2: "DROP TABLE dsh_surface_nodes, dsh_surface_sums",
    # Step 3 (issue 18): the search index and its backlog.
    3: "DROP TABLE dsh_search, dsh_search_pending",
    # Step 4 (issue 17): owners, shares, row-level security; each session-keyed table's
    # owner column goes, its plain foreign key (the name step 4 drops) comes back.
    4: ";".join(
        [
            f"DROP POLICY IF EXISTS {policy} ON {table}"
            for table in _RLS_TABLES
            for policy in ("dsh_read", "dsh_insert", "dsh_update", "dsh_delete")
        ]
        + [f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY" for table in _RLS_TABLES]
        + [f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY" for table in _RLS_TABLES]
        + [
            "DROP POLICY dsh_owner ON dsh_search_pending",
            "ALTER TABLE dsh_search_pending NO FORCE ROW LEVEL SECURITY",
            "ALTER TABLE dsh_search_pending DISABLE ROW LEVEL SECURITY",
        ]
        + [
            sql
            for table in _SESSION_KEYED
            for sql in (
                f"DROP TRIGGER dsh_session_owner ON {table}",
                f"ALTER TABLE {table} DROP COLUMN session_owner",
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_session_key_fkey FOREIGN KEY "
                "(session_key) REFERENCES dsh_sessions (key) ON DELETE CASCADE",
            )
        ]
        + [
            "DROP FUNCTION dsh_session_owner()",
            "DROP TABLE dsh_shares",
            "ALTER TABLE dsh_sessions DROP CONSTRAINT dsh_sessions_key_owner",
            "ALTER TABLE dsh_sessions DROP COLUMN owner",
        ]
    ),
    # Step 5: the index of replaces (the newest replace without a walk of the surface).
    5: "DROP INDEX dsh_events_replaces",
    # Step 6 (issue 30): members' rights, the server-kept index, sizes, owner-only leases.
    6: ";".join(
        [
            "DROP TRIGGER dsh_index ON dsh_events",
            # The checks call dsh_json: they go first.
            "ALTER TABLE dsh_events DROP CONSTRAINT dsh_events_title",
            "ALTER TABLE dsh_events DROP CONSTRAINT dsh_events_surface_json",
            *(
                f"DROP FUNCTION {function}"
                for function in (
                    "dsh_index_event()",
                    "dsh_search_text_or_null(bytea, text)",
                    "dsh_search_text(bytea, text)",
                    *MEMBER_FUNCTIONS,
                    "dsh_json(text)",
                )
            ),
            "ALTER TABLE dsh_sessions DROP CONSTRAINT dsh_sessions_id_size",
            "ALTER TABLE dsh_sessions DROP CONSTRAINT dsh_sessions_cwd_size",
            "DROP INDEX dsh_sessions_by_owner",
            *(f"DROP POLICY dsh_definer ON {table}" for table in (*_RLS_TABLES[:5], "dsh_shares")),
            "DROP POLICY dsh_owner ON dsh_reply_leases",
            *_policies("dsh_reply_leases"),
            "ALTER TABLE dsh_search ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE dsh_search FORCE ROW LEVEL SECURITY",
            *_policies("dsh_search"),
            *(
                sql
                for sql in session_row_security("dsh_search")
                if sql.startswith("CREATE TRIGGER")
            ),
            "CREATE TABLE dsh_search_pending (session_key bigint PRIMARY KEY "
            "REFERENCES dsh_sessions (key) ON DELETE CASCADE)",
            *session_row_security("dsh_search_pending", grantees_read=False),
            # The group's table privileges of before.
            "REVOKE ALL ON dsh_sessions, dsh_events, dsh_reply_leases, dsh_surface_nodes, "
            "dsh_surface_sums, dsh_search, dsh_shares, dsh_schema FROM dsh_users",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON dsh_sessions, dsh_events, dsh_reply_leases, "
            "dsh_surface_nodes, dsh_surface_sums, dsh_search TO dsh_users",
            "GRANT SELECT, INSERT, DELETE ON dsh_shares, dsh_search_pending TO dsh_users",
            "GRANT SELECT ON dsh_schema TO dsh_users",
        ]
    ),
    # Step 7 (issue 31): dsh_json as step 6 wrote it (every surrogate escape U+FFFD). The
    # rows it merged stay merged: an older dsh reads an astral character as it is.
    7: _TEAM_JSON.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1),
    # Step 8 (issue 32): the index of session marks (profiles, forks).
    8: "DROP INDEX dsh_events_marks",
    # Step 9 (issue 33): that index with sources too; step 8 made it without them.
    9: ";".join(("DROP INDEX dsh_events_marks", *MIGRATIONS[8])),
    # Step 10 (issue 34): the counter pollers behind a transaction pooler read.
    10: "DROP SEQUENCE dsh_changes",
}


def downgrade_sql(schema: str, version: int) -> str:
    """SQL (run as the superuser) taking ``schema`` from ``SCHEMA_VERSION`` to ``version``."""
    missing = [step for step in range(version, SCHEMA_VERSION) if step not in UNDO]
    if missing:
        raise AssertionError(f"no undo for migration step(s) {missing}: add it to UNDO")
    undo = [UNDO[step] for step in reversed(range(version, SCHEMA_VERSION))]
    return ";".join(
        [f"SET search_path = {schema}", *undo, f"UPDATE dsh_schema SET version = {version}"]
    )

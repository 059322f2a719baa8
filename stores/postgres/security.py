"""Row-level security on PostgreSQL (issue 17): every session has an owner; its owner
reads and writes it, a role it is shared with only reads it, nobody else sees it. The
policies and grants of every session-keyed table, and the migration step that made them.
"""

from __future__ import annotations

from stores.postgres.team import GROUP_ROLE

# ---------------------------------------------------------------- row-level security
#
# Issue 17: every session has an owner (the role that created it, ``current_user``); its
# owner reads and writes it, a role it is shared with (a row of ``dsh_shares``) only reads
# it, and nobody else sees any row of it. The server enforces that on every dsh table with
# row-level security, FORCEd so that the role owning the tables (whoever ran the first
# migration) is held to it too; dsh's roles need neither superuser nor BYPASSRLS.


def grant_to_group(table: str, privileges: str = "SELECT, INSERT, UPDATE, DELETE") -> str:
    """The statement that lets ``GROUP_ROLE`` (if the server has it) use ``table``."""
    return (
        "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"'{GROUP_ROLE}') AND to_regclass('{table}') IS NOT NULL THEN "
        f"GRANT {privileges} ON {table} TO {GROUP_ROLE}; END IF; END $$"
    )


SESSION_OWNER = "session_owner"
"""The column of every session-keyed table naming its session's owner (see below)."""

_SHARED_WITH_ME = "(SELECT session_key, owner FROM dsh_shares WHERE grantee = current_user)"
"""The sessions shared with the connecting role, as ``(key, owner)`` pairs: uncorrelated,
so a policy's ``IN`` reads it at most once per statement (a hashed subplan, built only
when a row the role does not own is met)."""


def session_row_security(
    table: str, key_column: str = "session_key", *, grantees_read: bool = True
) -> tuple[str, ...]:
    """Row-level security for a table whose rows belong to one session (``key_column``
    holds ``dsh_sessions.key``): a row is seen by whoever may read its session (only by
    its owner when not ``grantees_read``) and written only by the session's owner.
    Add a new session-keyed table's policies by appending these statements to the
    migration step that creates it (with its foreign key to ``dsh_sessions`` named
    ``{table}_{key_column}_fkey``, the default name, which they replace).

    Each row names its session's owner (``SESSION_OWNER``: filled by its default, the
    role that inserts it), and the foreign key ``(key, owner)`` makes that the real one
    (as ``dsh_shares`` does), so the policies never look at ``dsh_sessions``: checking
    ``dsh_sessions`` per row (its own policy checking ``dsh_shares`` in turn) made a
    20,000-event read 2.4-3.1x slower than without row security (now 1.2-1.3x for its
    owner: ``python -m tests.benchmarks --only rls``). Rows stored before this step take
    the migrating role, who owns every session then too."""
    owned = f"{SESSION_OWNER} = current_user"
    readable = f"{owned} OR ({table}.{key_column}, {SESSION_OWNER}) IN {_SHARED_WITH_ME}"
    # A row written is checked against the session itself, before any unique index sees
    # it: with the owner column alone, a row keyed on another's session would pass the
    # policy and meet that session's rows in the primary key, and the error ("duplicate
    # key", not the foreign key's) would tell the writer that the session exists.
    writable = (
        f"{owned} AND EXISTS (SELECT 1 FROM dsh_sessions AS s "
        f"WHERE s.key = {table}.{key_column} AND s.owner = current_user)"
    )
    if grantees_read:
        policies: tuple[str, ...] = (
            f"CREATE POLICY dsh_read ON {table} FOR SELECT USING ({readable})",
            f"CREATE POLICY dsh_insert ON {table} FOR INSERT WITH CHECK ({writable})",
            f"CREATE POLICY dsh_update ON {table} FOR UPDATE "
            f"USING ({owned}) WITH CHECK ({writable})",
            f"CREATE POLICY dsh_delete ON {table} FOR DELETE USING ({owned})",
        )
    else:
        policies = (f"CREATE POLICY dsh_owner ON {table} USING ({owned}) WITH CHECK ({writable})",)
    return (
        f"ALTER TABLE {table} ADD COLUMN {SESSION_OWNER} text NOT NULL DEFAULT current_user",
        # A role that bypasses row security (a superuser importing another's session, as
        # `dsh migrate` does, or indexing another's messages) writes rows of sessions it
        # does not own: those take the session's owner. Nobody else pays for the trigger.
        f"CREATE TRIGGER dsh_session_owner BEFORE INSERT ON {table} "
        f"FOR EACH ROW WHEN (NOT row_security_active('{table}')) "
        f"EXECUTE FUNCTION dsh_session_owner('{key_column}')",
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_{key_column}_fkey",
        f"ALTER TABLE {table} ADD CONSTRAINT {table}_{SESSION_OWNER}_fkey "
        f"FOREIGN KEY ({key_column}, {SESSION_OWNER}) REFERENCES dsh_sessions (key, owner) "
        "ON DELETE CASCADE ON UPDATE CASCADE",
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        *policies,
        grant_to_group(
            table, "SELECT, INSERT, UPDATE, DELETE" if grantees_read else "SELECT, INSERT, DELETE"
        ),
    )


def owners_and_shares() -> tuple[str, ...]:
    """The migration step of issue 17: owners, ``dsh_shares`` and the policies.

    A share row names the session's owner too, and the foreign key ``(session_key,
    owner)`` makes it the real one: nobody can forge a grant on another's session, and the
    sessions policy can check grants without reading ``dsh_sessions`` from ``dsh_shares``'s
    own policy (which would recurse). Existing sessions go to the role that migrates."""
    return (
        "ALTER TABLE dsh_sessions ADD COLUMN owner text NOT NULL DEFAULT current_user",
        "ALTER TABLE dsh_sessions ADD CONSTRAINT dsh_sessions_key_owner UNIQUE (key, owner)",
        """
        CREATE TABLE dsh_shares (
            session_key bigint NOT NULL,
            owner       text   NOT NULL DEFAULT current_user,
            grantee     text   NOT NULL CHECK (grantee <> ''),
            -- The owner is in the key so that a forged row (another owner: refused by
            -- the foreign key at the end of the statement) never meets a real one in
            -- the index first, which would tell the forger that the grant exists.
            PRIMARY KEY (session_key, owner, grantee),
            FOREIGN KEY (session_key, owner) REFERENCES dsh_sessions (key, owner)
                ON DELETE CASCADE ON UPDATE CASCADE
        )
        """,
        "CREATE INDEX dsh_shares_by_grantee ON dsh_shares (grantee, session_key)",
        # session_row_security's trigger: the owner of the session a row belongs to.
        """
        CREATE FUNCTION dsh_session_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.session_owner := (SELECT owner FROM dsh_sessions
                                  WHERE key = (to_jsonb(NEW) ->> TG_ARGV[0])::bigint);
            RETURN NEW;
        END
        $$
        """,
        "ALTER TABLE dsh_sessions ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE dsh_sessions FORCE ROW LEVEL SECURITY",
        "CREATE POLICY dsh_read ON dsh_sessions FOR SELECT USING (owner = current_user "
        f"OR (dsh_sessions.key, dsh_sessions.owner) IN {_SHARED_WITH_ME})",
        "CREATE POLICY dsh_insert ON dsh_sessions FOR INSERT WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_update ON dsh_sessions FOR UPDATE "
        "USING (owner = current_user) WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_delete ON dsh_sessions FOR DELETE USING (owner = current_user)",
        grant_to_group("dsh_sessions"),
        "ALTER TABLE dsh_shares ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE dsh_shares FORCE ROW LEVEL SECURITY",
        "CREATE POLICY dsh_read ON dsh_shares FOR SELECT "
        "USING (owner = current_user OR grantee = current_user)",
        "CREATE POLICY dsh_insert ON dsh_shares FOR INSERT WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_delete ON dsh_shares FOR DELETE USING (owner = current_user)",
        grant_to_group("dsh_shares", "SELECT, INSERT, DELETE"),
        *session_row_security("dsh_events"),
        *session_row_security("dsh_reply_leases"),
        # Issue 15's surface tables (the step before this one).
        *session_row_security("dsh_surface_nodes"),
        *session_row_security("dsh_surface_sums"),
        # Issue 18's index: read with the session; its backlog only by the session's
        # owner, who indexes it (a grantee may read the session but not write its index).
        *session_row_security("dsh_search"),
        *session_row_security("dsh_search_pending", grantees_read=False),
        # The schema version holds no session data: every member reads it; only the
        # tables' owner (who runs migrations) writes it.
        grant_to_group("dsh_schema", "SELECT"),
    )

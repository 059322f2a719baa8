"""What a PostgreSQL team store lets its members do (issue 30): the least the database allows.

A member is hostile input. Row security (``stores.postgres``) already keeps each member to
their own sessions and the ones shared with them; this schema step takes away what a
member could still do to the others:

- **No table privilege that allows ``LOCK``.** ``UPDATE``, ``DELETE`` or ``TRUNCATE`` on a
  table lets its holder ``LOCK`` it in any mode (``INSERT``: ``ROW EXCLUSIVE``), freezing
  every other member. Members get ``SELECT`` on the tables and column-level ``INSERT`` and
  ``UPDATE`` only (column privileges allow no ``LOCK`` beyond ``ACCESS SHARE``); what
  needs ``DELETE`` goes through functions owned by the tables' owner (``SECURITY
  DEFINER``) that check the caller owns what it deletes.
- **No chosen keys.** ``dsh_sessions.key`` and ``dsh_search.id`` are identity columns
  that no member may write, so nobody can take the keys the sequence hands out next.
- **No search rows.** ``dsh_search`` is written by a trigger from the events themselves
  (``dsh_search_text``, the SQL twin of ``core.search.indexed_text``, checked against it
  by a differential test) and read only through ``dsh_search_find``, which applies the
  access rule itself: under row security the planner would never use the trigram index
  (``ILIKE`` is not leakproof), so every member's search scanned every member's messages.
- **Sizes**: ids, cwds and titles are bounded by ``core.limits`` in the table too.
- **Leases**: a lease names a host and a process; only the session's owner reads it.

The definer functions run as the tables' owner, whom ``FORCE ROW LEVEL SECURITY`` holds to
the policies too: one more policy per table, for that role only, lets it through inside a
function another role called (``DEFINER_ONLY``); the owner's own queries stay held to the
policies. Each function sets its ``search_path`` to the schema of the tables (and
``pg_temp`` last), so nothing a member creates is called in its stead.
"""

from __future__ import annotations

from core.limits import MAX_CWD_BYTES, MAX_SESSION_ID_BYTES, MAX_TITLE_EVENT_BYTES

__all__ = [
    "DEFINER_ONLY",
    "GROUP_ROLE",
    "MEMBER_FUNCTIONS",
    "MEMBER_GRANTS",
    "REINDEX",
    "REINDEX_SQL",
    "team_step",
]

GROUP_ROLE = "dsh_users"
"""The group role of a team database: when it exists, each migration grants it the use of
the tables it creates (rows stay guarded by the policies). See the README's sharing part."""

DEFINER_ONLY = "current_user <> session_user"
"""True only inside a definer function another role called: there ``current_user`` is the
tables' owner and ``session_user`` the role that logged in. Outside any such function
(the owner's own queries included) they are the same role."""

MEMBER_GRANTS: dict[str, tuple[str, ...]] = {
    "dsh_schema": ("SELECT",),
    "dsh_sessions": (
        "SELECT",
        "INSERT (id, created_at, cwd, next_seq, owner)",
        "UPDATE (next_seq)",
    ),
    "dsh_events": (
        "SELECT",
        "INSERT (session_key, seq, type, time, kind, data, surface_op, source_event_seqs, "
        "projection)",
    ),
    "dsh_reply_leases": (
        "SELECT",
        "INSERT (session_key, owner, expires_at)",
        "UPDATE (owner, expires_at)",
    ),
    "dsh_surface_nodes": ("SELECT", "INSERT (session_key, pos, seq, projection)"),
    "dsh_surface_sums": (
        "SELECT",
        "INSERT (session_key, messages, bytes)",
        "UPDATE (messages, bytes)",
    ),
    "dsh_shares": ("SELECT", "INSERT (session_key, owner, grantee)"),
}
"""What ``dsh_users`` may do on each table (the README's admin section lists the same)."""

MEMBER_FUNCTIONS = (
    "dsh_delete_session(bigint)",
    "dsh_unshare(bigint, text)",
    "dsh_shadow_nodes(bigint, bigint, bigint)",
    "dsh_unindex(bigint, bigint[])",
    "dsh_search_find(text[], boolean[], integer)",
)
"""The functions members call (``EXECUTE`` granted to ``dsh_users``, revoked from PUBLIC)."""

_RLS_TABLES = (
    "dsh_sessions",
    "dsh_events",
    "dsh_reply_leases",
    "dsh_surface_nodes",
    "dsh_surface_sums",
    "dsh_shares",
)

# The type of each event the index reads, as stored (bytea of the type's UTF-8).
_USER, _STEERING, _ASSISTANT = (
    "'\\x" + name.encode().hex() + "'::bytea"
    for name in ("user/message", "steering/message", "assistant/message")
)
_TITLE_TYPE = "'\\x" + b"session/title".hex() + "'::bytea"

# The JSON of a stored event's data as PostgreSQL can read it: each NUL and surrogate
# escape becomes U+FFFD (PostgreSQL refuses to unescape the first and to read a lone
# surrogate at all; indexed_text replaces them so too), escaped backslashes set aside
# first so that every backslash left starts an escape. Data that is not JSON raises.
_JSON = r"""
CREATE FUNCTION dsh_json(data text) RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT replace(regexp_replace(replace(data, '\\', chr(1)),
                                  '\\u(0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})',
                                  '\\ufffd', 'g'),
                   chr(1), '\\')::json
$$
"""

# core.search.indexed_text in SQL, for a surface event's stored type and data (the JSON
# of core.jsoncodec, read by dsh_json). Projection (SPEC 4.6): user messages written by
# the user or carrying the compact checkpoint marker, user steering messages, assistant
# messages; their text blocks joined by newlines; nothing for an empty text.
_SEARCH_TEXT = f"""
CREATE FUNCTION dsh_search_text(kind bytea, data text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    doc json;
    message json;
    source json;
    content json;
    out text;
BEGIN
    IF kind NOT IN ({_USER}, {_STEERING}, {_ASSISTANT}) THEN
        RETURN NULL;
    END IF;
    doc := dsh_json(data);
    message := CASE WHEN kind = {_USER} THEN doc ELSE doc -> 'message' END;
    IF message IS NULL OR json_typeof(message) <> 'object' THEN
        RETURN NULL;
    END IF;
    source := message -> 'source';
    IF kind <> {_ASSISTANT} AND coalesce(json_typeof(source) = 'object'
                                         AND source ->> 'kind' = 'user', false) IS FALSE THEN
        IF kind = {_STEERING} OR coalesce(json_typeof(source) = 'object'
                AND source ->> 'kind' = 'plugin' AND source ->> 'plugin' = 'compact',
                false) IS FALSE THEN
            RETURN NULL;
        END IF;
    END IF;
    content := message -> 'content';
    IF content IS NULL OR json_typeof(content) <> 'array' THEN
        RETURN NULL;
    END IF;
    SELECT string_agg(block ->> 'text', E'\\n' ORDER BY n) INTO out
    FROM json_array_elements(content) WITH ORDINALITY AS b (block, n)
    WHERE json_typeof(block) = 'object' AND block ->> 'type' = 'text'
      AND json_typeof(block -> 'text') = 'string';
    RETURN nullif(out, '');
END
$$
"""

# For the rebuild of an existing index only: rows written before the table refused
# non-JSON surface data (by hand) are left out instead of failing the upgrade.
_SEARCH_TEXT_OR_NULL = """
CREATE FUNCTION dsh_search_text_or_null(kind bytea, data text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN dsh_search_text(kind, data);
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$
"""

_INDEX_TRIGGER = """
CREATE FUNCTION dsh_index_event() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    found text := dsh_search_text(NEW.type, NEW.data);
BEGIN
    IF found IS NOT NULL THEN
        INSERT INTO dsh_search (session_key, seq, text, session_owner)
        VALUES (NEW.session_key, NEW.seq, found, NEW.session_owner);
    END IF;
    RETURN NULL;
END
$$
"""

_DELETE_SESSION = """
CREATE FUNCTION dsh_delete_session(p_key bigint) RETURNS boolean
LANGUAGE sql SECURITY DEFINER AS $$
    WITH gone AS (
        DELETE FROM dsh_sessions WHERE key = p_key AND owner = session_user RETURNING 1
    )
    SELECT count(*) > 0 FROM gone
$$
"""

_UNSHARE = """
CREATE FUNCTION dsh_unshare(p_key bigint, p_grantee text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER AS $$
    WITH gone AS (
        DELETE FROM dsh_shares
        WHERE session_key = p_key AND owner = session_user AND grantee = p_grantee
        RETURNING 1
    )
    SELECT count(*) > 0 FROM gone
$$
"""

# A replace shadows the nodes between two positions: their projections go back to the
# caller, who keeps the surface sums.
_SHADOW_NODES = """
CREATE FUNCTION dsh_shadow_nodes(p_key bigint, p_lo bigint, p_hi bigint)
RETURNS SETOF integer
LANGUAGE sql SECURITY DEFINER AS $$
    DELETE FROM dsh_surface_nodes
    WHERE session_key = p_key AND session_owner = session_user AND pos BETWEEN p_lo AND p_hi
    RETURNING projection
$$
"""

_UNINDEX = """
CREATE FUNCTION dsh_unindex(p_key bigint, p_seqs bigint[]) RETURNS void
LANGUAGE sql SECURITY DEFINER AS $$
    DELETE FROM dsh_search
    WHERE session_key = p_key AND session_owner = session_user AND seq = ANY (p_seqs)
$$
"""

# The messages containing every pattern (ILIKE, or a case-folding regex where
# p_regex[i]) of the sessions the caller may read: its own and those shared with it (a
# grant names its session's real owner: dsh_shares' foreign key), for the role that
# logged in (session_user: inside the function current_user is the tables' owner).
# Newest first, at most p_limit. The readable sessions' keys are read first, so that the
# planner may combine the primary key with the trigram index (a common word) or use it
# alone (a term the index cannot serve: 1-2 characters, CJK in a C-locale database),
# checking the patterns on the caller's rows only; dsh_search has no row security to
# keep it from using either. Planned at each call (EXECUTE): a cached generic plan reads
# the whole trigram index for a pattern without trigrams.
_SEARCH_FIND = """
CREATE FUNCTION dsh_search_find(p_patterns text[], p_regex boolean[], p_limit integer)
RETURNS TABLE (session_key bigint, seq bigint, text text)
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
DECLARE
    matching text := '';
    readable bigint[];
BEGIN
    IF cardinality(p_patterns) IS DISTINCT FROM cardinality(p_regex)
       OR coalesce(cardinality(p_patterns), 0) NOT BETWEEN 1 AND 16 THEN
        RAISE EXCEPTION 'dsh_search_find: 1 to 16 patterns, each with its regex flag';
    END IF;
    SELECT array_agg(r.key) INTO readable FROM (
        SELECT s.key FROM dsh_sessions AS s WHERE s.owner = session_user
        UNION
        SELECT g.session_key FROM dsh_shares AS g WHERE g.grantee = session_user
    ) AS r;
    IF readable IS NULL THEN
        RETURN;
    END IF;
    FOR i IN 1 .. cardinality(p_patterns) LOOP
        matching := matching || format(
            ' AND m.text %s $1[%s]', CASE WHEN p_regex[i] THEN '~' ELSE 'ILIKE' END, i);
    END LOOP;
    RETURN QUERY EXECUTE
        'SELECT m.session_key, m.seq, m.text FROM dsh_search AS m '
        'WHERE m.session_key = ANY ($3)' || matching || ' ORDER BY m.id DESC LIMIT $2'
        USING p_patterns, p_limit, readable;
END
$$
"""

REINDEX = "SELECT 'dsh: index every session''s messages again'"
"""A statement of the step run as Python (``stores.postgres``: a few sessions at a time
with ``REINDEX_SQL``, reporting progress), a no-op as SQL."""

REINDEX_SQL = (
    "INSERT INTO dsh_search (session_key, seq, text, session_owner) "
    "SELECT n.session_key, n.seq, t.text, e.session_owner FROM dsh_surface_nodes AS n "
    "JOIN dsh_events AS e ON e.session_key = n.session_key AND e.seq = n.seq "
    "CROSS JOIN LATERAL (SELECT dsh_search_text_or_null(e.type, e.data) AS text) AS t "
    "WHERE n.session_key = ANY ($1::bigint[]) AND t.text IS NOT NULL "
    "ORDER BY e.time, n.session_key, n.seq"
)
"""The messages of the surfaces of some sessions (``$1``: their keys), into the index."""

_REINDEX_READS = ("dsh_sessions", "dsh_events", "dsh_surface_nodes")
"""What the reindex reads of every session (``REINDEX``), so the owner is let through."""

_DEFINERS = (
    "dsh_index_event()",
    "dsh_delete_session(bigint)",
    "dsh_unshare(bigint, text)",
    "dsh_shadow_nodes(bigint, bigint, bigint)",
    "dsh_unindex(bigint, bigint[])",
    "dsh_search_find(text[], boolean[], integer)",
)


def _grants() -> str:
    """One statement: take the group's table privileges back, then give what
    ``MEMBER_GRANTS`` and ``MEMBER_FUNCTIONS`` say (when the server has the group)."""
    body = [
        f"REVOKE ALL ON dsh_sessions, dsh_events, dsh_reply_leases, dsh_surface_nodes, "
        f"dsh_surface_sums, dsh_search, dsh_shares FROM {GROUP_ROLE}"
    ]
    for table, privileges in MEMBER_GRANTS.items():
        grant = f"GRANT {', '.join(privileges)} ON {table} TO {GROUP_ROLE}"
        if table == "dsh_schema":  # made by the migration itself, before its steps
            grant = f"IF to_regclass('dsh_schema') IS NOT NULL THEN {grant}; END IF"
        body.append(grant)
    for function in MEMBER_FUNCTIONS:
        body.append(f"GRANT EXECUTE ON FUNCTION {function} TO {GROUP_ROLE}")
    return (
        f"DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '{GROUP_ROLE}') THEN "
        + "; ".join(body)
        + "; END IF; END $$"
    )


def team_step() -> tuple[str, ...]:
    """The schema step of issue 30 (run by the tables' owner, in one transaction)."""
    return (
        # The index: no member reads or writes it but through the functions below.
        "DROP TABLE dsh_search_pending",
        "DROP POLICY dsh_read ON dsh_search",
        "DROP POLICY dsh_insert ON dsh_search",
        "DROP POLICY dsh_update ON dsh_search",
        "DROP POLICY dsh_delete ON dsh_search",
        "ALTER TABLE dsh_search NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE dsh_search DISABLE ROW LEVEL SECURITY",
        "DROP TRIGGER dsh_session_owner ON dsh_search",
        # Leases name a host and a process: the session's owner alone reads them.
        "DROP POLICY dsh_read ON dsh_reply_leases",
        "DROP POLICY dsh_insert ON dsh_reply_leases",
        "DROP POLICY dsh_update ON dsh_reply_leases",
        "DROP POLICY dsh_delete ON dsh_reply_leases",
        "CREATE POLICY dsh_owner ON dsh_reply_leases USING (session_owner = current_user) "
        "WITH CHECK (session_owner = current_user AND EXISTS (SELECT 1 FROM dsh_sessions AS s "
        "WHERE s.key = dsh_reply_leases.session_key AND s.owner = current_user))",
        # The definer functions' way through FORCE ROW LEVEL SECURITY (see the module doc).
        *(
            f"CREATE POLICY dsh_definer ON {table} TO CURRENT_USER "
            f"USING ({DEFINER_ONLY}) WITH CHECK ({DEFINER_ONLY})"
            for table in _RLS_TABLES
        ),
        _JSON,
        # A member's own sessions (the search function reads them first).
        "CREATE INDEX dsh_sessions_by_owner ON dsh_sessions (owner)",
        # Sizes, for rows written from now on (older ones are read within them).
        "ALTER TABLE dsh_sessions ADD CONSTRAINT dsh_sessions_id_size "
        f"CHECK (octet_length(id) <= {MAX_SESSION_ID_BYTES}) NOT VALID",
        "ALTER TABLE dsh_sessions ADD CONSTRAINT dsh_sessions_cwd_size "
        f"CHECK (octet_length(cwd) <= {MAX_CWD_BYTES}) NOT VALID",
        # A title row is a session/title event whose title is a string, of bounded size;
        # a surface row's data is JSON (what the index reads of it).
        "ALTER TABLE dsh_events ADD CONSTRAINT dsh_events_title "
        f"CHECK (kind <> 2 OR (type = {_TITLE_TYPE} "
        f"AND octet_length(data) <= {MAX_TITLE_EVENT_BYTES} "
        "AND coalesce(json_typeof(dsh_json(data) -> 'title') = 'string', false))) NOT VALID",
        "ALTER TABLE dsh_events ADD CONSTRAINT dsh_events_surface_json "
        "CHECK (kind <> 1 OR dsh_json(data) IS NOT NULL) NOT VALID",
        _SEARCH_TEXT,
        _SEARCH_TEXT_OR_NULL,
        _INDEX_TRIGGER,
        _DELETE_SESSION,
        _UNSHARE,
        _SHADOW_NODES,
        _UNINDEX,
        _SEARCH_FIND,
        # Each definer function runs with the tables' schema first, pg_temp last.
        "DO $$ DECLARE f text; BEGIN FOREACH f IN ARRAY ARRAY["
        + ", ".join(f"'{f}'" for f in _DEFINERS)
        + "] LOOP EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', "
        "f, current_schema()); EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f); "
        "END LOOP; END $$",
        "CREATE TRIGGER dsh_index AFTER INSERT ON dsh_events FOR EACH ROW "
        "WHEN (NEW.kind = 1) EXECUTE FUNCTION dsh_index_event()",
        # The index again, from the events (the surface's messages): rows a member wrote
        # by hand go, and sessions an older dsh left to index are indexed.
        # (The owner reads every session's rows for it, for this transaction only.)
        *(f"ALTER TABLE {t} NO FORCE ROW LEVEL SECURITY" for t in _REINDEX_READS),
        "DELETE FROM dsh_search",
        REINDEX,
        *(f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY" for t in _REINDEX_READS),
        _grants(),
    )

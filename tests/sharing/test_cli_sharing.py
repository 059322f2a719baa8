"""Issue 17 in the CLI (``tui.cli.main`` in-process, and the real ``dsh`` in a child
process): two roles on one team PostgreSQL. Bob never learns of alice's private session,
reads the one she shared, and can change neither."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.references import SessionReferenceInput, format_session_reference_mention
from stores import open_store
from tests.cli.conftest import Result, Run, dsh, dsh_env
from tests.cli.test_cli_postgres import run_dsh
from tests.pgcluster import ALICE, BOB, Cluster
from tests.sharing.team import Team, seed_team

__all__ = ["dsh", "dsh_env"]


@pytest.fixture
def team(pg_cluster: Cluster) -> Iterator[Team]:
    yield asyncio.run(seed_team(pg_cluster))


def event_counts(team: Team) -> str:
    """Every session's event count, seen by the superuser (row security aside)."""
    return team.cluster.psql(
        "SELECT string_agg(convert_from(s.id, 'UTF8') || '=' || "
        f"(SELECT count(*) FROM {team.schema}.dsh_events AS e WHERE e.session_key = s.key), "
        f"',' ORDER BY s.key) FROM {team.schema}.dsh_sessions AS s"
    )


def as_bob(dsh: Run, team: Team) -> Run:
    return lambda *args: dsh(*args, db=team.bob_url)  # type: ignore[arg-type]


def as_alice(dsh: Run, team: Team) -> Run:
    return lambda *args: dsh(*args, db=team.alice_url)  # type: ignore[arg-type]


def error(result: Result) -> str:
    assert result.code == 1, (result.out, result.err)
    assert "Traceback" not in result.err
    (line,) = result.err.splitlines()
    assert line.startswith("dsh: error: ")
    return line


def test_sessions_and_candidates_hide_private_sessions_and_name_owners(
    dsh: Run, team: Team
) -> None:
    bob = as_bob(dsh, team)
    listed = bob("sessions")
    assert listed.code == 0, listed.err
    assert team.private not in listed.out and "secret" not in listed.out
    head, *rows = listed.out.splitlines()
    assert head.split("\t") == ["id", "title", "cwd", "last active", "owner"]
    (shared_row,) = [r.split("\t") for r in rows if team.shared in r]
    assert shared_row[0] == team.shared and shared_row[4] == ALICE
    (own_row,) = [r.split("\t") for r in rows if team.bobs in r]
    assert own_row[0] == team.bobs and own_row[4] == ""
    rows_json = bob("sessions", "--json").json()
    assert {(r["id"], r["owner"]) for r in rows_json} == {(team.shared, ALICE), (team.bobs, BOB)}
    # Alice, who owns all she sees, gets no owner column.
    assert as_alice(dsh, team)("sessions").out.splitlines()[0].split("\t") == [
        "id",
        "title",
        "cwd",
        "last active",
    ]
    candidates = bob("candidates", team.bobs, "--json").json()
    assert [c["id"] for c in candidates] == [team.shared]
    assert bob("candidates", team.bobs, "secret", "--json").json() == []


@pytest.mark.parametrize(
    "command",
    [
        ("show", "{sid}"),
        ("show", "{sid}", "--json"),
        ("export", "{sid}", "--format", "json"),
        ("mention", "{sid}"),
        ("send", "{sid}", "hello"),
        ("retry", "{sid}"),
        ("edit", "{sid}", "1", "hello"),
        ("fork", "{sid}"),
        ("usage", "{sid}"),
        ("rename", "{sid}", "mine now"),
        ("compact", "{sid}"),
        ("delete", "{sid}", "--yes"),
        ("unlock", "{sid}", "--yes"),
        ("share", "{sid}", "--with", BOB),
        ("shares", "{sid}"),
    ],
)
def test_a_private_session_fails_like_one_that_does_not_exist(
    dsh: Run, team: Team, command: tuple[str, ...]
) -> None:
    bob = as_bob(dsh, team)
    before = event_counts(team)
    private = error(bob(*(a.format(sid=team.private) for a in command)))
    missing = error(bob(*(a.format(sid="no-such-session") for a in command)))
    assert private == missing.replace("no-such-session", team.private)
    assert event_counts(team) == before


def test_a_mention_of_a_private_session_fails_like_a_deleted_one(dsh: Run, team: Team) -> None:
    bob = as_bob(dsh, team)

    def prepare(sid: str) -> str:
        mention = format_session_reference_mention(SessionReferenceInput(sid, "that one"))
        return error(bob("prepare", "--session", team.bobs, f"see {mention}"))

    assert prepare(team.private) == prepare("deleted-long-ago").replace(
        "deleted-long-ago", team.private
    )
    assert "does not exist" in prepare(team.private)
    before = event_counts(team)
    mention = format_session_reference_mention(SessionReferenceInput(team.private, "that one"))
    sent = bob("send", team.bobs, f"see {mention}")
    assert sent.code == 1 and "does not exist" in sent.err
    assert event_counts(team) == before
    # The shared one is referenced like any other.
    mention = format_session_reference_mention(SessionReferenceInput(team.shared, "notes"))
    shown = bob("prepare", "--session", team.bobs, f"see {mention}")
    assert shown.code == 0 and f"hello from {team.shared}" in shown.out


def test_a_shared_session_is_readable_and_read_only(dsh: Run, team: Team) -> None:
    bob = as_bob(dsh, team)
    assert f"hello from {team.shared}" in bob("show", team.shared).out
    exported = bob("export", team.shared, "--format", "json")
    assert exported.code == 0 and json.loads(exported.out.splitlines()[0])["id"] == team.shared
    before = event_counts(team)
    for command in (
        ("send", team.shared, "let me in"),
        ("send", team.shared, "--profile", "offline", "let me in"),  # no switch either
        ("retry", team.shared),
        ("edit", team.shared, "1", "let me in"),
        ("rename", team.shared, "mine now"),
        ("compact", team.shared),
        ("delete", team.shared, "--yes"),
        ("unlock", team.shared, "--yes"),
        ("unlock", team.shared),
        ("share", team.shared, "--with", "dsh"),
        ("unshare", team.shared, "--with", BOB),
    ):
        line = error(bob(*command))
        assert line == (
            "dsh: error: the session is read-only: it is owned by alice "
            "(only its owner can change it)"
        ), command
    assert event_counts(team) == before


def test_a_shared_session_can_be_forked_into_ones_own(dsh: Run, team: Team) -> None:
    # Issue 32: a fork is the forker's own session, whoever owns the parent.
    bob = as_bob(dsh, team)
    before = event_counts(team)
    forked = bob("fork", team.shared, "--title", "Bob's take")
    assert forked.code == 0, forked.err
    fork = forked.out.strip()
    assert event_counts(team) != before  # a new session, its events
    rows = {row["id"]: row for row in bob("sessions", "--json").json()}
    assert rows[fork]["owner"] == BOB and rows[fork]["title"] == "Bob's take"
    assert rows[fork]["parent"] == {"id": team.shared, "seq": 2}
    assert rows[team.shared]["parent"] is None
    sent = bob("send", fork, "carry on")
    assert sent.code == 0, sent.err
    log = bob("show", fork, "--json").json()
    assert [e["type"] for e in log][:3] == ["session/fork", "user/message", "assistant/message"]
    assert f"hello from {team.shared}" in bob("show", fork).out
    # alice does not see bob's fork, and her session is unchanged
    assert fork not in {row["id"] for row in as_alice(dsh, team)("sessions", "--json").json()}


def test_share_shares_and_unshare(dsh: Run, team: Team) -> None:
    alice, bob = as_alice(dsh, team), as_bob(dsh, team)
    made = alice("share", team.private, "--with", BOB)
    assert (made.code, made.out) == (0, f"shared {team.private} with bob (read-only)\n")
    assert alice("share", team.private, "--with", BOB).out.endswith("already shared with bob\n")
    assert team.private in bob("sessions").out
    listed = alice("shares").out.splitlines()
    assert sorted(listed) == sorted(
        [
            f"{team.private}  Alice secret plans\tshared with bob",
            f"{team.shared}  Alice shared notes\tshared with bob",
        ]
    )
    assert bob("shares", "--json").json() == [
        {"id": team.private, "owner": ALICE, "with": BOB},
        {"id": team.shared, "owner": ALICE, "with": BOB},
    ] or bob("shares", "--json").json() == [
        {"id": team.shared, "owner": ALICE, "with": BOB},
        {"id": team.private, "owner": ALICE, "with": BOB},
    ]
    assert "owned by alice, shared with you" in bob("shares", team.private).out
    gone = alice("unshare", team.private, "--with", BOB)
    assert gone.out == f"{team.private} is no longer shared with bob\n"
    assert alice("unshare", team.private, "--with", BOB).out.endswith("was not shared with bob\n")
    assert team.private not in bob("sessions").out
    assert alice("shares", team.private).out == "Not shared with anyone.\n"
    assert "no user 'carol'" in error(alice("share", team.private, "--with", "carol"))
    assert "owns the session already" in error(alice("share", team.private, "--with", ALICE))


def test_the_real_dsh_shares_in_a_child_process(tmp_path: Path, team: Team) -> None:
    shared = run_dsh(tmp_path, "--db", team.alice_url, "share", team.private, "--with", BOB)
    assert shared.returncode == 0, shared.stderr
    listed = run_dsh(tmp_path, "sessions", "--json", env={"DSH_DB": team.bob_url})
    assert listed.returncode == 0, listed.stderr
    assert {r["id"] for r in json.loads(listed.stdout)} == {team.private, team.shared, team.bobs}
    refused = run_dsh(tmp_path, "rename", team.private, "mine", env={"DSH_DB": team.bob_url})
    assert refused.returncode == 1 and "read-only: it is owned by alice" in refused.stderr


def test_cli_migrate_carries_owners_and_shares(dsh: Run, team: Team, tmp_path: Path) -> None:
    source = tmp_path / "laptop.sqlite3"

    async def make() -> None:
        async with await open_store(source) as store:
            await store.create_session("laptop-1", created_at=1)
            await store.share("laptop-1", BOB)

    asyncio.run(make())
    moved = dsh("migrate", "--from", str(source), "--to", team.alice_url, db=None)
    assert moved.code == 0, moved.err
    assert "1 copied" in moved.out and "1 shares made" in moved.out
    assert "(shared with 1 more)" in moved.err
    assert {r["id"]: r["owner"] for r in as_bob(dsh, team)("sessions", "--json").json()}[
        "laptop-1"
    ] == ALICE

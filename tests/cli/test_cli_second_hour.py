"""Issue 31, "a newcomer's second hour": the command line lists sessions in the app's order,
``dsh new`` starts where you are, and ``dsh send --help`` says how to name a session."""

from __future__ import annotations

from tests.cli.conftest import Run


def new(dsh: Run, *args: str) -> str:
    result = dsh("new", *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_sessions_are_listed_by_last_activity_as_in_the_app(dsh: Run) -> None:
    used = new(dsh, "--cwd", "/w/used")
    newer = new(dsh, "--cwd", "/w/newer")  # created later, never used
    assert dsh("rename", used, "Used since").code == 0  # the newest activity
    listed = dsh("sessions")
    assert listed.code == 0, listed.err
    head, *lines = listed.out.splitlines()
    assert head.split("\t") == ["id", "title", "cwd", "last active"]
    assert [line.split("\t")[0] for line in lines] == [used, newer]
    rows = dsh("sessions", "--json").json()
    assert [row["id"] for row in rows] == [used, newer]
    assert rows[0]["last_active_at"] > rows[0]["created_at"]
    assert rows[1]["last_active_at"] == rows[1]["created_at"]  # no event yet: its creation

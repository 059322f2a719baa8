"""Issue 31, "a newcomer's second hour": the command line lists sessions in the app's order,
``dsh new`` starts where you are, and ``dsh send --help`` says how to name a session."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tui.cli.commands import main
from tui.shared.times import local_minute, utc_minute


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
    assert [row["id"] for row in rows] == [used, newer]  # the same order


@pytest.fixture
def kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A time zone half an hour off any whole-hour one: local and UTC times differ."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_markdown_export_after_a_compaction_holds_the_whole_history(
    dsh: Run, kolkata: None
) -> None:
    sid = new(dsh)
    assert dsh("send", sid, "first question about caching").code == 0
    assert dsh("send", sid, "second question about queues").code == 0
    assert dsh("compact", sid).code == 0
    assert dsh("send", sid, "third question after compaction").code == 0
    exported = dsh("export", sid, "--format", "md")
    assert exported.code == 0, exported.err
    md = exported.out
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    kinds = [h.split(" · ")[0] for h in headings]
    assert kinds == ["## You", "## Assistant"] * 2 + ["## Compacted summary"] + [
        "## You",
        "## Assistant",
    ]
    assert all(h.endswith(" · compacted") for h in headings[:4]), headings
    assert not any(h.endswith("compacted") for h in headings[4:]), headings
    for said in ("first question about caching", "second question", "third question"):
        assert said in md
    assert md.index("first question") < md.index("<compacted-summary>") < md.index("third")
    assert "- 4 earlier messages are marked compacted: the model sees the summary" in md
    # Local time, as the app shows it (and the zone said once), not UTC.
    events = dsh("show", sid, "--json").json()
    first = next(e for e in events if e["type"] == "user/message")
    assert headings[0] == f"## You · {local_minute(first['time'])} · compacted"
    assert local_minute(first["time"]) != utc_minute(first["time"])
    assert "times are local, UTC+05:30" in md


def test_new_records_the_current_directory_as_ctrl_n_does(
    dsh: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "project"
    here.mkdir()
    monkeypatch.chdir(here)
    plain = new(dsh)
    elsewhere = new(dsh, "--cwd", "/somewhere/else")
    none = new(dsh, "--no-cwd")
    cwds = {row["id"]: row["cwd"] for row in dsh("sessions", "--json").json()}
    assert cwds == {plain: str(here), elsewhere: "/somewhere/else", none: None}
    with pytest.raises(SystemExit) as usage:
        dsh("new", "--cwd", "/x", "--no-cwd")
    assert usage.value.code == 2


def test_send_help_says_how_to_name_a_session(dsh: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["send", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "full id" in text and "id prefix" in text and "exact title" in text
    # ... and it is the truth: each of the three names the session.
    sid = new(dsh)
    assert dsh("rename", sid, "Named plan").code == 0
    for name in (sid, sid[:8], "Named plan"):
        assert dsh("send", name, f"via {name}").code == 0, name
    shown = dsh("show", sid).out
    assert all(f"via {name}" in shown for name in (sid, sid[:8], "Named plan"))


def test_the_hostile_demo_session_says_it_is_a_demo(dsh: Run) -> None:
    assert dsh("demo").code == 0
    titles = {row["id"]: row["title"] for row in dsh("sessions", "--json").json()}
    hostile = titles["demo-hostile-[bold]x[/]"]
    assert hostile.startswith("Demo: hostile input is shown inert"), hostile
    assert "[bold red]PWNED[/]" in hostile and "\x1b[31m" in hostile  # still hostile after
    listed = dsh("sessions").out
    row = next(line for line in listed.splitlines() if line.startswith("demo-hostile"))
    assert row.split("\t")[1].startswith("Demo: hostile input is shown inert")

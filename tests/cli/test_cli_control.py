"""Issue 32 §2 on the command line, on SQLite and PostgreSQL: ``dsh retry``, ``dsh edit``,
``dsh fork``, the lineage in ``dsh sessions``, and how ``dsh show`` and ``dsh export`` read
a fork's origin and a profile switch. History is never rewritten: what a retry or an edit
replaced stays in the log, and the surface holds only the new."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.display import single_line
from core.log import SESSION_FORK, SESSION_PROFILE, user_message
from stores import open_store
from tests.cli.conftest import Result, Run
from tests.cli.test_cli_unlock import killed_in_a_container, leave_lease
from tests.storekinds import pg_schema_url
from tests.terminal_safety import HOSTILE, assert_terminal_safe
from tui.cli.output import session_table

CONFIG = """\
[profiles.second]
provider = "offline"
model = "echo-2"
"""


@pytest.fixture(params=["sqlite", "postgres"])
def where(
    request: pytest.FixtureRequest, dsh_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The database of each durable kind; a config with a second offline profile."""
    config = tmp_path / "dsh.toml"
    config.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("DSH_CONFIG", str(config))
    if request.param == "sqlite":
        yield str(dsh_env)
        return
    with pg_schema_url(request.getfixturevalue("pg_cluster")) as url:
        yield url


@pytest.fixture
def run(dsh: Run, where: str) -> Run:
    return lambda *args, **kw: dsh("--db", where, *args, db=None, **kw)


def one_line(result: Result, code: int = 1) -> str:
    assert result.code == code, (result.out, result.err)
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


def log_of(run: Run, session: str) -> list[dict[str, Any]]:
    shown = run("show", session, "--json")
    assert shown.code == 0, shown.err
    events: list[dict[str, Any]] = shown.json()
    return events


def new(run: Run, *args: str) -> str:
    made = run("new", *args)
    assert made.code == 0, made.err
    return made.out.strip()


def send(run: Run, session: str, text: str) -> Result:
    sent = run("send", session, text)
    assert sent.code == 0, sent.err
    return sent


def sessions(run: Run) -> dict[str, dict[str, Any]]:
    listed = run("sessions", "--json")
    assert listed.code == 0, listed.err
    return {row["id"]: row for row in listed.json()}


def of_type(log: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in log if e["type"] == kind]


def user_seqs(log: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in of_type(log, "user/message")]


def text_of(event: dict[str, Any]) -> str:
    message = event["data"].get("message", event["data"])
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


def transcript_items(shown: str) -> list[str]:
    """The headers of ``dsh show``'s items: ``You · … · #0`` → ``You #0``."""
    return [
        f"{m.group(1)} #{m.group(2)}"
        for m in re.finditer(r"^(\S.*?) · [^\n]* · #(\d+)", shown, re.MULTILINE)
    ]


# --------------------------------------------------------------------------- retry


def test_retry_streams_a_new_reply_and_keeps_the_earlier_one_in_the_log(run: Run) -> None:
    sid = new(run)
    first = send(run, sid, "what is a fork?")
    before = log_of(run, sid)
    (earlier,) = of_type(before, "assistant/message")
    retried = run("retry", "--profile", "second", sid)
    assert retried.code == 0, retried.err
    assert retried.out == first.out  # the offline model answers the same request alike
    assert "switched what is a fork? to profile second (offline, echo-2)" in retried.err
    log = log_of(run, sid)
    assert log[: len(before)] == before, "nothing written is ever rewritten"
    old, new_reply = of_type(log, "assistant/message")
    assert old == earlier
    assert new_reply["surface_op"] == {"op": "replace", "start": old["seq"], "end": old["seq"]}
    assert new_reply["source_event_seqs"] == [old["seq"]]
    assert new_reply["data"]["message"]["source"]["model"] == "echo-2"
    # The surface holds only the new reply: the transcript shows one answer, by echo-2.
    # (Log-only items before the newest replace, as the switch here, are not shown.)
    shown = run("show", sid).out
    assert transcript_items(shown) == ["You #0", f"Assistant #{new_reply['seq']}"]
    assert "echo-2" in shown and "· echo-1" not in shown
    # The export keeps the earlier attempt, marked, and the switch, in the order written.
    exported = run("export", sid, "--format", "md").out
    assert exported.index(" · replaced") < exported.index("_profile: second (offline, echo-2)")
    assert exported.count("## Assistant") == 2
    assert "## Assistant · " in exported and " · replaced" in exported
    assert "- 1 earlier message is marked replaced" in exported


async def _unanswered(where: str) -> None:
    async with await open_store(where) as store:
        await store.create_session("waiting", cwd=None)
        await store.append(
            "waiting", "user/message", user_message("left unanswered"), surface_op="append"
        )


def test_retry_of_a_message_without_a_reply_answers_it(run: Run, where: str) -> None:
    asyncio.run(_unanswered(where))
    retried = run("retry", "waiting")
    assert retried.code == 0, retried.err
    assert "Request: left unanswered" in retried.out
    (reply,) = of_type(log_of(run, "waiting"), "assistant/message")
    assert reply["surface_op"] == "append" and reply["source_event_seqs"] is None


def test_retry_with_nothing_to_answer_is_one_line(run: Run) -> None:
    sid = new(run)
    assert one_line(run("retry", sid)) == (
        "dsh: error: nothing to retry: the session has no messages"
    )
    assert log_of(run, sid) == []
    missing = one_line(run("retry", "no-such-session"))
    assert missing.startswith("dsh: error: no session matches")


def test_retry_of_a_busy_session_stores_nothing(run: Run, where: str) -> None:
    sid = new(run)
    send(run, sid, "hello")
    before = log_of(run, sid)
    leave_lease(where, sid, killed_in_a_container())
    for args in (("retry", sid), ("edit", sid, "0", "hi"), ("retry", "--profile", "second", sid)):
        line = one_line(run(*args))
        assert line.startswith("dsh: error: the session is busy"), args
    assert log_of(run, sid) == before, "not even the profile switch"


# --------------------------------------------------------------------------- edit


def test_edit_continues_from_the_edited_message(run: Run) -> None:
    sid = new(run)
    send(run, sid, "first question")
    send(run, sid, "second question")
    before = log_of(run, sid)
    first, second = user_seqs(before)
    edited = run("edit", sid, str(first), "first question, better put")
    assert edited.code == 0, edited.err
    assert "Request: first question, better put" in edited.out
    assert "Earlier messages in this conversation: 0." in edited.out  # the rest is gone
    log = log_of(run, sid)
    assert log[: len(before)] == before
    new_message = of_type(log, "user/message")[-1]
    last_surface = max(e["seq"] for e in before if e["surface_op"] is not None)
    assert new_message["surface_op"] == {"op": "replace", "start": first, "end": last_surface}
    shadowed = [e["seq"] for e in before if e["surface_op"] is not None]
    assert sorted(new_message["source_event_seqs"]) == shadowed
    shown = run("show", sid).out
    assert "first question, better put" in shown
    assert "second question" not in shown and "\n  first question\n" not in shown
    assert len(transcript_items(shown)) == 2
    # still in the log and in the export, marked
    assert text_of(log[second]) == "second question"
    exported = run("export", sid, "--format", "md").out
    assert "> second question" in exported and "> first question, better put" in exported
    assert "- 4 earlier messages are marked replaced" in exported


def test_edit_mistakes_are_one_line_and_store_nothing(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = new(run)
    send(run, sid, "hello")
    send(run, sid, "again")
    run("edit", sid, "0", "hello, edited")  # 0 and what followed leave the surface
    before = log_of(run, sid)
    reply = of_type(before, "assistant/message")[-1]["seq"]
    title = next(e["seq"] for e in before if e["type"] == "session/title")
    for args, words in (
        (("edit", sid, str(reply), "x"), f"seq {reply} is not one of your messages"),
        (("edit", sid, "0", "x"), "seq 0 is not a message of the current conversation"),
        (("edit", sid, str(title), "x"), f"seq {title} is not a message of the current"),
        (("edit", sid, "999", "x"), "seq 999 is not a message of the current conversation"),
        (("edit", sid, "0", "  "), "the message is empty"),
    ):
        line = one_line(run(*args))
        assert line.startswith("dsh: error: ") and words in line, (args, line)
    for seq in ("-1", "one", "٣"):
        with pytest.raises(SystemExit) as usage:
            run("edit", sid, seq, "x")
        assert usage.value.code == 2
        assert "expected an event number (0 or more)" in capsys.readouterr().err
    assert log_of(run, sid) == before


def test_edit_with_a_mention_replaces_the_snapshot_too(run: Run) -> None:
    source = new(run)
    send(run, source, "the source says hi")
    sid = new(run)
    mention = run("mention", source).out.strip()
    sent = send(run, sid, f"look at {mention}")
    assert "snapshot attached" in sent.err
    (message,) = [e for e in of_type(log_of(run, sid), "user/message")
                  if e["data"]["source"]["kind"] == "user"]  # fmt: skip
    edited = run("edit", sid, str(message["seq"]), "no reference now")
    assert edited.code == 0, edited.err
    last = of_type(log_of(run, sid), "user/message")[-1]
    assert last["surface_op"]["start"] == message["seq"] - 1  # the snapshot before it
    assert "Referenced sessions" not in edited.out


# --------------------------------------------------------------------------- fork


def test_fork_at_a_message_is_an_ordinary_session(run: Run) -> None:
    parent = new(run, "--cwd", "/proj", "--profile", "second")
    send(run, parent, "plan the release")
    send(run, parent, "now the rollback")
    log = log_of(run, parent)
    first, second = user_seqs(log)
    reply = of_type(log, "assistant/message")[0]["seq"]
    forked = run("fork", parent, "--at", str(reply))
    assert forked.code == 0, forked.err
    fork = forked.out.strip()
    assert forked.out == f"{fork}\n" and fork != parent
    assert log_of(run, parent) == log, "the parent is left as it is"
    rows = sessions(run)
    assert rows[fork]["parent"] == {"id": parent, "seq": reply}
    assert rows[fork]["title"] == "Fork of plan the release"
    assert rows[fork]["cwd"] == "/proj" and rows[fork]["profile"] == "second"
    assert rows[parent]["parent"] is None
    flog = log_of(run, fork)
    assert [e["type"] for e in flog] == [
        SESSION_FORK,
        "user/message",
        "assistant/message",
        SESSION_PROFILE,
        "session/title",
    ]
    assert flog[0]["data"] == {"parent": {"id": parent, "seq": reply}}
    assert flog[3]["data"] == {"profile": "second", "provider": "offline", "model": "echo-2"}
    assert [text_of(e) for e in flog[1:3]] == [text_of(log[first]), text_of(log[reply])]
    # It answers on its parent's profile and goes its own way.
    sent = send(run, fork, "a different rollback")
    assert "Earlier messages in this conversation: 2." in sent.out
    assert of_type(log_of(run, fork), "assistant/message")[-1]["data"]["profile"] == "second"
    assert len(log_of(run, parent)) == len(log)
    # show and export say where it comes from
    shown = run("show", fork).out
    assert f"▸ forked from {parent} at seq {reply} · " in shown
    assert transcript_items(shown)[0] == f"▸ forked from {parent} at seq {reply} #0"
    exported = run("export", fork, "--format", "md").out
    assert f"_forked from {parent} at seq {reply} · " in exported
    assert "_profile: second (offline, echo-2) · " in exported
    assert text_of(log[second]) not in shown + exported  # not taken over


def test_fork_of_a_fork_with_a_title_and_a_mention_of_it(run: Run) -> None:
    parent = new(run)
    send(run, parent, "root question")
    child = run("fork", parent, "--title", "  Child   line ")
    assert child.code == 0, child.err
    child_id = child.out.strip()
    send(run, child_id, "child question")
    grandchild = run("fork", child_id)  # all of it, without --at
    assert grandchild.code == 0, grandchild.err
    grand_id = grandchild.out.strip()
    rows = sessions(run)
    child_log = log_of(run, child_id)
    assert rows[child_id]["title"] == "Child line"
    assert rows[grand_id]["title"] == "Fork of Child line"
    assert rows[grand_id]["parent"] == {
        "id": child_id,
        "seq": max(e["seq"] for e in child_log if e["surface_op"] is not None),
    }
    assert rows[grand_id]["profile"] == "offline"  # the parent followed the default: so does it
    assert of_type(log_of(run, grand_id), SESSION_PROFILE) == []
    # The lineage column names each parent by its title, with the seq.
    table = run("sessions").out.splitlines()
    head = table[0].split("\t")
    assert head == ["id", "title", "cwd", "last active", "forked from"]  # none chose a profile
    cells = {row.split("\t")[0]: row.split("\t") for row in table[1:]}
    assert cells[grand_id][4] == f"Child line #{rows[grand_id]['parent']['seq']}"
    assert cells[child_id][4] == f"root question #{rows[child_id]['parent']['seq']}"
    assert cells[parent][4] == ""
    # A fork is referenced like any session.
    other = new(run)
    mention = run("mention", grand_id).out.strip()
    sent = send(run, other, f"what happened in {mention}?")
    assert "snapshot attached" in sent.err
    assert "- Fork of Child line: 4 messages received" in sent.out


def test_fork_mistakes_are_one_line_and_create_nothing(run: Run) -> None:
    empty = new(run)
    sid = new(run)
    send(run, sid, "hello")
    run("retry", sid)
    log = log_of(run, sid)
    shadowed = of_type(log, "assistant/message")[0]["seq"]
    chunk = next(e["seq"] for e in log if e["type"] == "assistant/chunk")
    before = sessions(run)
    for args, words in (
        (("fork", empty), "nothing to fork: the session has no messages"),
        (("fork", sid, "--at", str(shadowed)), f"seq {shadowed} is not a message of the current"),
        (("fork", sid, "--at", str(chunk)), f"seq {chunk} is not a message of the current"),
        (("fork", sid, "--at", "4000"), "seq 4000 is not a message of the current conversation"),
        (("fork", sid, "--title", " "), "a title cannot be empty"),
        (("fork", "no-such-session"), "no session matches"),
    ):
        line = one_line(run(*args))
        assert line.startswith("dsh: error: ") and words in line, (args, line)
    assert sessions(run) == before


def test_lineage_with_hostile_titles_is_escaped_and_aligned(run: Run) -> None:
    parent = new(run)
    send(run, parent, "hello")
    assert run("rename", parent, f"title {HOSTILE}").code == 0
    fork = run("fork", parent, "--title", f"fork {HOSTILE}")
    assert fork.code == 0, fork.err
    for args in (("sessions",), ("sessions", "--json"), ("show", fork.out.strip())):
        result = run(*args)
        assert_terminal_safe(result.out, " ".join(args))
    fork_id = fork.out.strip()
    listed = run("sessions").out.splitlines()
    (row,) = [r.split("\t") for r in listed if r.startswith(single_line(fork_id))]
    seq = sessions(run)[fork_id]["parent"]["seq"]
    assert (
        row[listed[0].split("\t").index("forked from")]
        == f"{single_line(f'title {HOSTILE}', 40)} #{seq}"
    )
    assert sessions(run)[fork_id]["title"] == " ".join(f"fork {HOSTILE}".split())


# --------------------------------------------------------------------------- the table


def test_the_fork_column_is_cut_to_fit_and_the_rest_stays_aligned() -> None:
    head = ("id", "title", "cwd", "last active", "profile", "forked from")
    rows = [
        ("a" * 36, "A long title " * 4, "/home/me/" + "deep/" * 8, "just now", "work", ""),
        ("b" * 36, "Fork", "/x", "2 h ago", "offline", "A long title " * 3 + "#12"),
    ]
    for width in (100, 140, 400):
        lines = [line.plain for line in session_table(head, rows, width, shrink=(5,))]
        assert all(len(line) <= width for line in lines), (width, lines)
        profile, fork = lines[0].index("profile"), lines[0].index("forked from")
        assert lines[1][profile:] == "work"  # its empty fork cell: nothing after
        assert lines[2][profile:].startswith("offline  ")
        assert lines[2][fork:].startswith("A long")
    wide = [line.plain for line in session_table(head, rows, 400, shrink=(5,))]
    assert wide[2].endswith("A long title A long title A long title #12")
    narrow = [line.plain for line in session_table(head, rows, 100, shrink=(5,))]
    assert narrow[2].endswith("…") and "b" * 36 in narrow[2]


async def _seed_forks_by_hand(where: str) -> None:
    """A fork whose parent is not there (deleted, or never was), and a malformed one."""
    async with await open_store(where) as store:
        await store.create_session("orphan", cwd=None)
        await store.append("orphan", SESSION_FORK, {"parent": {"id": "gone\x1b[2J", "seq": 7}})
        await store.create_session("malformed", cwd=None)
        await store.append("malformed", SESSION_FORK, {"parent": {"id": "x", "seq": True}})


def test_a_fork_whose_parent_is_gone_names_its_id(run: Run, where: str) -> None:
    asyncio.run(_seed_forks_by_hand(where))
    rows = sessions(run)
    assert rows["orphan"]["parent"] == {"id": "gone\x1b[2J", "seq": 7}
    assert rows["malformed"]["parent"] is None  # no parent is claimed
    listed = run("sessions").out
    assert_terminal_safe(listed, "sessions")
    column = listed.splitlines()[0].split("\t").index("forked from")
    cells = {row.split("\t")[0]: row.split("\t") for row in listed.splitlines()[1:]}
    assert cells["orphan"][column] == "gone\\x1b[2J #7"
    assert cells["malformed"][column] == ""
    shown = run("show", "orphan").out
    assert "▸ forked from gone\\x1b[2J at seq 7 · " in shown
    assert_terminal_safe(shown, "show")
    shown = run("show", "malformed").out
    assert "▸ session/fork event" in shown  # as any unknown event, its data previewed

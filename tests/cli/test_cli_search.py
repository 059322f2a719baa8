"""``dsh search`` and the body matches of ``dsh candidates`` (issue 18)."""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

import pytest

from stores import sqlite as sqlite_store
from tests.cli.conftest import Run
from tui.shared.cells import cell_len

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def new(dsh: Run, *args: str) -> str:
    result = dsh("new", *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_search_prints_hits_best_first(dsh: Run) -> None:
    a = new(dsh)
    b = new(dsh)
    assert dsh("send", a, "we settled the retry policy: three tries").code == 0
    assert dsh("send", b, "retry retry").code == 0
    dsh("rename", b, "Retries")
    hits = dsh("search", "RETRY", "--json").json()
    assert all(set(h) == {"session_id", "title", "seq", "snippet"} for h in hits)
    assert hits[0] == {"session_id": b, "title": "Retries", "seq": 0, "snippet": "retry retry"}
    assert {(h["session_id"], h["seq"]) for h in hits[1:]} >= {(a, 0)}
    assert next(h["title"] for h in hits if h["session_id"] == a) == (
        "we settled the retry policy: three tries"
    )
    assert len(dsh("search", "retry", "--json", "--limit", "1").json()) == 1
    table = dsh("search", "retry policy")
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split() == ["session", "id", "#", "message"]
    assert "we settled the retry policy: three tries" in lines[1]
    assert dsh("search", "unicorn", "--json").json() == []
    assert dsh("search", "unicorn").out == "No message contains: unicorn\n"


def test_search_refuses_a_bad_limit_in_one_line(dsh: Run) -> None:
    result = dsh("search", "x", "--limit", "0")
    assert result.code != 0
    assert result.err == "dsh: error: --limit must be a positive number, not 0\n"


def test_candidates_list_body_matches_after_the_others(dsh: Run) -> None:
    a = new(dsh, "--cwd", "/p")
    b = new(dsh, "--cwd", "/p")
    c = new(dsh, "--cwd", "/p")
    dsh("rename", b, "Retry notes")
    assert dsh("send", c, "the retry policy is settled").code == 0
    dsh("rename", c, "Gamma")  # not the fallback title, which quotes the message
    rows = dsh("candidates", a, "retry", "--json").json()
    assert [r["id"] for r in rows] == [b, c]
    assert rows[0]["match"] is None
    assert rows[1]["match"] == {"seq": 0, "snippet": "the retry policy is settled"}
    lines = dsh("candidates", a, "retry").out.splitlines()
    assert lines[1].endswith("\t#0 the retry policy is settled")
    assert "\t#" not in lines[0]


def test_undecodable_bytes_in_a_query_are_no_traceback(dsh: Run) -> None:
    # `dsh search $'\xff'`: Python hands argv's undecodable bytes over as lone surrogates,
    # which no store could bind (a traceback before; candidates' said "could not read").
    a = new(dsh)
    assert dsh("send", a, "caf\udcff au lait").code == 0
    for args in (("search", "\udcff"), ("search", "ab\udcffc", "--json")):
        result = dsh(*args)
        assert result.code == 0 and result.err == ""
    assert dsh("search", "ab\udcffc", "--json").json() == []
    hits = dsh("search", "caf\udcff", "--json").json()
    assert {h["session_id"] for h in hits} == {a}  # the message and the offline echo
    assert {"seq": 0, "snippet": "caf\ufffd au lait"} in [
        {"seq": h["seq"], "snippet": h["snippet"]} for h in hits
    ]
    rows = dsh("candidates", new(dsh), "caf\udcff", "--json")
    assert rows.code == 0 and [r["id"] for r in rows.json()] == [a]


def test_on_a_narrow_terminal_the_seq_id_and_match_stay_in_view(
    dsh: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Below ~130 columns Rich squeezed the "#" column to nothing (and at 80 the id to "…")
    # and cropped the snippet, the matched word with it.
    a = new(dsh)
    dsh("rename", a, "A rather long title for a session about retries")
    filler = "lorem ipsum dolor sit amet " * 3
    assert dsh("send", a, f"{filler}we settled the retry policy: three tries").code == 0
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    for columns in (60, 80, 100, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        result = dsh("search", "policy")
        assert result.code == 0
        lines = [ANSI.sub("", line) for line in result.out.splitlines()]
        assert lines[0].split() == ["session", "id", "#", "message"], (columns, lines)
        row = next(line for line in lines[1:] if a[:8] in line)
        assert cell_len(row) <= columns
        seq = re.search(r"… +(\d+)  ", row)
        assert a[:13] in row and seq and seq[1] in ("0", "1") and "policy" in row, (columns, row)


def test_search_on_a_read_only_database_says_what_is_not_indexed_yet(
    dsh: Run, dsh_env: Path
) -> None:
    # An upgrade's backlog on a read-only file: search silently missed those sessions.
    a = new(dsh)
    assert dsh("send", a, "the retry policy").code == 0
    with sqlite3.connect(dsh_env) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        # As a file from before the index looks: messages whole in their rows.
        for (key,) in conn.execute("SELECT key FROM sessions").fetchall():
            seqs = [
                seq for (seq,) in conn.execute("SELECT seq FROM events WHERE session = ?", (key,))
            ]
            sqlite_store._unlink_messages(conn, key, seqs)
        conn.execute("DELETE FROM search_messages")
        conn.execute("INSERT INTO search_pending (session) SELECT key FROM sessions")
    dsh_env.chmod(0o444)
    note = (
        "dsh: note: 1 session is not indexed yet (the database is read-only); it is "
        "indexed the next time dsh opens it for writing\n"
    )
    for args in (("retry",), ("retry", "--json")):
        result = dsh("search", *args)
        assert result.code == 0
        assert result.err == note
    assert dsh("search", "retry", "--json").json() == []
    dsh_env.chmod(0o644)
    result = dsh("search", "retry", "--json")
    assert result.err == ""
    assert {h["session_id"] for h in result.json()} == {a}

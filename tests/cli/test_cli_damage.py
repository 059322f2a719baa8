"""``dsh sessions`` and the rows a listing could not read (issue 30): one ``dsh:`` line on
stderr per damaged row, escaped, after a listing that stays whole and parseable."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from core.damage import DamagedRow
from stores.sqlite import SqliteSessionStore
from stores.sqlite.listing import _ListingMixin
from tests.cli.conftest import Run

BAD = "bad\x1b]0;pwned\x07"


def _damage_a_title(db: Path, sid: str) -> None:
    with sqlite3.connect(db) as raw:  # a row written by hand
        changed = raw.execute(
            "UPDATE events SET data = '{\"title\":[1]}' WHERE kind = 2 AND session = "
            "(SELECT key FROM sessions WHERE id = ?)",
            (sid.encode(),),
        ).rowcount
        assert changed == 1
    raw.close()


def test_sessions_lists_a_session_with_a_damaged_title_and_says_so(dsh: Run, dsh_env: Path) -> None:
    fine = dsh("new").out.strip()
    assert dsh("rename", fine, "Fine").code == 0
    assert dsh("demo").code == 0  # more rows, so the listing is not one session

    async def make_bad() -> None:
        async with await SqliteSessionStore.open(dsh_env) as store:
            await store.create_session(BAD, created_at=1)
            await store.append(BAD, "session/title", {"title": "was fine"})

    asyncio.run(make_bad())
    _damage_a_title(dsh_env, BAD)
    line = (
        "dsh: the title of session bad\\x1b]0;pwned\\x07 is damaged and not shown "
        "(its title is not text)\n"
    )
    listed = dsh("sessions", "--json")
    assert listed.code == 0 and listed.err == line
    rows = {row["id"]: row["title"] for row in listed.json()}
    assert rows[BAD] is None and rows[fine] == "Fine"
    table = dsh("sessions")
    assert table.code == 0 and table.err == line
    assert "bad\\x1b]0;pwned\\x07" in table.out and "\x1b" not in table.out


def test_sessions_tells_of_a_damaged_session(dsh: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session the store could not list (PostgreSQL's rows of another member): a line
    each, with its owner, escaped."""
    assert dsh("new").code == 0
    rows = (
        DamagedRow("session", "its cwd is not valid UTF-8", "mallory\x1b[2J", "s\u202e1"),
        DamagedRow("session", "its id is over 1,024 bytes", "mallory", None),
    )
    # Both readers of the listing: the store, and the one-shot read of ``tui.cli.quick``.
    monkeypatch.setattr(_ListingMixin, "damaged_rows", lambda self: rows)
    for args in (("sessions",), ("sessions", "--json")):
        listed = dsh(*args)
        assert listed.code == 0
        assert listed.err.splitlines() == [
            "dsh: a session s\\u202e1 owned by mallory\\x1b[2J is damaged and not listed "
            "(its cwd is not valid UTF-8)",
            "dsh: a session owned by mallory is damaged and not listed "
            "(its id is over 1,024 bytes)",
        ]
    assert len(dsh("sessions", "--json").json()) == 1

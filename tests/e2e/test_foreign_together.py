"""Issue 33, point 3: after ``dsh import --from claude-code`` (the tool's own folder, found
through ``$CLAUDE_CONFIG_DIR``), the Claude Code session is found by ``dsh search``, read by
another agent through ``dsh mcp``, and ``@``-mentioned in the app — each time without its
tools, reasoning or subagents. The readers and the importer are the real ones; the
transcript is the repository's own fixture."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from core.config import DshConfig
from core.log import SESSION_SOURCE, USER_MESSAGE
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.mcp.harness import json_text, open_mcp, text_of
from tests.mcp.test_mcp_stdio import cli_snapshot
from tests.ui.conftest import SIZE, make_app
from tests.ui.test_app import send_idle, settle, wait_for
from tui.cli.commands import main
from tui.shared.runtime import open_runtime

FIXTURE = Path(__file__).resolve().parents[1] / "importers" / "claude_code" / "projects"
SID = "5b0c2f3e-1d4a-4c7e-9f10-aa11bb22cc33"
TITLE = "Adding a calculator CLI"
SAID = ["Add an `add` command to calc.py", "Only div is left."]
NEVER = [
    "python calc.py add 1 2",  # a tool call's arguments
    "unknown command",  # a tool's output
    "def main()",  # a tool's output
    "The user wants an add command.",  # reasoning
    "Subagent answer",  # a sidechain
    "Total cost",  # a command's injected output
]


def dsh(db: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--db", str(db), *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture's Claude Code folder imported into a new database, as a user would."""
    claude = tmp_path / "claude"
    shutil.copytree(FIXTURE, claude / "projects")
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("COLUMNS", "120")
    db = tmp_path / "dsh.sqlite3"
    code, out, err = dsh(db, "import", "--from", "claude-code")
    assert code == 0, (out, err)
    assert f"→ {SID}" in out
    again = dsh(db, "import", "--from", "claude-code")
    assert again[0] == 0 and "1 unchanged" in again[1], again  # nothing duplicated
    return db


def test_the_imported_session_is_listed_and_found_by_search(imported: Path) -> None:
    code, out, err = dsh(imported, "sessions", "--json")
    assert code == 0, err
    (row,) = [s for s in json.loads(out) if s["id"] == SID]
    assert row["title"] == TITLE and row["cwd"] == "/home/ada/calc"
    code, out, err = dsh(imported, "search", "only div", "--json")
    assert code == 0, err
    assert [hit["session_id"] for hit in json.loads(out)] == [SID]
    code, out, err = dsh(imported, "search", "unknown command", "--json")
    assert code == 0 and json.loads(out) == [], out  # a tool's output is not a message


async def test_another_agent_reads_it_through_dsh_mcp(imported: Path, tmp_path: Path) -> None:
    async with open_mcp(tmp_path, imported) as mcp:
        rows = json_text(await mcp.ok("list_sessions", {"query": "calculator"}))
        assert [(r["id"], r["source_tool"]) for r in rows] == [(SID, "claude-code")]
        snapshot = text_of(await mcp.ok("read_session", {"session_id": SID}))
    for text in SAID:
        assert text in snapshot
    for text in NEVER:
        assert text not in snapshot, text
    assert cli_snapshot(tmp_path, imported, SID, TITLE) == snapshot  # what prepare injects


async def test_it_is_mentioned_in_the_app_without_its_tools(imported: Path) -> None:
    store = await SqliteSessionStore.open(imported)
    try:
        await _mention_in_the_app(store, imported)
    finally:
        await store.close()  # open_runtime leaves a store it was given open


async def _mention_in_the_app(store: SqliteSessionStore, imported: Path) -> None:
    config = DshConfig(database=imported)
    async with open_runtime(config, store=store, provider=OfflineProvider()) as runtime:
        app = make_app(runtime)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: app.chat is not None and app.chat.session_id != SID)
            app.composer.focus()
            await pilot.press("@", *"calculator")
            picker = app.composer.picker
            await wait_for(pilot, lambda: len(picker.row_texts) == 1)
            assert [c.session_id for c in picker.candidates] == [SID]
            await pilot.press("enter")
            await wait_for(pilot, lambda: f"@[{TITLE}](dsh-session:" in app.composer.draft)
            await pilot.press(*" what is left?", "enter")
            await send_idle(app, pilot)
            assert app.chat is not None
            events = await store.read_events(app.chat.session_id)
    injected = [e for e in events if e.type == USER_MESSAGE and e.data["source"]["kind"] != "user"]
    (snapshot,) = [e.data["content"][0]["text"] for e in injected]
    for text in SAID:
        assert text in snapshot
    for text in NEVER:
        assert text not in snapshot, text
    assert all(e.type != SESSION_SOURCE for e in events)  # the reference copies nothing else

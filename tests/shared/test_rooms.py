"""The rooms of ``tui`` keep to their libraries: only ``tui/app`` loads Textual, and the ACP
agent loads neither Textual nor Rich — checked on the real processes, by Python's own record
of every module they import (``PYTHONPROFILEIMPORTTIME``), while they do real work."""

from __future__ import annotations

import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from acp import text_block

import tui
from core.references import encode_session_reference_uri
from tests.acp.harness import open_agent
from tests.acp.seed import converse, seed_session

pytestmark = pytest.mark.timeout(120)

_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|(\s*)(\S+)\s*$", re.M)


def imported_packages(stderr: str) -> set[str]:
    """The top-level packages named in ``-X importtime`` lines of ``stderr``."""
    found = {m.group(2).split(".")[0] for m in _IMPORT_LINE.finditer(stderr)}
    assert "tui" in found, "the import record is missing (PYTHONPROFILEIMPORTTIME ignored?)"
    return found


def run_dsh(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "DSH_OFFLINE_DELAY": "0"}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def room_modules(room: str) -> list[str]:
    path = Path(tui.__file__).parent / room
    return [f"tui.{room}"] + [
        f"tui.{room}.{m.name}" for m in pkgutil.walk_packages([str(path)]) if m.name != "__main__"
    ]


@pytest.mark.parametrize("room", ["cli", "acp", "mcp", "shared"])
def test_importing_a_room_other_than_the_app_loads_no_textual(room: str) -> None:
    modules = room_modules(room)
    assert len(modules) > 2
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert "textual" not in loaded
    if room == "acp":
        assert "rich" not in loaded


def test_the_cli_at_work_loads_no_textual(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    new = run_dsh(db, "new", "--cwd", "/proj")
    assert new.returncode == 0, new.stderr
    session = new.stdout.strip().splitlines()[-1]
    for args in (
        ("send", session, "hello there"),
        ("sessions",),
        ("show", session),
        ("export", session),
        ("candidates", session, ""),
    ):
        result = run_dsh(db, *args)
        assert result.returncode == 0, (args, result.stderr[-2000:])
        loaded = imported_packages(result.stderr)
        assert "textual" not in loaded, args


async def test_the_acp_agent_at_work_loads_neither_textual_nor_rich(tmp_path: Path) -> None:
    db = tmp_path / "dsh.sqlite3"
    source = await seed_session(db, cwd="/proj")
    await converse(db, source, ["how do we cache the index?"])
    async with open_agent(tmp_path, db, env={"PYTHONPROFILEIMPORTTIME": "1"}) as agent:
        new = await agent.conn.new_session(cwd="/proj", mcp_servers=[])
        mention = f"[@notes]({encode_session_reference_uri(source)})"
        response = await agent.conn.prompt(
            session_id=new.session_id, prompt=[text_block(f"see {mention} please")]
        )
        assert response.stop_reason == "end_turn"
        await agent.conn.load_session(cwd="/proj", session_id=source, mcp_servers=[])
        await agent.conn.list_sessions()
        stderr = agent.stderr()
    loaded = imported_packages(stderr)
    assert "acp" in loaded
    assert "textual" not in loaded
    assert "rich" not in loaded

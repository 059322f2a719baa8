"""SPEC §4.1 (issue 31) from the command line: a JSON file an ASCII-safe writer made
(Python's ``json.dumps``: 🚀 as ``\\ud83d\\ude80``) imports with its characters whole, on
SQLite and PostgreSQL: its session is named as a user types it, ``dsh search 🚀`` finds
its message, ``dsh show`` prints the character; a pair given on the command line is the
character too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.storekinds import pg_schema_url

ID = "mig-hé🚀"


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, dsh_env: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(dsh_env)
        return
    with pg_schema_url(request.getfixturevalue("pg_cluster")) as url:
        yield url


def _python_export(path: Path) -> None:
    """A dsh JSONL log as Python's json.dumps writes it (every non-ASCII escaped)."""
    header = {"type": "session", "id": ID, "created_at": 1_000, "cwd": "/w/🚀"}
    message = {
        "id": "m1",
        "role": "user",
        "content": [{"type": "text", "text": "launch 🚀 now, lone \ud800 stays"}],
        "source": {"kind": "user"},
    }
    event = {"seq": 0, "type": "user/message", "time": 1_001, "data": message,
             "surface_op": "append", "source_event_seqs": None}  # fmt: skip
    title = {"seq": 1, "type": "session/title", "time": 1_002, "surface_op": None,
             "data": {"title": "Launch 🚀", "source": {"kind": "user"}},
             "source_event_seqs": None}  # fmt: skip
    lines = [json.dumps(header), json.dumps(event), json.dumps(title)]
    assert "\\ud83d\\ude80" in lines[0] and "🚀" not in "".join(lines)
    path.write_text("\n".join(lines) + "\n", encoding="ascii")


def test_a_json_dumps_file_imports_with_its_characters_whole(
    dsh: Run, tmp_path: Path, where: str
) -> None:
    path = tmp_path / "python.jsonl"
    _python_export(path)
    imported = dsh("--db", where, "import", str(path), db=None)
    assert imported.code == 0, imported.err
    assert imported.out.strip() == ID
    shown = dsh("--db", where, "show", ID, db=None)
    assert shown.code == 0, shown.err
    assert "launch 🚀 now" in shown.out and "\\ud83d" not in shown.out
    # Named by the pair as JSON or Python spells it, too.
    assert dsh("--db", where, "show", "mig-hé\ud83d\ude80", db=None).out == shown.out
    # By title.
    assert dsh("--db", where, "show", "Launch 🚀", db=None).out == shown.out
    hits = dsh("--db", where, "search", "🚀", "--json", db=None).json()
    assert [(h["session_id"], h["seq"], h["title"]) for h in hits] == [(ID, 0, "Launch 🚀")]
    assert "launch 🚀 now" in hits[0]["snippet"]
    exported = dsh("--db", where, "export", ID, "--format", "json", db=None)
    assert exported.code == 0, exported.err
    first = json.loads(exported.out.splitlines()[0])
    assert first["id"] == ID and "\\ud83d" not in exported.out
    assert "\\ud800" in exported.out  # a lone one stays escaped

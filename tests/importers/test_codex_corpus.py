"""The Codex reader over the real rollouts of ``../shared/corpora/foreign_logs/codex/``
(third-party files, read in place, never copied here; skipped without ``../shared``):
each is recognised, reads or is refused with its file and line, stores, replays as
``dsh show`` does, and a reference to it shows its conversation and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.importers import codex
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from stores import SessionQuery, SqliteSessionStore
from tests.importers.codex_helpers import referenced_conversation, spoken, store_session
from tui.cli.output import print_transcript
from tui.shared.items import classify_surface
from tui.shared.render import render_item

CORPUS = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "foreign_logs" / "codex"
)
FILES = sorted(CORPUS.glob("*.jsonl")) if CORPUS.is_dir() else []
NAMES = [p.name for p in FILES]

pytestmark = pytest.mark.skipif(not FILES, reason="../shared/corpora/foreign_logs/codex is absent")

REFUSED = {
    # a log viewer's fixture that ends on a line of prose
    "crispierry~codex-log-viewer~fixtures~codex~sample-session.jsonl": (
        10,
        "invalid JSON",
    ),
    # another tool's idea of a Codex log: no envelope, no session meta
    "jazzyalex~agent-sessions~Resources~Fixtures~stage0~agents~codex~schema_drift.jsonl": (
        1,
        "not a Codex rollout",
    ),
}
NOT_SNIFFED = {
    "jazzyalex~agent-sessions~Resources~Fixtures~stage0~agents~codex~schema_drift.jsonl",
    # a trimmed file that starts at a turn_context and is not named rollout-*
    "ryoppippi~ccusage~apps~ccusage~test~fixtures~codex~sessions~project-alpha~session-alpha.jsonl",
}


def test_the_corpus_figures() -> None:
    """What the corpus holds, read: a change here means the corpus or the reader changed."""
    sessions = [r for r in codex.read_sessions(FILES) if isinstance(r, ForeignSession)]
    assert len(FILES) == 15 and len(sessions) == 13
    assert sum(len(s.events) for s in sessions) == 991  # one per non-blank line
    assert sum(1 for s in sessions for e in s.events if e.surface_op is not None) == 216
    kinds = {e.type for s in sessions for e in s.events}
    assert {
        "codex/event_msg",
        "codex/compacted",
        "codex/world_state",
        "codex/future_top_level",
    } <= kinds
    assert sum(len(spoken(s)) for s in sessions) == 24


@pytest.mark.parametrize("name", NAMES)
def test_recognised(name: str) -> None:
    path = CORPUS / name
    assert codex.sniff(path, path.read_bytes()[:SNIFF_BYTES]) == (name not in NOT_SNIFFED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_its_file_and_line(name: str) -> None:
    [error] = list(codex.read_sessions([CORPUS / name]))
    assert isinstance(error, ForeignImportError)
    line, words = REFUSED[name]
    assert error.file == os.fspath(CORPUS / name)
    assert error.line == line and words in str(error)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in REFUSED])
async def test_imported_replayed_and_referenced(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = codex.read_file(CORPUS / name)
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        header = await store_session(store, session)
        stored = await store.read_events(header.id)
        assert [(e.type, e.data, e.time) for e in stored[1:]] == [
            (e.type, e.data, e.time) for e in session.events
        ]
        query = SessionQuery(store)
        snapshot = await query.read_surface(header.id)
        print_transcript(header, session.title, snapshot.events, expand=True)
        capsys.readouterr()
        items = classify_surface(snapshot.events)
        assert len(items) == len(snapshot.events)
        for shown in items:
            render_item(shown, expand_cards=False, wrap=False)
        conversation = await referenced_conversation(store, header.id)
    assert conversation == spoken(session)
    # reasoning, tool calls and their output, and injected context never reach a reference
    hidden: list[str] = []
    for event in session.events:
        if event.type == "assistant/message":
            for block in event.data["message"]["content"]:
                if block["type"] == "reasoning":
                    hidden.append(block["text"])
                elif block["type"] == "tool-call":
                    hidden.append(block["arguments"])
        elif event.type == "tool/result":
            hidden.append(event.data["message"]["content"][0]["content"][0]["text"])
        elif event.type == "user/message" and event.data["source"]["kind"] == "plugin":
            hidden.extend(b["text"] for b in event.data["content"])
    said = {text for _, text in conversation}
    for text in hidden:
        if len(text) > 20 and text not in said:
            assert all(text not in s for s in said), text[:80]

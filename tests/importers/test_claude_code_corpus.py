"""Every real Claude Code transcript of ``../shared/corpora/foreign_logs/claude_code/``
(files of public repositories, never copied here): each session imports into a SQLite
store, replays as ``dsh show`` prints it, and a reference to it carries the person's and
the model's words only, never a tool, reasoning or injected text. Skipped without
``../shared``."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from core.importers import claude_code
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from tests.importers.claude_code_helpers import (
    never_referenced,
    person_and_model_texts,
    read_all,
    snapshot_text,
    store_and_check,
)

CORPUS = Path(__file__).resolve().parents[2].parent / "shared/corpora/foreign_logs/claude_code"
FILES = sorted(CORPUS.glob("*.jsonl")) if CORPUS.is_dir() else []

SESSIONS = 45

pytestmark = pytest.mark.skipif(not FILES, reason="../shared/corpora is not here")

EDGE = "handgemacht-ai~claude-code-log~test~test_data~edge_cases.jsonl"
TRUNCATED = "kenn-io~agentsview~internal~parser~testdata~claude~truncated.jsonl"
REJECTED = {
    # a viewer's test file of deliberately broken lines ("message": "error", bare values),
    # holding two sessions: a line of the wrong types spoils its own, a line that is not
    # an object both
    (EDGE, "edge_cases"): (10, "message content must be a string or a list"),
    (EDGE, "todowrite_session"): (13, "expected a JSON object"),
    # a parser's test file whose last record is torn inside a string
    (TRUNCATED, TRUNCATED.removesuffix(".jsonl")): (3, "invalid JSON"),
}


@cache
def _sessions() -> tuple[list[ForeignSession], list[ForeignImportError]]:
    return read_all(FILES)


def test_the_corpus_figures() -> None:
    """A change here means the corpus or the reader changed."""
    sessions, errors = _sessions()
    assert sorted((Path(e.file).name, e.original_id) for e in errors) == sorted(REJECTED)
    for error in errors:
        line, words = REJECTED[Path(error.file).name, error.original_id]  # type: ignore[index]
        assert error.line == line and words in str(error)
    surface = Counter(e.type for s in sessions for e in s.events if e.surface_op is not None)
    log_only = Counter(e.type for s in sessions for e in s.events if e.surface_op is None)
    print(len(sessions), dict(surface), dict(log_only))
    assert len(sessions) == SESSIONS
    assert surface["assistant/message"] > 400 and surface["tool/result"] > 500
    assert {"claude-code/progress", "claude-code/summary", "claude-code/system"} <= set(log_only)
    # several lines of one reply are one message
    replies = sum(1 for s in sessions for e in s.events if e.type == "assistant/message")
    assert replies < sum(
        1
        for p in FILES
        for line in p.read_text(errors="replace").splitlines()
        if '"assistant"' in line
    )


def test_every_corpus_file_is_sniffed() -> None:
    for path in FILES:
        head = path.read_bytes()[:SNIFF_BYTES]
        if path.stat().st_size == 0 or path.name.endswith("edge_cases.jsonl"):
            continue
        assert claude_code.sniff(path, head), path.name


def test_subagent_files_join_their_parent_session() -> None:
    sessions, _ = _sessions()
    by_id = {s.provenance.original_id: s for s in sessions}
    spotter = by_id["4d5611e5-241a-462a-8d15-5122611a9569"]
    assert len(spotter.files) == 3 and spotter.files[0].endswith("9569.jsonl")
    assert Path(spotter.provenance.file).name.endswith("5122611a9569.jsonl")


@pytest.mark.parametrize("index", range(SESSIONS))
async def test_a_corpus_session_imports_replays_and_is_referenced(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _sessions()[0][index]
    source = await store_and_check(session, tmp_path / "dsh.sqlite3")
    assert session.provenance.original_id in capsys.readouterr().out
    conversation = [(i["role"], i["text"]) for i in source["conversation"]]
    expected = person_and_model_texts(session)
    if not source.get("truncated"):
        assert conversation == expected
    text = snapshot_text(source)
    for hidden in never_referenced(session):
        if not any(hidden in said for _, said in expected):  # unless also said by someone
            assert hidden not in text

"""Optional: ``dsh import`` over the real files of ``../shared/corpora/foreign_logs`` (other
tools' sessions from public repositories), with the real readers, twice: the second run
finds every session it stored the first time unchanged (the readers give the same events
for the same file, so re-import is a no-op) and reports the same failures and conflicts.
Skipped without ``../shared`` or without the readers."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.cli.conftest import Run

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpora" / "foreign_logs"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="no ../shared/corpora/foreign_logs")


def statuses(out: str) -> collections.Counter[str]:
    return collections.Counter(line.split(":", 1)[0].split(" (")[0] for line in out.splitlines())


@pytest.mark.parametrize(
    ("tool", "folder"), [("claude-code", "claude_code"), ("codex", "codex"), ("chatgpt", "chatgpt")]
)
def test_the_real_files_import_and_import_again_as_unchanged(
    dsh: Run, tool: str, folder: str
) -> None:
    pytest.importorskip(f"core.importers.{folder}")
    first = dsh("import", str(CORPUS / folder), "--from", tool)
    assert "Traceback" not in first.err
    before = statuses(first.out)
    assert before["imported"] > 0, first.out
    again = dsh("import", str(CORPUS / folder), "--from", tool)
    after = statuses(again.out)
    assert after["imported"] == after["updated"] == 0, again.out
    assert after["unchanged"] == before["imported"] + before["unchanged"]
    assert (after["failed"], after["conflict"]) == (before["failed"], before["conflict"])
    assert "\x1b" not in first.out + again.out

"""Imported reference sessions in the app's transcript (Textual Pilot): every surface item
mounts (a long one windowed), pre-identity replies show their text, a compaction shows its
checkpoint card."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.importers.reference import parse_reference
from stores import SessionQuery, SqliteSessionStore
from tests.ui.transcript_harness import TranscriptApp, settle, shown_text

CORPUS = Path(__file__).parent / "reference_logs"
SIZE = (100, 40)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("apps/web/tests/snapshots/code-mode-round/session.jsonl", "DONE"),
        ("examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl", "Compacted"),
        ("apps/web/tests/snapshots/goal-multi-turn-actions/session.jsonl", "随时告诉我"),
    ],
)
async def test_an_imported_reference_session_replays_in_the_transcript(
    name: str, shown: str, tmp_path: Path
) -> None:
    log = parse_reference((CORPUS / name).read_bytes())
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await store.import_session(log.header, log.events)
        snapshot = await SessionQuery(store).read_surface(log.header.id)
    app = TranscriptApp(snapshot.events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        shown_items = len(transcript.item_widgets) + transcript.hidden_count  # windowed
        assert shown_items == len(snapshot.events) > 0
        assert shown in shown_text(transcript)

"""Every session log of the reference implementation's own test fixtures and snapshots
(copied into reference_logs/ with its MIT notice): each imports or is rejected with a reason
a user can act on, replays through ``dsh show`` and ``classify_surface``, can be mentioned
and prepared within budget, and round-trips back to the reference's format."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from core.importers.reference import (
    REFERENCE_HEADER_EVENT,
    ReferenceLog,
    parse_reference,
    reference_lines,
    upgrade_pre_identity_message,
)
from core.log import Event
from core.logfile import LogImportError
from core.references import SessionReferenceInput, SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.cli.conftest import Run, dsh, dsh_env
from tui.cli.output import print_transcript
from tui.shared.items import classify_surface
from tui.shared.render import plain_lines, render_item

__all__ = ["dsh", "dsh_env"]  # the CLI fixtures

CREATED = 1_785_000_000_000
CORPUS = Path(__file__).parent / "reference_logs"
LOGS = sorted(CORPUS.rglob("*.jsonl"))
NAMES = [str(p.relative_to(CORPUS)) for p in LOGS]

REJECTED = {
    # A hand-spliced snapshot: its assistant/message (seq 11) lists itself among the events
    # it was built from. dsh refuses a log that contradicts itself and says how to fix it.
    "apps/web/tests/snapshots/cordis-tool-round/session.jsonl": (
        "line 13: assistant/message at seq 11: source_event_seqs entry 11 is not lower than "
        "the event's seq 11; the log contradicts itself: fix or remove this record"
    ),
}


def _parse(path: Path) -> ReferenceLog:
    return parse_reference(path.read_bytes())


def _without_placement(line: str) -> dict[str, Any]:
    """A record as the reference's snapshot normaliser writes it (no seq, time, seq0, time0)."""
    record: dict[str, Any] = json.loads(line)
    for key in ("seq", "time", "seq0", "time0"):
        record.pop(key, None)
    return record


def _upgraded(session_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The file's records with pre-identity messages upgraded, as the reference loads them."""
    out, seq, ids = records[:1], 0, {}
    for record in records[1:]:
        if record["type"].endswith("-chunks"):
            seq += len(record["data"].get("texts", record["data"].get("args", [])))
            out.append(record)
            continue
        record = dict(upgrade_pre_identity_message(record, session_id, seq, ids))
        data = record["data"]
        message = data if record["type"] == "user/message" else data.get("message")
        if isinstance(message, dict) and isinstance(message.get("id"), str):
            ids[seq] = message["id"]
        out.append(record)
        seq += 1
    return out


def test_the_corpus_figures() -> None:
    """169 logs, 5112 records of which 262 packed rows, 15375 events once unpacked; one log
    rejected (see REJECTED). A change here means the corpus or the reader changed."""
    logs, rejected = [], []
    for path in LOGS:
        try:
            logs.append(_parse(path))
        except LogImportError:
            rejected.append(str(path.relative_to(CORPUS)))
    assert len(LOGS) == 169 and sorted(rejected) == sorted(REJECTED)
    assert sum(log.rows for log in logs) == 5112
    assert sum(log.packed_rows for log in logs) == 262
    assert sum(len(log.events) - 1 for log in logs) == 15375
    kinds = {e.type for log in logs for e in log.events}
    assert {"step/start", "tool/call", "agent/inbox/spliced", "request/header"} <= kinds
    assert (CORPUS / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_a_rejected_log_says_why_and_where(name: str) -> None:
    with pytest.raises(LogImportError) as caught:
        _parse(CORPUS / name)
    assert str(caught.value) == REJECTED[name]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in REJECTED])
async def test_a_corpus_log_imports_replays_is_referenced_and_round_trips(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = CORPUS / name
    log = _parse(path)
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await store.import_session(log.header, log.events)
        stored = await store.read_events(log.header.id)
        assert [(e.type, e.data) for e in stored] == [(e.type, e.data) for e in log.events]
        query = SessionQuery(store)

        # replays: every surface item classifies and renders, unknown kinds included
        snapshot = await query.read_surface(log.header.id)
        title = await query.read_title(log.header.id)
        print_transcript(log.header, title.title if title else None, snapshot.events, expand=True)
        assert log.header.id in capsys.readouterr().out  # what `dsh show` prints
        items = classify_surface(snapshot.events)
        assert len(items) == len(snapshot.events)
        for item in items:
            render_item(item, expand_cards=False, wrap=False)  # raises on anything it cannot draw

        # @-mentionable from another session, and prepared within the default budget
        target = await store.create_session(cwd=log.header.cwd)
        service = SessionReferenceService(query)
        candidates = await service.list_candidates(target)
        assert [c.session_id for c in candidates] == [log.header.id]
        ref = SessionReferenceInput(log.header.id)
        prepared = await service.prepare(target, "what happened there?", [ref])
        assert prepared.additional_context is not None
        source = prepared.additional_context["source"]["references"][0]
        assert source["capturedThroughSeq"] == len(stored) - 1

        # round-trips: back to the reference's format, the same logical log...
        lines = list(reference_lines(log.header, stored))
        again = parse_reference("".join(x + "\n" for x in lines).encode())
        assert again.header == log.header
        assert [
            (e.type, e.time, e.data, e.surface_op, e.source_event_seqs) for e in again.events
        ] == [(e.type, e.time, e.data, e.surface_op, e.source_event_seqs) for e in stored]
        # ...and, once seq and time are dropped as the reference's snapshots drop them, the
        # very records of the file, packed rows included
        original = path.read_text(encoding="utf-8").splitlines()
        expected = _upgraded(log.header.id, [json.loads(x) for x in original])
        assert [_without_placement(x) for x in lines] == expected
        assert stored[-1].type == REFERENCE_HEADER_EVENT


def test_dsh_show_replays_a_pre_identity_corpus_log(dsh: Run) -> None:
    name = "apps/web/tests/snapshots/code-mode-round/session.jsonl"
    assert dsh("import", str(CORPUS / name)).code == 0
    shown = dsh("show", "{{sessionId}}")
    assert shown.code == 0 and "Using ONE run_code program" in shown.out
    # a log written before messages had ids: its reply text, model and tool call show
    assert "DONE" in shown.out and "· deepseek-v4-flash" in shown.out
    assert "Tool result call_00_6VNoF1gDSerTBKoCfYSH3765" in shown.out


def test_an_unknown_surface_type_renders_as_a_generic_item_never_an_error() -> None:
    """Reference types dsh does not know are log-only (they carry no surfaceOp); should one
    reach the surface, it is one collapsed line naming its type, escaped."""
    hostile = {"x": "\x1b]52;c;AAAA\x07[bold]boom[/bold]\ud800"}
    event = Event(0, "agent/\x1b[2Jinbox", CREATED, hostile, "append")
    (item,) = classify_surface([event])
    assert item.kind == "unknown"
    console = Console(width=80, file=io.StringIO(), color_system=None)
    text = "\n".join(plain_lines(console, render_item(item, expand_cards=False, wrap=False), 80))
    assert "inbox event" in text and "\x1b" not in text


def test_dsh_import_of_the_whole_corpus_sums_it_up(dsh: Run) -> None:
    """Many snapshot logs share placeholder ids ({{sessionId}}): the first of each is
    imported, a byte-identical one is skipped, the others are reported, never overwritten."""
    result = dsh("import", str(CORPUS))
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[-1] == (
        "88 imported, 1 already present, 79 conflicting (not overwritten), 1 rejected, of 169 logs"
    )
    (name,) = REJECTED
    assert f"rejected: {name}: {REJECTED[name]}" in lines
    assert len(dsh("sessions", "--json").json()) == 88


async def test_a_compacted_reference_session_replays_its_checkpoint(tmp_path: Path) -> None:
    """The reference marks its compaction summary with the same checkpoint source as dsh
    ({"kind":"plugin","plugin":"compact"}) and shadows the compacted messages with a
    replace: the import shows a checkpoint card and a reference to it reports compacted."""
    log = _parse(
        CORPUS / "examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl"
    )
    async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
        await store.import_session(log.header, log.events)
        query = SessionQuery(store)
        snapshot = await query.read_surface(log.header.id)
        kinds = [item.kind for item in classify_surface(snapshot.events)]
        assert kinds.count("checkpoint") == 1 and kinds.index("checkpoint") < kinds.index(
            "assistant"
        )
        target = await store.create_session()
        ref = SessionReferenceInput(log.header.id)
        prepared = await SessionReferenceService(query).prepare(target, "and then?", [ref])
        assert prepared.additional_context is not None
        assert prepared.additional_context["source"]["references"][0]["compacted"] is True

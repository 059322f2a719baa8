"""What the Claude Code reader's tests share: reading a folder, storing a session as the
importer will (a ``session/source`` event at seq 0, then the reader's events) and checking
what dsh makes of it (the transcript, the @-mention candidates, the reference snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.importers import claude_code
from core.importers.foreign import ForeignImportError, ForeignSession, source_event
from core.log import Event, SessionHeader
from core.references import SessionReferenceInput, SessionReferenceService
from core.references.prompt import parse_reference_prompt
from stores import SessionQuery, SqliteSessionStore
from tui.cli.output import print_transcript
from tui.shared.items import classify_surface
from tui.shared.render import render_item

FIXTURES = Path(__file__).parent / "claude_code"


def read_all(
    paths: Sequence[Path],
) -> tuple[list[ForeignSession], list[ForeignImportError]]:
    sessions: list[ForeignSession] = []
    errors: list[ForeignImportError] = []
    for item in claude_code.read_sessions(paths):
        (errors if isinstance(item, ForeignImportError) else sessions).append(item)
    return sessions, errors


def header_of(session: ForeignSession) -> SessionHeader:
    return SessionHeader(session.provenance.original_id, session.created_at, session.cwd)


def surface_texts(session: ForeignSession) -> list[tuple[str, str]]:
    """``(type, text)`` of each surface event: a message's text blocks joined."""
    out = []
    for event in session.events:
        if event.surface_op is None:
            continue
        message: Any = event.data if event.type == "user/message" else event.data["message"]
        text = "\n".join(b["text"] for b in message["content"] if b["type"] == "text")
        out.append((event.type, text))
    return out


def person_and_model_texts(session: ForeignSession) -> list[tuple[str, str]]:
    """The person's (source ``user``) and the model's text, in order, empty ones skipped."""
    out = []
    for event in session.events:
        if event.type == "user/message" and event.data["source"]["kind"] == "user":
            role, message = "user", event.data
        elif event.type == "assistant/message":
            role, message = "assistant", event.data["message"]
        else:
            continue
        text = "\n".join(b["text"] for b in message["content"] if b["type"] == "text")
        if text:
            out.append((role, text))
    return out


async def store_and_check(session: ForeignSession, db: Path) -> dict[str, Any]:
    """The session imported into a new SQLite store; its transcript printed and drawn, and
    the snapshot a reference to it injects (``prepare``) returned."""
    header = header_of(session)
    events = [source_event(session.provenance, session.created_at), *session.events]
    async with await SqliteSessionStore.open(db) as store:
        await store.import_session(header, events)
        stored = await store.read_events(header.id)
        assert [(e.type, e.data, e.time) for e in stored[1:]] == [
            (e.type, e.data, e.time) for e in session.events
        ]
        query = SessionQuery(store)
        snapshot = await query.read_surface(header.id)
        print_transcript(header, session.title, snapshot.events, expand=True)
        items = classify_surface(snapshot.events)
        for item in items:
            render_item(item, expand_cards=False, wrap=False)
        target = await store.create_session(cwd=header.cwd)
        service = SessionReferenceService(query)
        candidates = await service.list_candidates(target)
        assert [c.session_id for c in candidates] == [header.id]
        prepared = await service.prepare(
            target, "what happened?", [SessionReferenceInput(header.id)]
        )
        assert prepared.additional_context is not None
        assert prepared.additional_context["source"]["references"][0]["sessionId"] == header.id
        parsed = parse_reference_prompt(prepared.additional_context["content"][0]["text"])
        assert parsed is not None
        source: dict[str, Any] = parsed[0]
        return source


def never_referenced(session: ForeignSession) -> list[str]:
    """Texts of the session that a reference must never carry: tool calls and results,
    reasoning, injected (plugin) messages and every log-only record."""
    texts: list[str] = []
    for event in session.events:
        if event.surface_op is None:
            continue
        message = event.data if event.type == "user/message" else event.data["message"]
        for block in message["content"]:
            if block["type"] == "reasoning":
                texts.append(block["text"])
            elif block["type"] == "tool-call":
                texts.append(block["arguments"])
            elif block["type"] == "tool-result":
                texts += [b["text"] for b in block["content"] if b.get("type") == "text"]
        if message["source"]["kind"] == "plugin":
            texts += [b["text"] for b in message["content"] if b["type"] == "text"]
    return [t for t in texts if len(t) >= 8]


def snapshot_text(source: dict[str, Any]) -> str:
    return "\n".join(item["text"] for item in source["conversation"])


def events_of(stored: Sequence[Event]) -> list[str]:
    return [e.type for e in stored]

"""What the Codex reader's tests share: storing a read session as the importer will
(a ``session/source`` event at seq 0, then the reader's events) and what a session
reference to it shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.importers.foreign import ForeignSession, source_event
from core.log import SessionHeader, message_text
from core.references import SessionReferenceInput, SessionReferenceService
from core.references.prompt import parse_reference_prompt
from stores import SessionQuery, SqliteSessionStore


async def store_session(store: SqliteSessionStore, session: ForeignSession) -> SessionHeader:
    """The session stored whole, as ``core.importers.foreign_import`` will store it."""
    provenance = session.provenance
    header = SessionHeader(provenance.original_id, session.created_at, session.cwd)
    events = [source_event(provenance, session.created_at), *session.events]
    return await store.import_session(header, events)


async def referenced_conversation(
    store: SqliteSessionStore, session_id: str
) -> list[tuple[str, str]]:
    """The ``(role, text)`` items another session's reference to ``session_id`` carries."""
    query = SessionQuery(store)
    target = await store.create_session(cwd=None)
    prepared = await SessionReferenceService(query).prepare(
        target, "what happened there?", [SessionReferenceInput(session_id)]
    )
    assert prepared.additional_context is not None
    sources = parse_reference_prompt(prepared.additional_context["content"][0]["text"])
    assert sources is not None and len(sources) == 1
    return [(item["role"], item["text"]) for item in sources[0]["conversation"]]


def spoken(session: ForeignSession) -> list[tuple[str, str]]:
    """The person's and the model's texts on the surface, in order (what a reference to
    the session may show: SPEC §4.6)."""
    out: list[tuple[str, str]] = []
    for event in session.events:
        if event.type == "user/message" and event.data["source"]["kind"] == "user":
            text = message_text(event.data)
            if text:
                out.append(("user", text))
        elif event.type == "assistant/message":
            text = message_text(event.data["message"])
            if text:
                out.append(("assistant", text))
    return out


def surface_blocks(session: ForeignSession) -> list[Mapping[str, Any]]:
    """Every content block of every surface message."""
    blocks: list[Mapping[str, Any]] = []
    for event in session.events:
        if event.surface_op is None:
            continue
        message = event.data if event.type == "user/message" else event.data["message"]
        blocks.extend(message["content"])
    return blocks

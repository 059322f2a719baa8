"""Storing a ChatGPT session the way the importer will (``foreign_import`` is another
module's job): ``session/source`` at seq 0, then the reader's events; and what a session
reference (``prepare``) would send of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.importers.foreign import ForeignSession, source_event
from core.log import Event, SessionHeader
from core.references import SessionReferenceInput, SessionReferenceService
from core.references.prompt import parse_reference_prompt
from stores import SessionQuery, SqliteSessionStore


async def store_and_reference(
    session: ForeignSession, folder: Path
) -> tuple[list[Event], list[Event], list[dict[str, Any]]]:
    """The stored log, its surface and the conversation a reference sends (``prepare``)."""
    header = SessionHeader(session.provenance.original_id, session.created_at, None)
    events = [source_event(session.provenance, session.created_at), *session.events]
    async with await SqliteSessionStore.open(folder / "dsh.sqlite3") as store:
        await store.import_session(header, events)
        stored = await store.read_events(header.id)
        query = SessionQuery(store)
        surface = list((await query.read_surface(header.id)).events)
        target = await store.create_session(cwd=None)
        service = SessionReferenceService(query)
        prepared = await service.prepare(
            target, "what happened there?", [SessionReferenceInput(header.id)]
        )
        assert prepared.additional_context is not None
        (block,) = prepared.additional_context["content"]
        sources = parse_reference_prompt(block["text"])
        assert sources is not None
        return stored, surface, list(sources[0]["conversation"])

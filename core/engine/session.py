"""``ChatSession``: sends drafts to one session and streams replies into its log (the
entry points: drafts, send, reply, retry, edit, titles; compaction and the reply itself
live beside it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any

from core.control import edit_run, replacing, retry_run
from core.engine.compaction import _Compacting
from core.engine.context import provider_messages, unanswered_message
from core.engine.replying import _Replying
from core.engine.updates import (
    EngineUpdate,
    NothingToAnswerError,
    PreparedDraft,
    Submitted,
    TitleChanged,
)
from core.log import SESSION_TITLE, text_block, user_message
from core.providers.base import ProviderMessage
from core.query import SessionTitle
from core.references import parse_session_reference_text


class ChatSession(_Replying, _Compacting):
    """Sends drafts to one session and streams replies into its log."""

    # -- drafts ------------------------------------------------------------------------

    async def prepare_draft(
        self, draft: str, *, cancel: asyncio.Event | None = None
    ) -> PreparedDraft:
        """Parse mentions and prepare the snapshot; raises ``SessionReferenceError``."""
        parsed = parse_session_reference_text(draft)
        content = [text_block(parsed.text)]
        prepared = await self.service.prepare(
            self.header, content, parsed.references, cancel=cancel
        )
        message = user_message(prepared.content)
        return PreparedDraft(
            readable_text=parsed.text,
            references=tuple(parsed.references),
            snapshot=prepared.additional_context,
            message=message,
        )

    async def preview(
        self, draft: str, *, cancel: asyncio.Event | None = None
    ) -> list[ProviderMessage]:
        """Exactly the messages the model would receive if ``draft`` were sent now."""
        self._read_prompt_file()
        prepared = await self.prepare_draft(draft, cancel=cancel)
        snapshot = await self.query.read_surface(self.session_id)
        pending: list[Mapping[str, Any]] = [e.data for e in prepared.batch]
        return provider_messages(snapshot.events, system=self.system_prompt) + provider_messages(
            pending, system=None
        )

    async def submit(self, draft: str, *, cancel: asyncio.Event | None = None) -> Submitted:
        """Prepare and append the user's batch (all or nothing). Under a reply lease that
        another writer took meanwhile, nothing is appended (``LeaseLostError``)."""
        self.ready()
        return await self._submit(draft, cancel)

    async def _submit(self, draft: str, cancel: asyncio.Event | None) -> Submitted:
        """``submit`` once ``ready`` has passed."""
        prepared = await self.prepare_draft(draft, cancel=cancel)
        if self._lease_owner is not None and self._lease_lost.is_set():
            raise await self._lost_error("message")
        events = await self._append_message(prepared.batch)
        return Submitted(tuple(events))

    # -- replies -----------------------------------------------------------------------

    async def reply(self, *, interrupt: asyncio.Event | None = None) -> AsyncIterator[EngineUpdate]:
        """Stream the model's answer to the current surface and store it (under the reply
        lease: ``SessionBusyError`` before anything is stored if another writer holds it)."""
        self.ready()
        async with (
            self._busy,
            self.reply_lease(),
            aclosing(self._reply(interrupt)) as updates,
        ):
            async for update in updates:
                yield update

    async def send(
        self,
        draft: str,
        *,
        cancel: asyncio.Event | None = None,
        interrupt: asyncio.Event | None = None,
    ) -> AsyncIterator[EngineUpdate]:
        """Submit ``draft`` then stream the reply. Raises before yielding if preparation fails
        or another writer is replying in this session (``SessionBusyError``)."""
        self.ready()
        async with self._busy, self.reply_lease():
            yield await self._submit(draft, cancel)
            async with aclosing(self._reply(interrupt)) as updates:
                async for update in updates:
                    yield update

    async def reply_to_last(
        self, *, interrupt: asyncio.Event | None = None
    ) -> AsyncIterator[EngineUpdate]:
        """Answer the session's last user message when it has no reply yet (the retry after
        a failed reply: nothing is appended again). ``NothingToAnswerError`` otherwise;
        ``SessionBusyError`` when another writer holds the reply lease."""
        self.ready()
        async with self._busy, self.reply_lease():
            surface = (await self.query.read_surface(self.session_id)).events
            if unanswered_message(surface) is None:
                raise NothingToAnswerError(
                    "nothing to answer: the session has no messages"
                    if not surface
                    else "nothing to answer: the last message already has a reply"
                )
            async with aclosing(self._reply(interrupt)) as updates:
                async for update in updates:
                    yield update

    async def retry(self, *, interrupt: asyncio.Event | None = None) -> AsyncIterator[EngineUpdate]:
        """Answer the last request again. The new reply takes the place of the last one on
        the surface (a replace listing it, as a compaction does: the earlier attempt stays
        in the log and the transcript shows it folded); a request left without a reply is
        simply answered. Nothing replaces the earlier reply unless something of the new one
        arrives. ``NothingToAnswerError`` when there is no request to answer."""
        self.ready()
        async with self._busy, self.reply_lease():
            surface = (await self.query.read_surface(self.session_id)).events
            run = retry_run(surface)
            if run is None:
                raise NothingToAnswerError(
                    "nothing to retry: the session has no messages"
                    if not surface
                    else "nothing to retry: the conversation has no request to answer"
                )
            async with aclosing(self._reply(interrupt, replace=run or None)) as updates:
                async for update in updates:
                    yield update

    async def edit(
        self,
        seq: int,
        draft: str,
        *,
        cancel: asyncio.Event | None = None,
        interrupt: asyncio.Event | None = None,
    ) -> AsyncIterator[EngineUpdate]:
        """Send ``draft`` in place of the user's message ``seq`` and stream the reply. The
        new message (with its referenced-sessions snapshot, if any) replaces the old one and
        everything after it on the surface; that stays in the log, folded in the transcript.
        ``EditError`` when ``seq`` is not one of the user's messages on the surface."""
        self.ready()
        async with self._busy, self.reply_lease():
            surface = (await self.query.read_surface(self.session_id)).events
            run = edit_run(surface, seq)
            prepared = await self.prepare_draft(draft, cancel=cancel)
            if self._lease_lost.is_set():
                raise await self._lost_error("message")
            batch = replacing(prepared.batch, run)
            events = await self._append_message(batch)
            yield Submitted(tuple(events))
            async with aclosing(self._reply(interrupt)) as updates:
                async for update in updates:
                    yield update

    # -- titles ------------------------------------------------------------------------

    async def rename(self, title: str) -> TitleChanged:
        """Record a title chosen by the user."""
        cleaned = " ".join(title.split())
        if not cleaned:
            raise ValueError("a title cannot be empty")
        stored = await self.store.append(
            self.session_id, SESSION_TITLE, {"title": cleaned, "source": {"kind": "user"}}
        )
        return TitleChanged(cleaned, stored)

    async def title(self) -> SessionTitle | None:
        return await self.query.read_title(self.session_id)

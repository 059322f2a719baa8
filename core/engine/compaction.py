"""Compaction: the whole surface replaced by one checkpoint holding a summary, written
in one batch under the reply lease."""

from __future__ import annotations

from core.engine.context import provider_messages, summarize
from core.engine.leasing import _Leasing
from core.engine.updates import (
    COMPACTION_RACE_MESSAGE,
    CompactionError,
    CompactionResult,
    provider_failure,
)
from core.engine.waits import _unless_set
from core.errors import InvalidEventError, LeaseLostError
from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    COMPACT_END,
    COMPACT_START,
    COMPACT_SUMMARY,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    is_compact_checkpoint_source,
    new_message_id,
    user_message,
)
from core.providers.base import ProviderError


class _Compacting(_Leasing):
    """Replaces the surface by a summary."""

    async def compact(self) -> CompactionResult:
        """Replace the whole current surface by one checkpoint holding a summary.

        Nothing is written until the summary is in: then ``compact/start``, the summary,
        the checkpoint and ``compact/end`` go in one batch, so the log never holds a start
        without its end (not even after a crash mid-summary). A failed summary is recorded
        as a start and an error end, also in one batch. When the session changed meanwhile
        (another compaction, in this process or another), the batch no longer fits the
        surface; nothing is written and ``CompactionError`` says so.

        It holds the session's reply lease throughout, like a reply: a compaction and a reply
        (or two compactions) never run at once, in this process or another
        (``SessionBusyError`` before anything is read or written). When another writer takes
        the lease meanwhile (``dsh unlock``), the summary is abandoned and nothing is written
        (``LeaseLostError``).
        """
        async with self._busy, self.reply_lease():
            lost = self._lease_lost
            if lost.is_set():
                raise await self._lost_error("compaction")
            snapshot = await self.query.read_surface(self.session_id)
            surface = snapshot.events
            if not surface:
                raise CompactionError("nothing to compact: the session has no messages")
            if len(surface) == 1 and is_compact_checkpoint_source(surface[0].data.get("source")):
                raise CompactionError("nothing to compact: the session is already compacted")
            compaction_id = new_message_id()
            start = NewEvent(
                COMPACT_START,
                {
                    "id": compaction_id,
                    "throughSeq": snapshot.captured_through_seq,
                    "messages": len(surface),
                },
            )
            try:
                summary = await _unless_set(
                    summarize(self.provider, provider_messages(surface, system=None)), lost
                )
                if summary is None:
                    raise await self._lost_error("compaction")
                if not summary.strip():
                    raise ProviderError("the model returned an empty summary", "protocol")
            except LeaseLostError:
                raise
            except Exception as err:
                message = str(provider_failure(err))
                end = {"id": compaction_id, "status": "error", "error": message}
                await self._append_compaction([start, NewEvent(COMPACT_END, end)])
                raise CompactionError(f"compaction failed: {message}") from err
            shadowed = tuple(e.seq for e in surface)
            # Through the last turn of the log, failed ones included: their numbers stay used.
            source = {**COMPACT_CHECKPOINT_SOURCE, "throughTurn": await self._last_turn(snapshot)}
            checkpoint = user_message(
                f"<compacted-summary>\n{summary.strip()}\n</compacted-summary>", source=source
            )
            written = await self._append_compaction(
                [
                    start,
                    NewEvent(COMPACT_SUMMARY, {"id": compaction_id, "summary": summary.strip()}),
                    NewEvent(
                        USER_MESSAGE,
                        checkpoint,
                        Replace(surface[0].seq, surface[-1].seq),
                        shadowed,
                    ),
                    NewEvent(COMPACT_END, {"id": compaction_id, "status": "ok"}),
                ]
            )
            return CompactionResult(written[2], shadowed, summary.strip())

    async def _append_compaction(self, batch: list[NewEvent]) -> list[Event]:
        """Append a compaction's events in one batch. A batch built from the surface read
        before summarising is rejected by the store when that surface has changed since.
        Under a lease another writer took, nothing is appended (``LeaseLostError``)."""
        await self._check_lease()
        if self._lease_lost.is_set():
            raise await self._lost_error("compaction")
        try:
            return await self.store.append_batch(self.session_id, batch)
        except InvalidEventError as err:
            raise CompactionError(COMPACTION_RACE_MESSAGE) from err

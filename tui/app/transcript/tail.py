"""The live end of the transcript: newly stored events appended (a reply already on screen
is not shown twice), the streaming reply begun, and the view following the newest content.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.await_complete import AwaitComplete
from textual.widget import Widget

from core.log import Event
from tui.app.transcript.history import with_history
from tui.app.transcript.reply import ReplyRecord, ReplyView, done_already
from tui.app.transcript.state import TranscriptState
from tui.shared.items import TranscriptItem, classify_surface, with_unknown_events

__all__ = ["TranscriptTail"]


class TranscriptTail(TranscriptState):
    """For the transcript (mixed in before its widget class): what is added at its end."""

    def add_events(
        self,
        events: Sequence[Event],
        unknown: Sequence[Event] = (),
        *,
        through: int | None = None,
    ) -> AwaitComplete:
        """Append newly stored surface events (already shown ones are skipped) and the
        unknown events stored with them (``unknown``, read through seq ``through``: those
        already read are skipped)."""
        new = [event for event in events if event.seq not in self._known_seqs]
        fresh = [
            event
            for event in unknown
            if event.seq > self._unknown_low
            and (self._unknown_through is None or event.seq > self._unknown_through)
        ]
        if through is not None:
            self._unknown_through = max(through, self._unknown_through or -1)
        if not new and not fresh:
            return done_already()
        self._known_seqs.update(event.seq for event in new)
        items = self._classify_tail(with_unknown_events(new, fresh))
        widgets: list[Widget] = []
        for item in items:
            if item.kind == "assistant" and self._adopt_reply(item):
                continue
            self._entries.append(item)
            widget = self._make_widget(item)
            self._widgets.append(widget)
            widgets.append(widget)
        mounting = self.mount_all(widgets) if widgets else None
        pruning = self._prune()
        self._update_chrome()

        async def adding() -> None:
            if mounting is not None:
                await mounting
            if pruning is not None:
                await pruning

        return self._tracked(adding())

    def begin_reply(self) -> ReplyView:
        """Mount and return a streaming assistant block at the end of the transcript."""
        record = ReplyRecord()
        view = ReplyView(record)
        self._entries.append(record)
        self._widgets.append(view)
        self._reply = view
        self.mount(view)
        self._prune()
        self._update_chrome()
        return view

    def follow(self) -> None:
        """Jump to the newest content and follow it again (e.g. when the user sends)."""
        self.anchor()

    def _classify_tail(self, events: Sequence[Event]) -> list[TranscriptItem]:
        """Classify new events; a user message right after an already shown card keeps its labels."""
        last = self._entries[-1] if self._entries else None
        if isinstance(last, TranscriptItem) and last.kind == "card":
            return with_history(classify_surface([last.event, *events])[1:])
        return with_history(classify_surface(events))

    def _adopt_reply(self, item: TranscriptItem) -> bool:
        """Bind a stored assistant message to the finished reply already on screen."""
        for index in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[index]
            if isinstance(entry, ReplyRecord):
                if entry.status is None or (
                    entry.event is not None and entry.event.seq != item.event.seq
                ):
                    return False
                entry.event = item.event
                self._entries[index] = item
                return True
            if entry.kind in ("assistant", "user", "card"):
                return False  # a newer reply or a new turn: not the reply on screen
        return False

"""The context meter in the status line: for the open session and its profile, the next
request's tokens, its share of the context window and the cost so far; while the draft
holds mentions, what its references add before it is sent; a warning when the next
request would not fit the window.

Measured off the event loop's way: the figures are ``core.usage``'s (the same reply sums
and next-request estimate as ``core.usage.measure``), read in a worker when a session
opens, after each reply and after a profile switch, and debounced. The log is read in
pages, and only once per session: after a reply only the events since the last reading
are summed. The draft is measured ``DRAFT_DELAY`` after typing stops; typing on cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from textual.timer import Timer
from textual.worker import Worker

from core.engine import ChatSession, provider_messages
from core.errors import SessionNotFoundError
from core.gcpause import gc_paused
from core.log import ASSISTANT_MESSAGE, Event
from core.paging import event_pages
from core.profiles import Profile
from core.references import SessionReferenceError, find_session_reference_spans
from core.usage import (
    MESSAGE_OVERHEAD_TOKENS,
    DraftUsage,
    ReplyTotals,
    SessionUsage,
    add_reply,
    estimate_tokens,
    measure_draft,
    next_request,
    session_usage,
)
from tui.app.faults import FAULTS
from tui.app.host import AppHost
from tui.shared.errors import describe_error, sentence
from tui.shared.meter import meter_line, meter_tooltip

__all__ = [
    "DRAFT_DELAY",
    "ERROR_SECONDS",
    "MEASURE_DELAY",
    "QUICK_DRAFT_CHARS",
    "ContextMeter",
    "ReplyTally",
    "measure_session",
]

MEASURE_DELAY = 0.1
"""Seconds a session measure waits for more reasons to measure (debounce)."""

DRAFT_DELAY = 0.3
"""Seconds after the last keystroke before a draft's references are measured."""

QUICK_DRAFT_CHARS = 65_536
"""A draft without mentions up to this long is counted at each keystroke."""

ERROR_SECONDS = 5.0
"""How long the meter shows why a draft's references cannot be prepared."""

_GROUPS = ("meter", "meter-draft")
"""The worker groups of the session's and the draft's measures."""

MEASURING = "measuring…"
"""The meter of a session whose figures are being read for the first time."""


@dataclass(frozen=True, slots=True)
class ReplyTally:
    """The reply sums of a session's log up to ``through`` (for one current profile: a
    reply whose profile has no prices is priced at the current one)."""

    session_id: str
    profile: str
    totals: ReplyTotals
    through: int | None


def _next_request(events: Sequence[Event], system: str | None) -> tuple[int, bool]:
    with gc_paused():
        return next_request(events, provider_messages(events, system=system))


async def measure_session(
    chat: ChatSession, profiles: Mapping[str, Profile], tally: ReplyTally | None = None
) -> tuple[SessionUsage, ReplyTally]:
    """``core.usage.measure`` of ``chat``, continuing ``tally`` (the sums of an earlier
    reading of the same session and profile: only the events after it are read). The
    next request is estimated in a thread (a long surface is a lot of text to count)."""
    profile = chat.profile or Profile("offline", builtin=True)
    snapshot = await chat.query.read_surface(chat.session_id)
    through = snapshot.captured_through_seq
    next_tokens, exact = await asyncio.to_thread(_next_request, snapshot.events, chat.system_prompt)
    del snapshot
    if (
        tally is None
        or tally.session_id != chat.session_id
        or tally.profile != profile.name
        or (tally.through is not None and (through is None or tally.through > through))
    ):
        tally = ReplyTally(chat.session_id, profile.name, ReplyTotals(), None)
    totals = replace(tally.totals)
    after = -1 if tally.through is None else tally.through
    async for page in event_pages(chat.store, chat.session_id, through, after=after):
        for event in page:
            if event.type == ASSISTANT_MESSAGE:
                add_reply(totals, event.data, profiles, profile)
    usage = session_usage(profile, totals, next_tokens, exact)
    return usage, ReplyTally(chat.session_id, profile.name, totals, through)


class ContextMeter:
    """Keeps the status line's meter up to date for the open session (the app calls
    ``refresh`` when the session, its profile or its log changed, and ``draft_changed``
    as the user types)."""

    def __init__(self, app: AppHost) -> None:
        self._app = app
        self.usage: SessionUsage | None = None
        self._measured: tuple[str, str] | None = None  # (session id, profile) of ``usage``
        self._tally: ReplyTally | None = None
        self.draft: DraftUsage | None = None
        self.draft_tokens = 0
        self.draft_error: str | None = None
        self._draft_key: tuple[str, str] | None = None  # (session id, draft) measured or due
        self._error_timer: Timer | None = None
        self.measures = 0  # session measures done (for tests)

    def _pending(self) -> list[Worker[None]]:
        return [w for w in self._app.workers if w.group in _GROUPS and not w.is_finished]

    @property
    def pending(self) -> bool:
        """Whether a measure is due or running."""
        return bool(self._pending())

    async def wait_until_settled(self) -> None:
        """Until no measure is due or running (for the SVG renderer and the tests)."""
        while running := self._pending():
            for worker in running:
                with contextlib.suppress(Exception):  # cancelled by a newer one: look again
                    await worker.wait()

    # -- the session ---------------------------------------------------------------------

    def refresh(self, delay: float = MEASURE_DELAY) -> None:
        """Measure the open session again, soon (a newer call supersedes this one)."""
        chat = self._app.chat
        if chat is None:
            self.usage = self._measured = None
            self._show()
            return
        self._show()
        self._app.run_worker(
            partial(self._measure, chat, delay), group="meter", exclusive=True, exit_on_error=False
        )

    async def _measure(self, chat: ChatSession, delay: float) -> None:
        await asyncio.sleep(delay)
        app = self._app
        try:
            with gc_paused():  # a long log is many small acyclic objects: no GC passes
                usage, tally = await measure_session(chat, app.runtime.config.profiles, self._tally)
        except SessionNotFoundError:
            return  # deleted meanwhile: opening another session measures that one
        except FAULTS as err:  # a busy or failing store: the next refresh tries again
            app.log.warning(f"could not measure the session: {err!r}")
            return
        self._tally = tally
        if app.current_id != chat.session_id:
            return
        self.usage = usage
        self._measured = (chat.session_id, usage.profile)
        self.measures += 1
        self._show()

    # -- the draft -----------------------------------------------------------------------

    def draft_changed(self, draft: str) -> None:
        """The composer's text changed: measure what it adds to the next request (its
        mentions' references and its text) once typing stops; an older measure still
        waiting or running is cancelled. An emptied draft (sent) is nothing at once."""
        chat = self._app.chat
        key = (chat.session_id if chat is not None else "", draft)
        if key == self._draft_key:
            return
        self._draft_key = key
        self._clear_error()
        if chat is None or not draft.strip():
            self._app.cancel_workers("meter-draft")
            self.draft = None
            self.draft_tokens = 0
            self._show()
            return
        if len(draft) <= QUICK_DRAFT_CHARS and not find_session_reference_spans(draft):
            # Plain text: counted at once (a big paste waits for typing to stop).
            self._app.cancel_workers("meter-draft")
            self.draft = None
            self.draft_tokens = estimate_tokens(draft) + MESSAGE_OVERHEAD_TOKENS
            self._show()
            return
        self._app.run_worker(
            partial(self._measure_draft, chat, draft),
            group="meter-draft",
            exclusive=True,
            exit_on_error=False,
        )

    async def _measure_draft(self, chat: ChatSession, draft: str) -> None:
        await asyncio.sleep(DRAFT_DELAY)
        spans = find_session_reference_spans(draft)
        usage: DraftUsage | None = None
        if not spans:
            tokens = estimate_tokens(draft) + MESSAGE_OVERHEAD_TOKENS
        else:
            labels = {
                s.session_id: s.label or s.session_id for s in spans if s.session_id is not None
            }
            try:
                usage = await measure_draft(chat, draft)
            except SessionReferenceError as err:
                words = describe_error(err, name_of=lambda sid: labels.get(sid, sid))
                self._show_error(sentence(f"References: {words}"))
                return
            except FAULTS as err:
                self._show_error(sentence(f"References: {describe_error(err)}"))
                return
            tokens = usage.tokens
        if self._draft_key != (chat.session_id, draft):
            return
        self.draft = usage
        self.draft_tokens = tokens
        self._show()

    def _show_error(self, words: str) -> None:
        self.draft = None
        self.draft_error = words
        self._show()
        self._error_timer = self._app.set_timer(ERROR_SECONDS, self._error_over)

    def _error_over(self) -> None:
        self._error_timer = None
        self.draft_error = None
        self._show()

    def _clear_error(self) -> None:
        if self._error_timer is not None:
            self._error_timer.stop()
            self._error_timer = None
        self.draft_error = None

    # -- drawing -------------------------------------------------------------------------

    def _show(self) -> None:
        app = self._app
        try:
            status = app.status
        except Exception:  # the main screen is not up (the app is closing)
            return
        chat = app.chat
        if chat is None:
            status.set_meter(None)
            return
        if self.draft_error is not None:
            status.set_meter(self.draft_error, error=True)
            return
        usage = self.usage
        profile = chat.profile
        if usage is None or profile is None or self._measured != (chat.session_id, profile.name):
            status.set_meter(MEASURING)
            return
        line = meter_line(usage, profile.model, draft=self.draft, draft_tokens=self.draft_tokens)
        status.set_meter(
            line.text,
            warning=line.warning,
            tooltip=meter_tooltip(usage, profile.model, draft_tokens=self.draft_tokens),
        )

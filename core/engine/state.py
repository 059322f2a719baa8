"""A chat session's state (its store, query, provider, profile and lease) and its
reads of the log: the user's batch a lost connection may have stored, a stored reply,
the last turn number."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from core.engine.context import _TURN_PAGE, SYSTEM_PROMPT, _surface_turn, _turn_of
from core.engine.updates import MissingKeyError
from core.errors import StoreError, StoreUnreachableError
from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, Event, NewEvent, SessionHeader
from core.profiles import Profile
from core.providers.base import ModelProvider
from core.query import SessionQueryLike, SurfaceSnapshot
from core.references import SessionReferenceService
from core.store import SessionStore

REPLY_LEASE_TTL_MS = 30_000
"""How long a reply lease lasts without renewal. A holder killed mid-reply is noticed at
once on its own host and PID namespace (``core.leases.lease_owner_is_dead``); elsewhere its
lease is taken over after this."""
REPLY_LEASE_RENEW_SECONDS = 5.0
"""How often a holder renews its lease, and so how soon it learns that another writer took
it (``dsh unlock``, or a stall past the TTL): it then stops (``LeaseLostError``)."""
STORE_RETRY_SECONDS = 30.0
"""How long a reply whose server went away (a restart, a failover) waits for it to come
back to store the text already shown; after that the reply is kept in memory and stored
before the session's next message."""
STORE_RETRY_FIRST_DELAY = 0.25
STORE_RETRY_MAX_DELAY = 2.0


class _SessionState:
    """What a ``ChatSession`` holds, and the looks at its log that its writes rely on."""

    def __init__(
        self,
        store: SessionStore,
        query: SessionQueryLike,
        service: SessionReferenceService,
        provider: ModelProvider,
        header: SessionHeader,
        *,
        profile: Profile | None = None,
        system_prompt: str | None = SYSTEM_PROMPT,
        check_key: bool = False,
    ) -> None:
        self.profile = profile
        self.system_prompt = system_prompt
        self.check_key = check_key
        self.store = store
        self.query = query
        self.service = service
        self.provider = provider
        self.header = header
        self._busy = asyncio.Lock()
        self.lease_ttl_ms = REPLY_LEASE_TTL_MS
        self.lease_renew_seconds = REPLY_LEASE_RENEW_SECONDS
        self._lease_owner: str | None = None  # set while this session holds the reply lease
        self.store_retry_seconds = STORE_RETRY_SECONDS
        # A reply the server could not take when it ended (its events, its message id):
        # stored before anything else this session writes.
        self._unsaved: tuple[list[NewEvent], str] | None = None
        # A lease not given back (the server was gone): taken again by the same holder.
        self._unreleased: str | None = None
        # Set (for the lease held now) once another writer took it: nothing more is written.
        self._lease_lost = asyncio.Event()

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    def ready(self) -> None:
        """Raise, before anything is stored, when this chat cannot answer now: its
        profile's key is missing (``MissingKeyError``, when ``check_key``) or its system
        prompt file cannot be read (``ProfileError``; the file is read again at each
        turn, so an edited prompt applies to the next one)."""
        profile = self.profile
        if profile is None:
            return
        if self.check_key:
            missing = profile.missing_key()
            if missing is not None:
                raise MissingKeyError(missing)
        self._read_prompt_file()

    def _read_prompt_file(self) -> None:
        """The profile's system prompt file read now (``ProfileError`` when it cannot be)."""
        if self.profile is not None and self.profile.system_prompt_file is not None:
            self.system_prompt = self.profile.system_text(SYSTEM_PROMPT)

    async def _append_message(self, batch: list[NewEvent]) -> list[Event]:
        """Append the user's batch. When the connection was lost during the write, it may
        have been stored all the same: then it is found and used, never written twice
        (and the host does not hand back a draft that was sent)."""
        try:
            return await self.store.append_batch(self.session_id, batch)
        except StoreUnreachableError:
            message_id = batch[-1].data.get("id")
            found = None
            with contextlib.suppress(StoreError):
                found = await self._stored_batch(message_id, len(batch))
            if found is None:
                raise
            return found

    async def _stored_batch(self, message_id: object, count: int) -> list[Event] | None:
        """The ``count`` events ending with the user's message ``message_id``, if the
        session's surface holds it."""
        event = await self._newest_on_surface(
            lambda e: e.type == USER_MESSAGE and e.data.get("id") == message_id
        )
        if event is None:
            return None
        first = event.seq - count + 1
        return await self.store.read_events_at(self.session_id, range(first, event.seq + 1))

    async def _newest_on_surface(self, match: Callable[[Event], bool]) -> Event | None:
        """The newest event of the session's surface that ``match``es (a write cut by a
        lost connection may have been stored before the connection went)."""
        surface = (await self.query.read_surface(self.session_id)).events
        return next((event for event in reversed(surface) if match(event)), None)

    async def _stored_reply(self, message_id: str) -> Event | None:
        """The reply message ``message_id`` if the log holds it."""

        def match(event: Event) -> bool:
            message = event.data.get("message") if event.type == ASSISTANT_MESSAGE else None
            return isinstance(message, Mapping) and message.get("id") == message_id

        return await self._newest_on_surface(match)

    async def _last_turn(self, snapshot: SurfaceSnapshot) -> int:
        """The highest turn number used in the log so far.

        The surface knows the turns of stored replies; a reply that failed or stopped
        before its message was stored (a model error, a killed process, a lost lease) left
        only log-only events (chunks, ``turn/end``), perhaps with user messages sent since
        after them, and its number must not be given again. Turns only grow, so the newest
        event with a turn holds the highest one: the log is read backwards from its end, a
        page at a time, down to the newest surface event with a turn.
        """
        turn = _surface_turn(snapshot.events)
        floor = max((e.seq for e in snapshot.events if _turn_of(e) is not None), default=-1)
        high = snapshot.captured_through_seq
        while high is not None and high > floor:
            low = max(floor + 1, high - _TURN_PAGE + 1)
            page = await self.store.read_events_at(self.session_id, range(low, high + 1))
            for event in reversed(page):
                value = _turn_of(event)
                if value is not None:
                    return max(turn, value)
            high = low - 1
        return turn

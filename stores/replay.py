"""A read-only store over one session log file, for ``dsh replay`` (QA of how a log replays).

It holds the log in memory (a ``MemorySessionStore``) and refuses every write: replaying a
file never opens or writes a database. Reads are those of the memory store, so the app, the
CLI's printer and the snapshot renderer show the log exactly as they show a stored session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from core.batches import EventBatches
from core.damage import DamagedRow
from core.display import single_line
from core.errors import InvalidEventError, SessionNotFoundError, StoreError
from core.jsoncodec import dumps_js, loads_exact
from core.leases import ReplyLease
from core.log import (
    SESSION_TITLE,
    Event,
    NewEvent,
    SessionHeader,
    SurfaceOp,
    SurfaceOutline,
    SurfaceRow,
    build_event,
    is_known_event_type,
    surface_op_from_json,
)
from core.logfile import header_to_json, parse_jsonl
from core.query import SessionTitle
from stores.memory import MemorySessionStore, _Session
from stores.sqlite import SqliteSessionStore
from stores.validation import (
    KIND_TITLE,
    check_count,
    check_mark_type,
    check_seq_range,
    check_seqs,
    check_session_id,
    check_session_ids,
    event_kind,
    missing_seq_error,
    stored_title,
)

__all__ = ["LazyReplayStore", "ReplayDatabase", "ReplayStore"]


class ReplayStore(MemorySessionStore):
    """One session, read-only. ``reason`` says why writes are refused (shown by the app)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self._reason = reason

    @classmethod
    async def holding(
        cls, header: SessionHeader, events: Sequence[NewEvent], reason: str
    ) -> ReplayStore:
        """A store holding exactly this session (validated as an import would be)."""
        store = cls(reason)
        await MemorySessionStore.import_session(store, header, events)
        return store

    @property
    def read_only(self) -> bool:
        return True

    @property
    def read_only_reason(self) -> str:
        return self._reason

    def _refuse(self) -> NoReturn:
        raise StoreError(f"{self._reason}: nothing can be written")

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        self._refuse()

    async def append(
        self,
        session_id: str,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        time: int | None = None,
    ) -> Event:
        self._refuse()

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        self._refuse()

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        self._refuse()

    async def delete_session(self, session_id: str) -> None:
        self._refuse()

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        self._refuse()

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        return None

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        self._refuse()

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        await self.read_header(session_id)  # an unknown id is SessionNotFoundError
        return None  # a log file has no running writers

    async def break_reply_lease(self, session_id: str) -> bool:
        self._refuse()


class ReplayDatabase(SqliteSessionStore):
    """A replay of a large log (``dsh replay FILE``): the log streamed into a SQLite file
    in a private temporary folder, then read like a stored session, so memory is bounded
    by a page rather than by the log. Read-only once filled (``seal``); ``close`` removes
    the folder. Create it with ``SqliteSessionStore.open`` on a path in that folder."""

    _reason = ""
    _folder: Path | None = None

    def seal(self, reason: str, folder: Path) -> None:
        """From now on refuse every write, saying ``reason``; ``close`` removes ``folder``."""
        self._reason = reason
        self._folder = folder
        self._read_only = True

    @property
    def read_only_reason(self) -> str | None:
        return self._reason or None

    def _check_writable(self, write: bool) -> None:
        if write and self._read_only:
            raise StoreError(f"{self._reason}: nothing can be written")

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        return None  # a log file has no running writers

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)


_LOG_ONLY_END = '"surface_op":null,"source_event_seqs":null}'
"""How a line of a log-only event ends as dsh writes it (its own last two fields)."""
_THROTTLE_LINES = 500
"""The background check of a lazy replay pauses after this many lines (see below)."""
_THROTTLE_PAUSE_S = 0.005
_START_AT_LATEST_S = 3.0


class LazyReplayStore(ReplayStore):
    """A replay of one dsh JSONL log that shows its newest page before the whole file is
    checked (``dsh replay FILE`` in the app; issue 20: a 100,000-event log's newest page
    in under a second).

    It starts from the file's lines only. The reads a newest page needs (the newest
    surface rows, their events, the unknown events among them, the title, the last
    event's time) parse just the lines they touch, from the end. Meanwhile a worker
    thread checks and loads the whole log exactly as ``dsh import`` would
    (``core.logfile.parse_jsonl``), pausing every ``_THROTTLE_LINES`` lines so the event
    loop keeps the interpreter; it starts once the newest page is drawn (the app's next
    poll for changes after that page was read; at the latest after
    ``_START_AT_LATEST_S``, or at once for a read of the whole log). Once it is done every
    read is the memory store's. Reads
    that need the whole log (every surface row, every event) wait for it off the event
    loop. A bad line found by the check is reported once by ``take_notice`` (file and
    line; the follower shows it) and makes those reads fail with the same words.
    """

    def __init__(self, reason: str, label: str, header: SessionHeader, lines: list[str]) -> None:
        super().__init__(reason)
        self._label = label
        self._header = header
        self._lines = lines  # the event lines: seq s is file line s + 2
        self._parsed: dict[int, Event] = {}
        self._done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._failure: str | None = None
        self._told = False
        self._page_read = False
        self._start_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        # The check waits for the newest page to be drawn (the first poll for changes after
        # a page was read; it would otherwise compete with the drawing for the
        # interpreter), or for a read of the whole log, or at the latest this long.
        self._fallback = threading.Timer(_START_AT_LATEST_S, self._start_check)
        self._fallback.daemon = True
        self._fallback.start()

    def _start_check(self) -> None:
        with self._start_lock:
            if self._worker is not None:
                return
            self._worker = threading.Thread(
                target=self._load_everything, name="dsh-replay-check", daemon=True
            )
            self._worker.start()
        self._fallback.cancel()

    async def close(self) -> None:
        self._fallback.cancel()
        await super().close()

    # -- the background check -----------------------------------------------------------

    def _load_everything(self) -> None:
        try:
            log = parse_jsonl(self._throttled())
            # Owned by whoever replays it, as ``holding``'s import makes it (issue 17).
            session = _Session(replace(log.header, owner=log.header.owner or self._user))
            for seq, new in enumerate(log.events):
                sources = new.source_event_seqs
                event = build_event(
                    seq,
                    new.type,
                    new.time if new.time is not None else 0,  # parse_jsonl always sets it
                    new.data,
                    new.surface_op,
                    None if sources is None else tuple(sources),
                )
                session.events.append(event)
                if new.surface_op is not None:
                    session.folder.apply(seq, new.surface_op, new.source_event_seqs, None)
                session.note(event)  # its title and marks
            self._sessions[log.header.id] = session  # one assignment: readers see all or none
        except Exception as err:  # any failure is the file's: told as one line
            self._failure = f"{self._label}: {single_line(str(err))}"
        self._done.set_result(None)

    def _throttled(self) -> Iterator[str]:
        yield dsh_header_line(self._header)
        for index, line in enumerate(self._lines):
            if index % _THROTTLE_LINES == 0:
                time.sleep(_THROTTLE_PAUSE_S)  # let the event loop have the interpreter
            yield line

    @property
    def loaded(self) -> bool:
        """The whole log is checked and loaded (every read is the memory store's)."""
        return self._done.done() and self._failure is None

    @property
    def failure(self) -> str | None:
        """What the background check found wrong with the file (``None``: nothing yet)."""
        return self._failure

    async def wait_loaded(self) -> None:
        """Until the whole log is loaded, off the event loop; a bad file raises
        ``StoreError`` with its line."""
        self._start_check()
        await asyncio.wrap_future(self._done)
        if self._failure is not None:
            raise StoreError(self._failure)

    def take_notice(self) -> tuple[str, bool] | None:
        """A bad line found after the newest page was shown, once (for the notice line)."""
        if self._failure is None or self._told:
            return None
        self._told = True
        return f"{self._failure} (only what was read before it is shown)", True

    # -- reads from the lines -----------------------------------------------------------

    def _check_id(self, session_id: str) -> None:
        self._open()
        if check_session_id(session_id) != self._header.id:
            raise SessionNotFoundError(session_id)

    def _event(self, seq: int) -> Event:
        """The event of one line, parsed on its own (and kept)."""
        event = self._parsed.get(seq)
        if event is not None:
            return event
        number = seq + 2
        try:
            obj = loads_exact(self._lines[seq])
            if not isinstance(obj, Mapping) or obj.get("seq") != seq:
                raise ValueError(f"expected the event with seq {seq}")
            sources = obj.get("source_event_seqs")
            event = build_event(
                seq,
                obj["type"],
                obj["time"],
                obj["data"],
                surface_op_from_json(obj.get("surface_op")),
                None if sources is None else tuple(sources),
            )
            if not isinstance(event.type, str) or not isinstance(event.data, Mapping):
                raise ValueError("not an event")
        except (ValueError, KeyError, TypeError, InvalidEventError) as err:
            raise StoreError(f"{self._label}: line {number}: {single_line(str(err))}") from err
        self._parsed[seq] = event
        return event

    def _last_seq(self) -> int | None:
        return len(self._lines) - 1 if self._lines else None

    async def list_headers(self) -> list[SessionHeader]:
        self._open()
        return [self._header]

    async def read_header(self, session_id: str) -> SessionHeader:
        self._check_id(session_id)
        return self._header

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        if self.loaded:
            return await super().read_surface_tail(session_id, count)
        self._check_id(session_id)
        limit = check_count(count)
        rows: list[SurfaceRow] = []
        for seq in range(len(self._lines) - 1, -1, -1):
            if len(rows) >= limit:
                break
            if self._lines[seq].endswith(_LOG_ONLY_END):
                continue  # a log-only event (as dsh writes it): no need to parse it
            event = self._event(seq)
            if event.surface_op is not None:
                rows.append(SurfaceRow(seq, event.surface_op, event.source_event_seqs))
        rows.reverse()
        return self._header, self._last_seq(), rows

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        if self.loaded:
            return await super().read_events_at(session_id, seqs)
        self._check_id(session_id)
        wanted = check_seqs(seqs)
        for seq in wanted:
            if seq >= len(self._lines):
                raise missing_seq_error(self._header.id, seq)
        self._page_read = True
        return [self._event(seq) for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        if self.loaded:
            return await super().read_unknown_events(session_id, after, through)
        self._check_id(session_id)
        low, high = check_seq_range(after, through)
        stop = len(self._lines) if high is None else min(len(self._lines), high + 1)
        if stop - low > _THROTTLE_LINES * 20:  # a long range: check the whole log first
            await self.wait_loaded()
            return await super().read_unknown_events(session_id, after, through)
        return [
            event
            for event in (self._event(seq) for seq in range(low + 1, stop))
            if not is_known_event_type(event.type)
        ]

    async def last_surface_seq(self, session_id: str) -> int | None:
        if self.loaded:
            return await super().last_surface_seq(session_id)
        _header, _last, rows = await self.read_surface_tail(session_id, 1)
        return rows[-1].seq if rows else None

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        if self.loaded:
            return await super().read_titles(session_ids)
        self._open()
        wanted = [self._header.id] if session_ids is None else check_session_ids(session_ids)
        if self._header.id not in wanted:
            return {}
        found: dict[str, SessionTitle] = {}
        damaged: tuple[DamagedRow, ...] = ()
        for seq in range(len(self._lines) - 1, -1, -1):
            if f'"type":"{SESSION_TITLE}"' not in self._lines[seq]:
                continue
            event = self._event(seq)
            if event_kind(event.type, event.data, event.is_surface) == KIND_TITLE:
                try:
                    title = stored_title(event.seq, event.time, dumps_js(event.data))
                except ValueError as err:  # the whole check will reject the file
                    damaged = (DamagedRow("title", str(err), None, self._header.id),)
                else:
                    found[self._header.id] = title
                break
        if session_ids is None:
            self._damaged_titles = damaged
        return found

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        if self.loaded:
            return await super().read_latest_events(type, session_ids)
        mark = check_mark_type(type)
        self._open()
        wanted = [self._header.id] if session_ids is None else check_session_ids(session_ids)
        if self._header.id not in wanted:
            return {}
        # As ``read_titles``: from the end, parsing only the lines that may be one.
        needle = f'"type":{dumps_js(mark)}'
        for seq in range(len(self._lines) - 1, -1, -1):
            if needle in self._lines[seq]:
                event = self._event(seq)
                if event.type == mark:
                    return {self._header.id: event}
        return {}

    async def read_last_event_times(self) -> dict[str, int]:
        if self.loaded:
            return await super().read_last_event_times()
        self._open()
        if not self._lines:
            return {}
        return {self._header.id: self._event(len(self._lines) - 1).time}

    async def change_token(self) -> int:
        self._open()
        if self._page_read:  # the app polls again: its first page is drawn
            self._start_check()
        return 0  # nothing ever changes a replay

    # -- reads of the whole log: after the check ----------------------------------------

    async def read_events(self, session_id: str) -> list[Event]:
        await self.wait_loaded()
        return await super().read_events(session_id)

    async def read_surface_events(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[Event]]:
        await self.wait_loaded()
        return await super().read_surface_events(session_id)

    async def read_surface_rows(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        await self.wait_loaded()
        return await super().read_surface_rows(session_id)

    async def read_surface_nodes(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
        await self.wait_loaded()
        return await super().read_surface_nodes(session_id)

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        await self.wait_loaded()
        return await super().read_surface_outline(session_id)


def dsh_header_line(header: SessionHeader) -> str:
    """The header line of a dsh JSONL log (as ``export_jsonl`` writes it)."""
    return dumps_js(header_to_json(header))

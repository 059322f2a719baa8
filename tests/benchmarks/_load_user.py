"""One simulated member of ``bench_team_load``: a separate OS process, its own login role,
its own ``PostgresSessionStore``, doing what a person at ``dsh`` does, leanly (no TUI).

* **sends**: every ``send_every`` seconds (±50 %), a message with one session reference
  through ``ChatSession.send`` (the engine ``dsh send`` uses), alternately to the
  previous member's chat session (shared with this one) and to this member's own notes;
  the offline model streams the reply at ``tokens_per_s`` (``chunk_delay``), and the
  engine stores its chunks as it does for any model;
* **searches** (one member in ``search_every``): ``store.search_messages`` every few
  seconds, for a word every reply holds;
* **follows**: polls ``store.change_token()`` twice a second as ``tui.app.follow`` does;
  when it moved, reads the session list again (headers, titles, last activity, as the
  app's sidebar does) and, when the followed session (the
  previous member's chat) has a new surface seq, the newest page of it.

Times are ``time.time()`` (one clock for every process on the machine): a member notes
when each of its messages was committed (``commits``: the append returned) and when its
follower first saw each new surface seq of the session it follows (``seen``); the parent
matches them into the follow lag.
"""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from core.config import PostgresLimits
from core.engine import ChatSession, ReplyDelta, ReplyFinished, Submitted
from core.errors import DshError
from core.log import user_message
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceService
from core.references.mentions import SessionReferenceInput, format_session_reference_mention
from stores import SessionQuery
from stores.postgres import PostgresSessionStore

FOLLOW_INTERVAL = 0.5  # tui.app.follow.FOLLOW_INTERVAL_SECONDS
SEARCH_WORD = "received"  # every offline reply says "here is what I received"
PAGE = 41  # the transcript's newest page (page size + 1), as DshApp.read_window


def role(i: int) -> str:
    return f"u{i:03d}"


def chat_id(i: int) -> str:
    return f"chat-{role(i)}"


def notes_id(i: int) -> str:
    return f"notes-{role(i)}"


@dataclass(frozen=True)
class UserSpec:
    index: int
    users: int  # N: the previous member of 0 is N - 1
    url: str
    send_every: float
    tokens_per_s: float
    searcher: bool
    search_every: float
    seed: int
    chunk_flush: float | None = None
    poll: bool = False  # follow by polling the change counter (as behind a pooler), not LISTEN


@dataclass
class UserResult:
    index: int
    sends: int = 0
    first_token: list[float] = field(default_factory=list)  # send → first delta, seconds
    search: list[float] = field(default_factory=list)
    commits: list[tuple[str, int, float]] = field(default_factory=list)  # (session, seq, t)
    seen: list[tuple[str, int, float]] = field(default_factory=list)  # (session, last seq, t)
    follow_checks: int = 0
    cpu: float = 0.0  # this process's CPU seconds (all threads) during the run
    heard: int = 0  # other stores' commits its LISTEN connection heard during the run
    errors: list[str] = field(default_factory=list)


async def setup(spec: UserSpec, store: PostgresSessionStore) -> None:
    """This member's chat session (shared with the next member) and notes (its own)."""
    nxt = role((spec.index + 1) % spec.users)
    await store.create_session(chat_id(spec.index), cwd="/work")
    await store.create_session(notes_id(spec.index), cwd="/work")
    await store.append(
        notes_id(spec.index),
        "user/message",
        user_message(f"notes of {role(spec.index)}: the plan and the open questions"),
        surface_op="append",
    )
    if nxt != role(spec.index):
        await store.share(chat_id(spec.index), nxt)


async def _sender(
    spec: UserSpec, chat: ChatSession, result: UserResult, rng: random.Random, stop_at: float
) -> None:
    previous = chat_id((spec.index - 1) % spec.users)
    turn = 0
    await asyncio.sleep(rng.uniform(0, spec.send_every))  # members do not start in step
    while time.time() < stop_at:
        began = time.time()
        ref = (
            SessionReferenceInput(previous, "their chat")
            if turn % 2 == 0 and spec.users > 1
            else SessionReferenceInput(notes_id(spec.index), "my notes")
        )
        turn += 1
        draft = (
            f"Status {turn} from {role(spec.index)}: see {format_session_reference_mention(ref)}"
        )
        first: float | None = None
        try:
            async for update in chat.send(draft):
                if isinstance(update, ReplyDelta) and first is None:
                    first = time.time() - began
                elif isinstance(update, Submitted):
                    result.commits.append((chat.session_id, update.events[-1].seq, time.time()))
                elif isinstance(update, ReplyFinished) and update.message_event is not None:
                    result.commits.append((chat.session_id, update.message_event.seq, time.time()))
        except DshError as err:
            result.errors.append(f"send: {err}")
        else:
            result.sends += 1
            if first is not None:
                result.first_token.append(first)
        pause = spec.send_every * rng.uniform(0.5, 1.5) - (time.time() - began)
        await asyncio.sleep(max(0.0, pause))


async def _searcher(
    spec: UserSpec,
    store: PostgresSessionStore,
    result: UserResult,
    rng: random.Random,
    stop_at: float,
) -> None:
    await asyncio.sleep(rng.uniform(0, spec.search_every))
    while time.time() < stop_at:
        began = time.perf_counter()
        try:
            await store.search_messages(SEARCH_WORD)
        except DshError as err:
            result.errors.append(f"search: {err}")
        else:
            result.search.append(time.perf_counter() - began)
        await asyncio.sleep(spec.search_every * rng.uniform(0.5, 1.5))


async def _follower(
    spec: UserSpec,
    store: PostgresSessionStore,
    query: SessionQuery,
    result: UserResult,
    stop_at: float,
) -> None:
    followed = chat_id((spec.index - 1) % spec.users)
    seen_token = await store.change_token()
    last_seq: int | None = await store.last_surface_seq(followed)
    while time.time() < stop_at:
        await asyncio.sleep(FOLLOW_INTERVAL)
        try:
            token = await store.change_token()
            if token == seen_token:
                continue
            seen_token = token
            result.follow_checks += 1
            # The sidebar, as tui.app.app.DshApp.refresh_sessions reads it.
            await query.list_sessions()
            await query.read_titles()
            await query.read_last_event_times()
            last = await store.last_surface_seq(followed)
            if last is not None and last != last_seq:
                result.seen.append((followed, last, time.time()))
                last_seq = last
                await query.read_surface_page(followed, PAGE)  # the transcript's new page
        except DshError as err:
            result.errors.append(f"follow: {err}")


def _chunk_flush(seconds: float | None) -> None:
    """``--chunk-flush``: write a reply's chunks this often instead of what the store asks
    (0.05 is the engine's default, what the PostgreSQL store got before issue 34)."""
    if seconds is not None:
        PostgresSessionStore.chunk_flush_seconds = lambda self: seconds  # type: ignore[method-assign]


async def run_user(
    spec: UserSpec, ready: Any, go: Any, start_at: Any, duration: float
) -> UserResult:
    """Open the store, set up, say ready, wait for the common start, run ``duration``."""
    result = UserResult(spec.index)
    _chunk_flush(spec.chunk_flush)
    rng = random.Random(spec.seed)
    limits = PostgresLimits(pooler=True) if spec.poll else None
    store = await PostgresSessionStore.open(spec.url, limits=limits)
    try:
        await setup(spec, store)
        ready.put(spec.index)
        await asyncio.to_thread(go.wait)  # the parent set ``start_at``, then ``go``
        await asyncio.sleep(max(0.0, start_at.value - time.time()))
        stop_at = start_at.value + duration
        query = SessionQuery(store)
        service = SessionReferenceService(query)
        provider = OfflineProvider(chunk_delay=1.0 / spec.tokens_per_s)
        header = await store.read_header(chat_id(spec.index))
        chat = ChatSession(store, query, service, provider, header)
        jobs = [
            _sender(spec, chat, result, rng, stop_at),
            _follower(spec, store, query, result, stop_at),
        ]
        if spec.searcher:
            jobs.append(_searcher(spec, store, result, rng, stop_at))
        cpu, heard = time.process_time(), await store.change_token()
        await asyncio.gather(*jobs)
        result.cpu = time.process_time() - cpu
        result.heard = await store.change_token() - heard
    finally:
        await store.close()
    return result


def user_process(
    spec: UserSpec, ready: Any, go: Any, start_at: Any, duration: float, out: Any
) -> None:
    """The body of one member's process: its result (or its failure) goes to ``out``."""
    try:
        result = asyncio.run(run_user(spec, ready, go, start_at, duration))
    except BaseException as err:  # reported by the parent, which counts the members
        result = UserResult(spec.index, errors=[f"crashed: {err!r}\n{traceback.format_exc()}"])
        ready.put(spec.index)  # never leave the parent waiting for this one
    out.put(result)

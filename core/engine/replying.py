"""A reply: the model's stream stored as chunks, then its message and ``turn/end``;
the wait for a server that went away; the fallback title after the first exchange."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from core.engine.chunks import _ChunkBuffer, chunk_flush_seconds
from core.engine.context import fallback_title, provider_messages
from core.engine.leasing import _Leasing
from core.engine.state import STORE_RETRY_FIRST_DELAY, STORE_RETRY_MAX_DELAY
from core.engine.updates import (
    EngineUpdate,
    NothingToAnswerError,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    TitleChanged,
    provider_failure,
)
from core.engine.waits import _AnyOf, _sleep_unless
from core.errors import LeaseLostError, ReplyUnsavedError, StoreError, StoreUnreachableError
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    TURN_END,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    assistant_message,
    message_text,
    reasoning_block,
    text_block,
)
from core.providers.base import Finish, ProviderError, ReasoningDelta, TextDelta, Usage, Waiting


class _Replying(_Leasing):
    """Streams the model's answer into the session's log."""

    async def _reply(
        self, interrupt: asyncio.Event | None, *, replace: Sequence[int] | None = None
    ) -> AsyncGenerator[EngineUpdate, None]:
        lost = self._lease_lost  # set when another writer takes the lease: stop at once
        if lost.is_set():
            raise await self._lost_error("reply")
        # Read under the reply lease: the turn number is unique in the session.
        snapshot = await self.query.read_surface(self.session_id)
        surface = snapshot.events
        if replace:
            # A retry: the model sees the conversation without the reply it replaces.
            if [e.seq for e in surface[-len(replace) :]] != list(replace):
                raise NothingToAnswerError("the conversation changed meanwhile; try again")
            surface = surface[: -len(replace)]
        turn = await self._last_turn(snapshot) + 1
        messages = provider_messages(surface, system=self.system_prompt)
        buffer = _ChunkBuffer(self.store, self.session_id, lost, chunk_flush_seconds(self.store))
        text_parts: list[str] = []
        reasoning_parts: list[str] = []
        usage: Mapping[str, Any] | None = None
        status: Literal["completed", "interrupted", "error"] = "completed"
        error: ProviderError | None = None
        started = time.monotonic()
        first_delta: float | None = None
        index = 0
        cancelled = False
        closed = False  # the caller stopped reading (closed us at a yield)
        write_error: Exception | None = None  # storing chunks failed: the reply cannot be kept
        # The provider stops on the host's interrupt or on a lost lease, whichever comes first.
        stop = _AnyOf(lost) if interrupt is None else _AnyOf(interrupt, lost)
        stream = self.provider.stream(messages, cancel=stop)
        try:
            async for delta in stream:
                if lost.is_set():
                    break  # the session is another writer's: not a word more of this reply
                if isinstance(delta, Waiting):
                    yield ReplyWaiting(delta.seconds, delta.reason)
                elif isinstance(delta, (TextDelta, ReasoningDelta)):
                    if not delta.text:
                        continue
                    if first_delta is None:
                        first_delta = time.monotonic() - started
                    is_text = isinstance(delta, TextDelta)
                    (text_parts if is_text else reasoning_parts).append(delta.text)
                    chunk = {
                        "type": "text-delta" if is_text else "reasoning-delta",
                        "index": index,
                        "text": delta.text,
                    }
                    index += 1
                    buffer.add(NewEvent(ASSISTANT_CHUNK, {"turn": turn, "step": 0, "chunk": chunk}))
                    yield ReplyDelta("text" if is_text else "reasoning", delta.text)
                    if buffer.due():
                        try:
                            await buffer.flush()
                        except Exception as err:  # the store, not the model, failed
                            write_error = err
                            break
                elif isinstance(delta, Usage):
                    usage = dict(delta.data)
                elif isinstance(delta, Finish):
                    pass
                if interrupt is not None and interrupt.is_set():
                    status = "interrupted"
                    break
            if interrupt is not None and interrupt.is_set():
                status = "interrupted"
        except asyncio.CancelledError:
            status, cancelled = "interrupted", True
        except GeneratorExit:  # e.g. a write of a delta failed: what arrived is still kept
            status, closed = "interrupted", True
        except Exception as err:  # ProviderError, or anything a provider let through
            status, error = "error", provider_failure(err)
        finally:
            try:
                await stream.aclose()  # type: ignore[attr-defined]
            except Exception as err:
                if error is None and not cancelled and status != "interrupted":
                    status, error = "error", provider_failure(err)

        if not lost.is_set():
            await self._check_lease()  # taken since the last renewal: no final message either
        if lost.is_set():
            # Another writer owns the session now: nothing more of this reply is stored
            # (the chunks stored so far stay, as of a writer that was killed).
            buffer.discard()
            with contextlib.suppress(Exception):
                await buffer.close()
            if cancelled:
                raise asyncio.CancelledError
            if closed:
                return  # a closed generator may not yield (or raise) again
            raise await self._lost_error("reply")

        store_error: StoreError | None = None
        if isinstance(write_error, StoreUnreachableError) and (text_parts or reasoning_parts):
            # The server went away (a restart, a failover): the reply ends here, as an
            # error, and what was shown is stored once the server is back (below).
            status, store_error, write_error = "error", write_error, None
        if write_error is not None:
            # The store refuses writes (a full disk…): the reply cannot be kept, and the
            # error is the store's, not the model's. Chunks stored so far stay as they are.
            with contextlib.suppress(Exception):
                await buffer.close()
            raise write_error

        # Store what was received, whatever happened: nothing of the reply is dropped.
        content: list[dict[str, Any]] = []
        if reasoning_parts:
            content.append(reasoning_block("".join(reasoning_parts)))
        if text_parts:
            content.append(text_block("".join(text_parts)))
        tail: list[NewEvent] = []
        if content or status == "completed":
            data: dict[str, Any] = {
                "turn": turn,
                "step": 0,
                "message": assistant_message(
                    content or [text_block("")],
                    provider=self.provider.name,
                    model=self.provider.model,
                ),
                "finish": status,
            }
            if usage is not None:
                data["usage"] = usage
            if status == "interrupted":
                data["interrupted"] = True
            if error is not None:
                data["error"] = {"kind": error.kind, "message": str(error)}
            elif store_error is not None:
                data["error"] = {"kind": "store", "message": str(store_error)}
            if self.profile is not None:
                data["profile"] = self.profile.name
            if replace:
                tail.append(
                    NewEvent(ASSISTANT_MESSAGE, data, Replace(replace[0], replace[-1]), replace)
                )
            else:
                tail.append(NewEvent(ASSISTANT_MESSAGE, data, "append"))
        end: dict[str, Any] = {"turn": turn, "status": status}
        if error is not None:
            end["error"] = {"kind": error.kind, "message": str(error)}
        elif store_error is not None and status == "error":
            end["error"] = {"kind": "store", "message": str(store_error)}
        tail.append(NewEvent(TURN_END, end))
        message_event: Event | None = None
        written: list[Event] | None = None
        try:
            written = await buffer.flush(*tail)
        except LeaseLostError:  # lost while the final write waited for a chunk write
            with contextlib.suppress(Exception):
                await buffer.close()
            if cancelled:
                raise asyncio.CancelledError from None
            if closed:
                return
            raise await self._lost_error("reply") from None
        except StoreUnreachableError as err:
            if len(tail) < 2:  # nothing was shown: nothing to keep (turn numbers stay)
                with contextlib.suppress(Exception):
                    await buffer.close()
                raise
            store_error = store_error or err
        except BaseException:
            with contextlib.suppress(Exception):
                await buffer.close()
            raise
        # A timed chunk write that failed earlier does not matter now: the message holds
        # the whole reply.
        with contextlib.suppress(Exception):
            await buffer.close()
        if written is not None:
            message_event = written[-2] if len(tail) == 2 else None
        else:
            # The server went away: wait for it (saying so) and store the reply then; a
            # reply that cannot wait (closed, cancelled, stopped by the host's interrupt)
            # or waited long enough is kept in memory and stored before this session's
            # next write.
            message_id = str(tail[0].data["message"]["id"])
            deadline = time.monotonic() + self.store_retry_seconds
            delay = STORE_RETRY_FIRST_DELAY
            assert store_error is not None
            latest: StoreError = store_error  # what the server said last, for the user
            while message_event is None:
                stopped = interrupt is not None and interrupt.is_set()
                if cancelled or closed or stopped or time.monotonic() >= deadline:
                    self._unsaved = (tail, message_id)
                    if cancelled:
                        raise asyncio.CancelledError
                    if closed:
                        return
                    raise ReplyUnsavedError(str(latest)) from latest
                try:
                    yield ReplyWaiting(
                        delay, f"{store_error}; the reply is stored when the server is back"
                    )
                    await _sleep_unless(delay, interrupt)
                except (GeneratorExit, asyncio.CancelledError):
                    self._unsaved = (tail, message_id)
                    raise
                if interrupt is not None and interrupt.is_set():
                    continue  # stopped while waiting: kept in memory (above)
                delay = min(delay * 2, STORE_RETRY_MAX_DELAY)
                await self._check_lease()
                if lost.is_set():
                    raise await self._lost_error("reply")
                try:
                    message_event = await self._stored_reply(message_id)
                    if message_event is None:
                        message_event = (await self.store.append_batch(self.session_id, tail))[0]
                except StoreUnreachableError as err:
                    latest = err
        if cancelled:
            raise asyncio.CancelledError
        if closed:
            return  # a closed generator may not yield again
        yield ReplyFinished(status, message_event, error, first_delta, store_error)
        if status != "error" and not lost.is_set():
            title = await self._ensure_title()
            if title is not None:
                yield title

    # -- titles ------------------------------------------------------------------------

    async def _ensure_title(self) -> TitleChanged | None:
        """After the first exchange, name an untitled session after its first request."""
        if await self.query.read_title(self.session_id) is not None:
            return None
        surface = (await self.query.read_surface(self.session_id)).events
        for event in surface:
            source = event.data.get("source") if event.type == USER_MESSAGE else None
            if isinstance(source, Mapping) and source.get("kind") == "user":
                title = fallback_title(message_text(event.data))
                if title is None:
                    return None
                stored = await self.store.append(
                    self.session_id, SESSION_TITLE, {"title": title, "source": {"kind": "fallback"}}
                )
                return TitleChanged(title, stored)
        return None

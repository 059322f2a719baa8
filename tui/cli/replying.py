"""Streaming a reply to the terminal, shared by ``dsh send``, ``reply``, ``retry`` and ``edit``.

Each command chooses the engine call (send, answer again, retry, edit); this module picks
the profile that answers, checks what can be checked before anything is stored (the
profile exists, its key is set, its system prompt can be read), prints the reply as it
streams, stops on Ctrl+C, SIGTERM or SIGHUP like the app's Esc (the partial reply is
kept), and turns every failure into one line that says what was stored and how to go on.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

from core.display import escape_control, single_line
from core.engine import (
    ChatSession,
    EngineUpdate,
    NothingToAnswerError,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    Submitted,
)
from core.errors import DiskFullError, LeaseLostError, StoreError
from core.log import SessionHeader
from core.profiles import Profile
from core.references import SessionReferenceError
from tui.cli.common import CliError, reference_error_line
from tui.shared.errors import describe_error
from tui.shared.runtime import Runtime
from tui.shared.signals import (
    detach_from_terminal,
    install_stop_handler,
    stop_status,
    terminal_fds,
    terminal_gone,
)

__all__ = ["Answering", "Mode", "answering_chat", "profile_words", "stream_reply"]

Mode = Literal["send", "reply", "retry", "edit"]
"""What the command asks of the engine: a new message, an answer to the last one, a new
attempt at the last reply, or an edited message in place of an earlier one."""

Updates = Callable[[asyncio.Event], AsyncIterator[EngineUpdate]]
"""The engine call, given the event that interrupts it."""


@dataclass(frozen=True, slots=True)
class Answering:
    """The chat that answers, and the profile to record in the session once the engine has
    started (``None``: the session keeps the profile it has)."""

    chat: ChatSession
    switch_to: Profile | None = None


def profile_words(profile: Profile) -> str:
    """``work (openai, deepseek-chat)``: a profile as a user reads it, one safe line."""
    return f"{single_line(profile.name, 64)} ({single_line(profile.provider, 40)}, " + (
        f"{single_line(profile.model, 80)})"
    )


async def answering_chat(
    rt: Runtime, header: SessionHeader, profile_name: str | None, *, verb: str = "sent"
) -> Answering:
    """The chat that answers in ``header``'s session: on ``profile_name`` when given (an
    unknown name is a ``ProfileError``), else on the session's own profile. Raises, before
    anything is stored, when the profile's key is missing (``CliError``) or its prompt file
    cannot be read (``ConfigError``); ``verb`` says what did not happen ("sent")."""
    chosen = await rt.session_profile(header.id)
    if profile_name is None:
        profile = chosen.profile
        if chosen.note:  # the recorded profile is gone from the config: say which answers
            print(f"dsh: note: {single_line(chosen.note)}", file=sys.stderr)
    else:
        profile = rt.config.profile(profile_name)
    missing = profile.missing_key()
    if missing is not None:
        raise CliError(f"{missing}; nothing was {verb}")
    chat = rt.chat_for(header, profile)
    switch = profile_name is not None and chosen.recorded != profile.name
    return Answering(chat, profile if switch else None)


_AGAIN: dict[Mode, str] = {"send": "reply", "reply": "reply", "edit": "reply", "retry": "retry"}


def _again(mode: Mode, session_id: str) -> str:
    """The command that asks the model again after a failed reply."""
    return f"`dsh {_AGAIN[mode]} {shlex.quote(single_line(session_id))}`"


def _store_failure_line(
    err: StoreError, session_id: str, message_seq: int | None, finished: bool, mode: Mode
) -> str:
    """What a failed write left stored, and how to go on."""
    full = isinstance(err, DiskFullError)
    reason = describe_error(err)
    again = _again(mode, session_id)
    then = f"free some space, then run {again}" if full else f"run {again}"
    if finished:
        return f"the reply is saved, but the session title could not be stored: {reason}"
    if message_seq is not None:
        return (
            f"your message is saved (#{message_seq}); the reply could not be stored: "
            f"{reason}; {then} to get the answer"
        )
    if mode == "reply":
        return f"the reply could not be stored: {reason}; the message is still unanswered: {then}"
    if mode == "retry":
        return f"the new reply could not be stored: {reason}; the earlier reply stays: {then}"
    return f"nothing was sent or stored: {reason}"


def _model_failed_line(update: ReplyFinished, mode: Mode, session_id: str) -> str:
    error = single_line(str(update.error))
    again = _again(mode, session_id)
    if mode == "retry":
        kept = (
            "the partial reply is kept; the earlier one stays in the log"
            if update.message_event is not None
            else f"the earlier reply stays; {again} asks again"
        )
        return f"dsh: error: the model failed: {error} ({kept})"
    kept = (
        "the partial reply is kept" if update.message_event is not None else f"{again} asks again"
    )
    return f"dsh: error: the model failed: {error} (your message is saved; {kept})"


async def _record_switch(rt: Runtime, answering: Answering) -> None:
    """Record the profile the reply is answered with, and say so on stderr. A store that
    refuses the event costs a warning, not the reply (its message records the profile)."""
    profile = answering.switch_to
    assert profile is not None
    session_id = answering.chat.session_id
    try:
        await rt.switch_profile(answering.chat, profile.name)
        title = await rt.query.read_title(session_id)
    except StoreError as err:
        print(
            f"dsh: warning: the switch to profile {single_line(profile.name, 64)} could not "
            f"be stored: {describe_error(err)}",
            file=sys.stderr,
            flush=True,
        )
        return
    label = single_line(title.title, 60) if title is not None else single_line(session_id)
    print(f"dsh: switched {label} to profile {profile_words(profile)}", file=sys.stderr, flush=True)


async def stream_reply(rt: Runtime, answering: Answering, mode: Mode, updates_of: Updates) -> int:
    """Run ``updates_of`` and stream the reply to stdout; the exit status. A profile switch
    (``answering.switch_to``) is recorded once the engine has started: when the message
    is stored (send, edit) or the first of the reply arrives (retry), so a send that fails
    before (a bad mention, a busy session) stores nothing at all."""
    chat = answering.chat
    interrupt = asyncio.Event()
    out = sys.stdout
    status = 0
    started = time.monotonic()
    wrote = False
    stopped: list[int] = []
    terminal = terminal_fds()

    def on_stop_signal(signum: int) -> None:  # SIGTERM/SIGHUP: stop like Ctrl+C
        stopped.append(signum)
        if terminal_gone(terminal):  # closed under us: the last lines must not fail
            detach_from_terminal(terminal)
        interrupt.set()  # the engine stores the partial reply, marked interrupted

    remove_stop_handler = install_stop_handler(asyncio.get_running_loop(), on_stop_signal)
    message_seq: int | None = None  # the user's message, once stored
    finished = False
    switch_pending = answering.switch_to is not None
    try:
        async for update in updates_of(interrupt):
            if switch_pending:
                switch_pending = False
                await _record_switch(rt, answering)
            if isinstance(update, Submitted):
                message_seq = update.events[-1].seq
                if len(update.events) > 1:
                    print("(referenced-sessions snapshot attached)", file=sys.stderr)
            elif isinstance(update, ReplyDelta):
                if update.kind == "text":
                    out.write(escape_control(update.text))
                    out.flush()
                    wrote = True
            elif isinstance(update, ReplyWaiting):
                out.flush()
                print(
                    f"dsh: waiting {update.seconds_text} before retrying: "
                    f"{single_line(update.reason)}",
                    file=sys.stderr,
                    flush=True,
                )
            elif isinstance(update, ReplyFinished):
                finished = True
                if wrote:
                    out.write("\n")
                    wrote = False
                if update.status == "error" and update.store_error is not None:
                    print(
                        "dsh: error: the connection to the server was lost mid-reply: "
                        f"{describe_error(update.store_error)} (your message and the partial "
                        "reply are saved)",
                        file=sys.stderr,
                    )
                    status = 1
                elif update.status == "error" and update.error is not None:
                    print(_model_failed_line(update, mode, chat.session_id), file=sys.stderr)
                    status = 1
                elif update.status == "interrupted":
                    print("dsh: reply interrupted (the partial reply is kept)", file=sys.stderr)
                    status = 130
                if os.environ.get("DSH_TIMING"):
                    first = update.first_delta_seconds
                    print(
                        f"timing: first chunk {first * 1000:.2f} ms, total "
                        f"{(time.monotonic() - started) * 1000:.2f} ms"
                        if first is not None
                        else "timing: no chunk",
                        file=sys.stderr,
                    )
    except SessionReferenceError as err:
        raise CliError(reference_error_line(err) + " — nothing was sent") from err
    except NothingToAnswerError as err:
        hint = "; `dsh send` sends a new message" if mode == "reply" else ""
        raise CliError(f"{err}{hint}") from err
    except LeaseLostError as err:  # `dsh unlock` elsewhere: another process writes it now
        if wrote:
            out.write("\n")
            out.flush()
        raise CliError(describe_error(err)) from err
    except StoreError as err:
        if wrote:
            out.write("\n")
            out.flush()
        raise CliError(
            _store_failure_line(err, chat.session_id, message_seq, finished, mode)
        ) from err
    finally:
        remove_stop_handler()
    return stop_status(stopped[0]) if stopped else status

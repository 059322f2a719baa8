"""``DshAcpAgent``: dsh as an Agent Client Protocol agent over the shared store and engine.

One agent per connection. It keeps the sessions the client opened (``session/new`` or
``session/load``) and, for each, the cancel event of the prompt in flight. A prompt is sent
exactly like a TUI draft: parsed, prepared (all or nothing) and appended as one batch, then
the reply streams as ``agent_message_chunk`` updates and is stored by the engine.

The session's profile is its one config option (``tui.acp.config_options``);
``session/fork`` (unstable in this protocol version, announced as
``sessionCapabilities.fork``) copies a whole session with ``core.control.fork_session``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    ClientCapabilities,
    ConfigOptionUpdate,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionForkCapabilities,
    SessionInfoUpdate,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
    UnstructuredCommandInput,
)

from core.config import ConfigError
from core.control import ForkError, fork_session
from core.damage import damage_line
from core.engine import ChatSession, ReplyDelta, ReplyFinished, TitleChanged
from core.errors import (
    InvalidEventError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    SessionReadOnlyError,
)
from core.log import SessionHeader
from core.profiles import Profile
from core.references import SESSION_REFERENCE_CANCELLED, SessionReferenceError
from tui.acp.config_options import (
    PROFILE_OPTION,
    SessionConfigOption,
    missing_key_error,
    profile_options,
    unknown_option_error,
    unknown_profile_error,
)
from tui.acp.listing import PAGE_SIZE, InvalidCursorError, candidates_markdown, list_page
from tui.acp.prompt import (
    PromptCommand,
    UnsupportedContentError,
    parse_command,
    prompt_to_draft,
)
from tui.acp.replay import replay_updates
from tui.acp.text import client_label, client_text
from tui.shared.errors import describe_error
from tui.shared.runtime import Runtime, SessionProfile, profile_event_data

__all__ = ["AGENT_NAME", "DshAcpAgent", "reference_request_error"]

log = logging.getLogger("dsh.acp")

AGENT_NAME = "dsh"
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SESSION_BUSY = -32001
"""An application error (the -32000 range): the request is well formed, but the session is
running a prompt (here, or in another process: before anything is stored, or mid-reply when
another process took the session's lease). ``-32600`` would tell the client its request was
malformed."""

StopReason = Literal["end_turn", "cancelled"]

CWD_ECHO = 200
"""How much of a refused cwd an error echoes (a client may send megabytes)."""

COMMANDS = (
    AvailableCommand(
        name="sessions",
        description="List the sessions you can reference from here, with ready-to-paste mentions",
        input=AvailableCommandInput(
            root=UnstructuredCommandInput(hint="filter by title, id or cwd (optional)")
        ),
    ),
)


def _version() -> str:
    try:
        return metadata.version("dsh")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def reference_request_error(err: SessionReferenceError) -> RequestError:
    """A failed preparation as the JSON-RPC error that ends the prompt (nothing was stored)."""
    message = f"{client_label(describe_error(err))} [{err.code}] — nothing was sent"
    data: dict[str, Any] = {"code": err.code}
    if err.session_id is not None:
        data["sessionId"] = err.session_id
    return RequestError(INVALID_PARAMS, message, data)


def _agent_text(text: str) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_update="agent_message_chunk", content=text_block(client_text(text))
    )


def _thought_text(text: str) -> AgentThoughtChunk:
    return AgentThoughtChunk(
        session_update="agent_thought_chunk", content=text_block(client_text(text))
    )


@dataclass
class _OpenSession:
    chat: ChatSession  # answers with the session's profile (the ``profile`` config option)
    title: str | None  # the last title the client was told
    cancel: asyncio.Event | None = None  # set while a prompt runs; session/cancel sets it
    chosen: SessionProfile | None = None  # what the log said when ``chat`` was built


class DshAcpAgent:
    """The ACP agent. The SDK's connection finds handlers by name; the methods not defined
    here answer "method not found"."""

    def __init__(self, runtime: Runtime, *, page_size: int = PAGE_SIZE) -> None:
        self.runtime = runtime
        self.page_size = page_size
        self._client: Client | None = None
        self._sessions: dict[str, _OpenSession] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False

    # -- connection --------------------------------------------------------------------

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @contextlib.contextmanager
    def _request(self) -> Iterator[None]:
        """Count a request in flight, so the end of input can let it finish."""
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def settle(self) -> None:
        """Wait until no request is in flight and the work scheduled after responses (the
        command announcements) is done."""
        while True:
            await self._idle.wait()
            if not self._background:
                return
            await asyncio.wait(set(self._background))

    def stop(self) -> None:
        """Stop for good (SIGTERM, SIGHUP): interrupt every reply — the engine stores what
        was received, marked interrupted — and answer later prompts ``cancelled``."""
        self._stopping = True
        for state in self._sessions.values():
            if state.cancel is not None:
                state.cancel.set()

    async def _notify(self, session_id: str, update: Any) -> bool:
        """Send one update; ``False`` when the client is gone (the turn goes on storing)."""
        if self._client is None:
            return False
        try:
            await self._client.session_update(session_id=session_id, update=update)
        except (ConnectionError, RuntimeError) as err:
            log.warning("could not send an update to the client: %s", err)
            return False
        return True

    def _after_response(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` once the current request's response is queued.

        The connection queues a handler's response before this task first runs (the
        handler returns without awaiting after scheduling it), so the client knows the
        session id before it hears about it.
        """
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _announce(self, session_id: str) -> None:
        await self._notify(
            session_id,
            AvailableCommandsUpdate(
                session_update="available_commands_update", available_commands=list(COMMANDS)
            ),
        )

    async def _push_title(self, state: _OpenSession, title: str | None) -> None:
        if title is None or title == state.title:
            return
        state.title = title
        await self._notify(
            state.chat.session_id,
            SessionInfoUpdate(session_update="session_info_update", title=client_label(title)),
        )

    async def _open(self, session_id: str) -> _OpenSession:
        state = self._sessions.get(session_id)
        if state is not None:
            return state
        try:
            header = await self.runtime.store.read_header(session_id)
            chosen = await self.runtime.session_profile(session_id)
        except SessionNotFoundError as err:
            raise RequestError(
                INVALID_PARAMS,
                f"unknown session {client_label(session_id)}",
                {"sessionId": session_id},
            ) from err
        chat = self._chat_for(header, chosen.profile)
        title = await chat.title()
        state = _OpenSession(chat, title.title if title is not None else None, chosen=chosen)
        self._sessions[session_id] = state
        return state

    # -- the profile -------------------------------------------------------------------

    def _chat_for(
        self, header: SessionHeader, profile: Profile, code: int = INTERNAL_ERROR
    ) -> ChatSession:
        """A chat answered by ``profile``; a prompt file that cannot be read is one line."""
        try:
            return self.runtime.chat_for(header, profile)
        except ConfigError as err:
            raise RequestError(
                code, client_label(describe_error(err)), {"profile": profile.name}
            ) from err

    def _options(self, state: _OpenSession) -> list[SessionConfigOption]:
        profile = state.chat.profile or self.runtime.config.profile()
        note = state.chosen.note if state.chosen is not None else None
        return profile_options(self.runtime.config.profiles, profile, note)

    async def _follow_profile(self, state: _OpenSession) -> None:
        """Answer with the profile the log holds now: another process (``dsh send
        --profile``, the app's palette) may have switched it since the chat was built. The
        client is told with a ``config_option_update``. Called before a prompt stores
        anything."""
        chat = state.chat
        chosen = await self.runtime.session_profile(chat.session_id)
        if state.chat is not chat or (
            state.chosen is not None
            and chosen.profile == chat.profile
            and chosen.note == state.chosen.note
        ):
            return  # switched here meanwhile, or unchanged
        state.chat, state.chosen = self._chat_for(chat.header, chosen.profile), chosen
        await self._notify(
            chat.session_id,
            ConfigOptionUpdate(
                session_update="config_option_update", config_options=self._options(state)
            ),
        )

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        with self._request():
            return await self._set_config_option(config_id, session_id, value)

    async def _set_config_option(
        self, config_id: str, session_id: str, value: str | bool
    ) -> SetSessionConfigOptionResponse:
        """Switch the session's profile (a ``session/profile`` event; the next prompt
        answers with it) and answer with the options as they are now."""
        if config_id != PROFILE_OPTION:
            raise unknown_option_error(config_id)
        profiles = self.runtime.config.profiles
        if not isinstance(value, str) or value not in profiles:
            raise unknown_profile_error(value, profiles)
        state = await self._open(session_id)
        recorded = (await self.runtime.session_profile(session_id)).recorded
        current = state.chat.profile
        if recorded != value or current is None or current.name != value:
            try:
                chat = await self.runtime.switch_profile(state.chat, value)
            except ConfigError as err:  # its prompt file cannot be read: nothing recorded
                raise RequestError(
                    INVALID_PARAMS, client_label(describe_error(err)), {"profile": value}
                ) from err
            except SessionReadOnlyError as err:
                raise RequestError(
                    INVALID_PARAMS,
                    client_label(describe_error(err)),
                    {"sessionId": session_id, "owner": client_label(err.owner)},
                ) from err
            except SessionNotFoundError as err:  # deleted elsewhere since it was opened
                self._sessions.pop(session_id, None)
                raise RequestError(
                    INVALID_PARAMS,
                    f"unknown session {client_label(session_id)}",
                    {"sessionId": session_id},
                ) from err
            assert chat.profile is not None
            state.chat, state.chosen = chat, SessionProfile(chat.profile, value)
        return SetSessionConfigOptionResponse(config_options=self._options(state))

    # -- lifecycle ---------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        if client_info is not None:
            log.info("client %s %s", client_info.name, client_info.version)
        return InitializeResponse(
            # dsh speaks version 1 only: the client's version if it is that, else ours.
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                # Text and resource links (the baseline) only: no images, audio or
                # embedded resources.
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=False
                ),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    # Unstable in this protocol version: serve() enables it on the connection.
                    fork=SessionForkCapabilities(),
                ),
            ),
            agent_info=Implementation(name=AGENT_NAME, title="dsh", version=_version()),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if not os.path.isabs(cwd):
            raise RequestError(
                INVALID_PARAMS,
                f"cwd must be an absolute path, not {client_label(cwd, CWD_ECHO)!r}",
                {"cwd": client_label(cwd, CWD_ECHO)},
            )
        with self._request():
            return await self._new_session(cwd)

    async def _new_session(self, cwd: str) -> NewSessionResponse:
        try:
            header = await self.runtime.store.create_session(cwd=cwd)
        except InvalidEventError as err:  # a cwd over core.limits: the client's to fix
            raise RequestError(
                INVALID_PARAMS, describe_error(err), {"cwd": client_label(cwd, CWD_ECHO)}
            ) from err
        # The default profile (ACP defines nothing that chooses one at creation); the log
        # records none, so the session follows the default until the client picks one.
        profile = self.runtime.config.profile()
        try:
            chat = self._chat_for(header, profile)
        except RequestError:
            await self.runtime.store.delete_session(header.id)  # empty: nothing is lost
            raise
        state = _OpenSession(chat, None, chosen=SessionProfile(profile))
        self._sessions[header.id] = state
        self._after_response(self._announce(header.id))
        return NewSessionResponse(session_id=header.id, config_options=self._options(state))

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> LoadSessionResponse | None:
        with self._request():
            return await self._load_session(session_id)

    async def _load_session(self, session_id: str) -> LoadSessionResponse:
        """Replay the session before answering (the client knows the id already)."""
        running = self._sessions.get(session_id)
        if running is not None and running.cancel is not None:
            raise RequestError(
                SESSION_BUSY,
                "a prompt is running in this session; cancel it before loading it again",
                {"sessionId": session_id},
            )
        self._sessions.pop(session_id, None)
        state = await self._open(session_id)
        state.title = None  # tell the client the title again after the replay
        snapshot = await self.runtime.query.read_surface(session_id)
        for update in replay_updates(snapshot.events):
            await self._notify(session_id, update)
        title = await state.chat.title()
        await self._push_title(state, title.title if title is not None else None)
        await self._announce(session_id)
        return LoadSessionResponse(config_options=self._options(state))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        with self._request():
            return await self._list_sessions(cwd, cursor)

    async def _list_sessions(self, cwd: str | None, cursor: str | None) -> ListSessionsResponse:
        headers = await self.runtime.query.list_sessions()
        titles = await self.runtime.query.read_titles()
        for row in self.runtime.store.damaged_rows():  # skipped: the client is not told
            log.warning("%s", damage_line(row))
        last_times = await self.runtime.query.read_last_event_times()
        try:
            page = list_page(
                headers,
                titles,
                last_times,
                cwd=cwd,
                cursor=cursor,
                page_size=self.page_size,
            )
        except InvalidCursorError as err:
            raise RequestError(INVALID_PARAMS, str(err), {"cursor": cursor}) from err
        return ListSessionsResponse(sessions=page.sessions, next_cursor=page.next_cursor)

    async def fork_session(self, session_id: str, cwd: str, **kwargs: Any) -> ForkSessionResponse:
        with self._request():
            return await self._fork_session(session_id)

    async def _fork_session(self, session_id: str) -> ForkSessionResponse:
        """A new session holding the whole current surface of ``session_id`` (its parent
        and seq recorded, the parent's recorded profile copied), as ``dsh fork`` makes
        it. It keeps the parent's cwd, as ``session/load`` keeps a session's. A recorded
        profile no longer configured is not copied: the fork follows the default, as the
        parent does now."""
        try:
            chosen = await self.runtime.session_profile(session_id)
            recorded = chosen.profile if chosen.recorded == chosen.profile.name else None
            header = await fork_session(
                self.runtime.store,
                self.runtime.query,
                session_id,
                profile=profile_event_data(recorded) if recorded is not None else None,
            )
        except SessionNotFoundError as err:
            raise RequestError(
                INVALID_PARAMS,
                f"unknown session {client_label(session_id)}",
                {"sessionId": session_id},
            ) from err
        except ForkError as err:
            raise RequestError(
                INVALID_PARAMS, client_label(describe_error(err)), {"sessionId": session_id}
            ) from err
        state = await self._open(header.id)
        title, state.title = state.title, None
        self._after_response(self._announce_fork(state, title))
        return ForkSessionResponse(session_id=header.id, config_options=self._options(state))

    async def _announce_fork(self, state: _OpenSession, title: str | None) -> None:
        await self._push_title(state, title)
        await self._announce(state.chat.session_id)

    # -- prompts -----------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        with self._request():
            return await self._prompt(prompt, session_id)

    async def _prompt(self, prompt: list[Any], session_id: str) -> PromptResponse:
        state = await self._open(session_id)
        if state.cancel is not None:
            raise RequestError(
                SESSION_BUSY,
                "a prompt is already running in this session; cancel it first",
                {"sessionId": session_id},
            )
        try:
            draft = prompt_to_draft(prompt)
        except UnsupportedContentError as err:
            raise RequestError(INVALID_PARAMS, str(err)) from err
        except SessionReferenceError as err:
            raise reference_request_error(err) from err
        command = parse_command(draft)
        if command is None and not draft.strip():
            raise RequestError(INVALID_PARAMS, "the message is empty")
        if self._stopping:
            return PromptResponse(stop_reason="cancelled")  # the agent is stopping: nothing stored
        cancel = asyncio.Event()
        state.cancel = cancel
        try:
            if command is not None:
                stop = await self._command(state, command, cancel)
            else:
                await self._follow_profile(state)
                chat = state.chat  # this prompt's, even if the client switches meanwhile
                assert chat.profile is not None
                missing = missing_key_error(chat.profile, session_id)
                if missing is not None:  # said before anything is stored
                    raise missing
                # One reply at a time per session, across processes: before anything is stored.
                try:
                    async with chat.reply_lease():
                        stop = await self._send(state, chat, draft, cancel)
                except (SessionBusyError, LeaseLostError) as err:
                    # Lost mid-reply (`dsh unlock` elsewhere): the message is stored, the reply
                    # stopped and another process writes the session now.
                    raise RequestError(
                        SESSION_BUSY, client_label(describe_error(err)), {"sessionId": session_id}
                    ) from err
                except SessionReadOnlyError as err:  # shared with this user: read only
                    raise RequestError(
                        INVALID_PARAMS,
                        client_label(describe_error(err)),
                        {"sessionId": session_id, "owner": client_label(err.owner)},
                    ) from err
        finally:
            state.cancel = None
        return PromptResponse(stop_reason=stop)

    async def _command(
        self, state: _OpenSession, command: PromptCommand, cancel: asyncio.Event
    ) -> StopReason:
        """A slash command is answered here, with no model call and nothing stored."""
        try:
            candidates = await self.runtime.service.discover(
                state.chat.header, command.argument, cancel=cancel
            )
        except SessionReferenceError as err:
            if err.code == SESSION_REFERENCE_CANCELLED:
                return "cancelled"
            raise reference_request_error(err) from err
        await self._notify(
            state.chat.session_id, _agent_text(candidates_markdown(candidates, command.argument))
        )
        return "end_turn"

    async def _send(
        self, state: _OpenSession, chat: ChatSession, draft: str, cancel: asyncio.Event
    ) -> StopReason:
        try:
            await chat.submit(draft, cancel=cancel)
        except SessionReferenceError as err:
            if err.code == SESSION_REFERENCE_CANCELLED or cancel.is_set():
                return "cancelled"
            raise reference_request_error(err) from err

        # From here the user's message is stored. The reply is consumed to its end even if
        # this task is cancelled (the client went away): the engine then stores what was
        # received, marked interrupted, instead of losing it.
        stop: StopReason = "end_turn"
        failure: RequestError | None = None
        torn_down = False
        client_gone = False
        async for update in chat.reply(interrupt=cancel):
            try:
                if isinstance(update, ReplyDelta):
                    if not client_gone:
                        chunk = (
                            _agent_text(update.text)
                            if update.kind == "text"
                            else _thought_text(update.text)
                        )
                        if not await self._notify(chat.session_id, chunk):
                            client_gone = True
                            cancel.set()
                elif isinstance(update, ReplyFinished):
                    if update.status == "interrupted":
                        stop = "cancelled"
                    elif update.status == "error" and update.store_error is not None:
                        failure = RequestError(
                            INTERNAL_ERROR,
                            "the connection to the server was lost mid-reply: "
                            f"{client_label(str(update.store_error))} (your message and the "
                            "partial reply are saved)",
                            {"kind": "store"},
                        )
                    elif update.status == "error":
                        detail = client_label(str(update.error)) if update.error else "unknown"
                        failure = RequestError(
                            INTERNAL_ERROR,
                            f"the model failed: {detail} (your message is saved;"
                            " the partial reply is kept)",
                            {"kind": update.error.kind if update.error else None},
                        )
                elif isinstance(update, TitleChanged) and not client_gone:
                    await self._push_title(state, update.title)
            except asyncio.CancelledError:
                torn_down = True
                cancel.set()
        if torn_down:
            raise asyncio.CancelledError
        if failure is not None:
            raise failure
        if not client_gone:
            # A title set elsewhere (a rename in the TUI) reaches the client too.
            title = await chat.title()
            await self._push_title(state, title.title if title is not None else None)
        if cancel.is_set():
            stop = "cancelled"
        return stop

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self._sessions.get(session_id)
        if state is not None and state.cancel is not None:
            state.cancel.set()

"""A rollout read line by line (or as one legacy JSON document) into one session: the
header from ``session_meta``, the items in order, replies, tool results, log-only records."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.errors import InvalidEventError
from core.importers import bounds
from core.importers.codex.content import (
    _RECORD_TYPE,
    _call_id,
    _content,
    _is_injected,
    _message_id,
    _output,
    _reasoning,
    _tool_call,
)
from core.importers.codex.names import _bounded_title, _id_from_name, _mtime
from core.importers.codex.values import _Bad, _expect, _is_bare_meta, _optional_str, _time
from core.importers.foreign import (
    ForeignImportError,
    ForeignSession,
    ForeignTool,
    Provenance,
    json_kind,
)
from core.importers.source import LogTooLargeError
from core.jsoncodec import loads_exact
from core.jsondepth import nests_deeper
from core.limits import MAX_JSON_DEPTH, check_header_limits
from core.log import NewEvent, validate_new_event

TOOL: Final[ForeignTool] = "codex"
PLUGIN_SOURCE: Final[Mapping[str, str]] = {"kind": "plugin", "plugin": TOOL}
"""The source of text Codex injected into the conversation (not typed by the person)."""
DEFAULT_PROVIDER: Final = "openai"
UNKNOWN_MODEL: Final = "unknown"

_ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
)
_CWD_TAG = re.compile(r"<cwd>([^<\n]{1,4096})</cwd>")
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})


@dataclass(slots=True)
class _Pending:
    """An event whose time is not known yet (no timestamp met so far)."""

    number: int
    type: str
    data: dict[str, Any]
    surface: bool


@dataclass(slots=True)
class _Reader:
    """One rollout read line by line into events (state of the one session in memory)."""

    path: Path
    bare: bool | None = None  # the bare (pre-September 2025) format; None before line 1
    session_id: str | None = None
    cwd: str | None = None
    meta_line: int = 0
    created_at: int | None = None
    time: int | None = None  # of the last event
    provider: str = DEFAULT_PROVIDER
    model: str = UNKNOWN_MODEL
    title: str | None = None
    turn: int = -1
    step: int = -1
    events: list[NewEvent] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    seen_cwd: str | None = None  # from the first <environment_context>
    items: bool = False  # a JSON document, whose errors name an item, not a line
    has_meta: bool = False  # the first session meta was read (it alone makes the header)
    name_time: int | None = None  # the time in the file's name, rollout-YYYY-MM-DDTHH-MM-SS

    # ----------------------------------------------------------------------- lines

    def line(self, number: int, text: str, ended: bool) -> None:
        text = text.removesuffix("\r")
        if not text.strip():
            return
        if nests_deeper(text, MAX_JSON_DEPTH):
            raise self.error(f"the record nests deeper than {MAX_JSON_DEPTH} levels", number)
        try:
            obj = loads_exact(text, frozen=False, unique_keys=True)
        except (ValueError, RecursionError) as err:
            if not ended:
                raise self.error(
                    "the file ends in the middle of a record (Codex may still be writing "
                    "this session: import it again once it is over)",
                    number,
                ) from err
            raise self.error(f"invalid JSON ({err})", number) from err
        if not isinstance(obj, dict):
            raise self.error(f"expected a JSON object, got {json_kind(obj)}", number)
        if len(self.events) + len(self.pending) >= bounds.MAX_IMPORT_EVENTS:
            raise self.error(
                f"the session has more than {bounds.MAX_IMPORT_EVENTS:,} records, "
                "the most dsh imports",
                number,
            )
        try:
            self.record(number, obj)
        except _Bad as err:
            raise self.error(str(err), number) from err

    def document(self, first: bytes, chunks: Iterator[bytes]) -> None:
        """The first Codex (TypeScript, spring 2025) rewrote one JSON document after each
        turn, ``rollout-<date>-<id>.json``: ``{"session": {"timestamp", "id",
        "instructions"}, "items": [response items]}``. Its items have no line of their own:
        a problem names the item (or the line, for JSON that does not parse)."""
        raw = bytearray(first)
        for chunk in chunks:
            raw += chunk
            if len(raw) > bounds.MAX_LOG_BYTES:
                raise LogTooLargeError(
                    f"the file is larger than {bounds.MAX_LOG_BYTES:,} bytes, the most dsh reads"
                )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self.error("not valid UTF-8", raw.count(b"\n", 0, err.start) + 1) from err
        del raw
        if nests_deeper(text, MAX_JSON_DEPTH + 2):  # an item's data may nest MAX_JSON_DEPTH
            raise self.error(f"the document nests deeper than {MAX_JSON_DEPTH + 2} levels", 0)
        try:
            obj = loads_exact(text, frozen=False, unique_keys=True)
        except (ValueError, RecursionError) as err:
            raise self.error(f"invalid JSON ({err})", getattr(err, "lineno", 0)) from err
        del text
        self.bare, self.items = True, True
        try:
            obj = _expect(obj, dict, "the document")
            session = _expect(obj.get("session"), dict, 'the document\'s "session"')
            items = _expect(obj.get("items", []), list, 'the document\'s "items"')
            self.header(0, session, session.get("timestamp"))
            self.log_only(0, "session_meta", session, None)
        except _Bad as err:
            raise self.error(str(err), 0) from err
        for number, item in enumerate(items, 1):
            if number > bounds.MAX_IMPORT_EVENTS:
                raise self.error(
                    f"the session has more than {bounds.MAX_IMPORT_EVENTS:,} items, "
                    "the most dsh imports",
                    number,
                )
            try:
                payload = _expect(item, dict, "an item")
                self.item(number, payload, payload, None)
            except _Bad as err:
                raise self.error(str(err), number) from err

    def record(self, number: int, obj: dict[str, Any]) -> None:
        if self.bare is None:
            self.bare = "type" not in obj and _is_bare_meta(obj)
            if not self.bare and "payload" not in obj and obj.get("record_type") is None:
                raise _Bad(
                    'not a Codex rollout: the first line has neither {"type", "payload"} '
                    'nor a session meta {"id", "timestamp"}'
                )
            if self.bare:
                self.header(number, obj, obj.get("timestamp"))
                self.log_only(number, "session_meta", obj, None)
                return
        if "record_type" in obj and "type" not in obj:
            self.log_only(number, "state", obj, obj.get("timestamp"))
            return
        if "type" not in obj:
            raise _Bad('the record has no "type" (nor "record_type")')
        kind = _expect(obj["type"], str, 'a record\'s "type"')
        stamp = obj.get("timestamp")
        if self.bare:
            self.item(number, obj, obj, stamp)
            return
        if kind not in _ENVELOPE_TYPES:  # a line type newer than this reader
            self.log_only(number, kind, obj, stamp)
            return
        payload: dict[str, Any] = _expect(
            obj.get("payload"), dict, f'the "payload" of a {kind} record'
        )
        if kind == "session_meta":
            if not self.has_meta:
                self.header(number, payload, payload.get("timestamp", stamp))
            self.log_only(number, kind, obj, stamp)
        elif kind == "turn_context":
            model = _optional_str(payload, "model", "a turn_context's model")
            if model:
                self.model = model
            self.log_only(number, kind, obj, stamp)
        elif kind == "response_item":
            self.item(number, payload, obj, stamp)
        elif kind == "event_msg":
            if payload.get("type") == "thread_name_updated":
                name = payload.get("thread_name")
                if isinstance(name, str):
                    self.title = _bounded_title(name)
            self.log_only(number, kind, obj, stamp)
        else:  # compacted, world_state
            self.log_only(number, kind, obj, stamp)

    def header(self, number: int, meta: Mapping[str, Any], stamp: object) -> None:
        raw_id = meta.get("id")
        if raw_id is None:
            raw_id = meta.get("session_id")
        session_id: str = _expect(raw_id, str, "the session id")
        cwd = _optional_str(meta, "cwd", "the session cwd")
        try:
            check_header_limits(session_id, cwd)
        except InvalidEventError as err:
            raise _Bad(str(err)) from err
        self.has_meta = True
        # an empty id is no id: the file's name gives one
        self.session_id, self.cwd, self.meta_line = session_id or None, cwd or None, number
        provider = meta.get("model_provider")
        if isinstance(provider, str) and provider:
            self.provider = provider
        model = meta.get("model")
        if isinstance(model, str) and model:
            self.model = model
        at = _time(stamp)
        if at is not None and self.created_at is None:
            self.set_created(at)

    # ----------------------------------------------------------------------- items

    def item(
        self, number: int, payload: Mapping[str, Any], record: dict[str, Any], stamp: object
    ) -> None:
        kind = payload.get("type")
        if kind is None and "role" in payload:
            kind = "message"  # an item written without its type
        kind = _expect(kind, str, 'a response item\'s "type"')
        if kind == "message":
            self.message(number, payload, record, stamp)
        elif kind == "reasoning":
            blocks = _reasoning(payload)
            if blocks:
                self.assistant(number, blocks, stamp)
            else:
                self.log_only(number, "response_item", record, stamp)
        elif kind in _CALL_TYPES:
            self.assistant(number, [_tool_call(number, kind, payload)], stamp)
        elif kind in _OUTPUT_TYPES:
            self.tool_result(number, payload, stamp)
        else:
            self.log_only(number, "response_item", record, stamp)

    def message(
        self, number: int, payload: Mapping[str, Any], record: dict[str, Any], stamp: object
    ) -> None:
        role = _expect(payload.get("role"), str, "a message's role")
        blocks = _content(payload.get("content"), "a message's content")
        if role == "assistant" and blocks:
            self.assistant(number, blocks, stamp)
            return
        if role not in ("user", "developer", "system"):  # or an empty reply
            self.log_only(number, "response_item", record, stamp)
            return
        texts = [b["text"] for b in blocks if b.get("type") == "text"]
        injected = role != "user" or (bool(texts) and all(_is_injected(t) for t in texts))
        if self.seen_cwd is None:
            for text in texts:
                if text.lstrip().startswith("<environment_context>"):
                    found = _CWD_TAG.search(text)
                    self.seen_cwd = (found.group(1).strip() or None) if found else None
                    break
        if not injected:
            self.turn += 1
            self.step = -1
        data = {
            "id": _message_id(number),
            "role": "user",
            "content": blocks,
            "source": dict(PLUGIN_SOURCE) if injected else {"kind": "user"},
        }
        self.add(number, "user/message", data, True, stamp)

    def assistant(self, number: int, blocks: list[dict[str, Any]], stamp: object) -> None:
        self.step += 1
        message = {
            "id": _message_id(number),
            "role": "assistant",
            "content": blocks,
            "source": {"kind": "model", "provider": self.provider, "model": self.model},
        }
        data = {"turn": max(self.turn, 0), "step": self.step, "message": message}
        self.add(number, "assistant/message", data, True, stamp)

    def tool_result(self, number: int, payload: Mapping[str, Any], stamp: object) -> None:
        call_id = _optional_str(payload, "call_id", "a tool output's call_id")
        if call_id is None:
            call_id = _call_id(number)
        text, is_error = _output(payload.get("output"))
        block = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
        }
        message = {
            "id": _message_id(number),
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
        }
        data = {"turn": max(self.turn, 0), "step": max(self.step, 0), "message": message}
        self.add(number, "tool/result", data, True, stamp)

    # ----------------------------------------------------------------------- events

    def log_only(self, number: int, kind: str, record: dict[str, Any], stamp: object) -> None:
        name = kind if _RECORD_TYPE.fullmatch(kind) else "unknown"
        self.add(number, f"{TOOL}/{name}", record, False, stamp)

    def add(
        self, number: int, kind: str, data: dict[str, Any], surface: bool, stamp: object
    ) -> None:
        at = _time(stamp)
        if self.created_at is None:
            # the session's time from what is known by now (a growing file reads the
            # same): this line's, else the file name's; else it waits for the first
            first = at if at is not None else self.name_time
            if first is not None:
                self.set_created(first)
            else:
                self.pending.append(_Pending(number, kind, data, surface))
                return
        if at is None:
            at = self.time  # set with created_at: the previous event's, or the session's
        assert at is not None
        self.time = at
        self.events.append(self.event(number, kind, data, surface, at))

    def set_created(self, at: int) -> None:
        self.created_at = at
        pending, self.pending = self.pending, []
        for p in pending:
            self.events.append(self.event(p.number, p.type, p.data, p.surface, at))
        self.time = at

    def event(
        self, number: int, kind: str, data: dict[str, Any], surface: bool, at: int
    ) -> NewEvent:
        try:
            valid = validate_new_event(kind, data, "append" if surface else None, None, at)
        except InvalidEventError as err:
            raise self.error(str(err), number) from err
        return NewEvent(valid.type, valid.data, valid.surface_op, None, valid.time)

    def error(self, message: str, number: int) -> ForeignImportError:
        if self.items:
            where = f"item {number}: " if number else "the session: "
            return ForeignImportError(self.path, where + message, 0, self.session_id)
        return ForeignImportError(self.path, message, number, self.session_id)

    def finish(self) -> ForeignSession:
        if self.bare is None:
            raise ForeignImportError(self.path, "the file is empty: no Codex session in it")
        session_id = self.session_id or _id_from_name(self.path)
        if self.created_at is None:  # no time anywhere: the file's
            self.set_created(_mtime(self.path))
        assert self.created_at is not None
        cwd = self.cwd or self.seen_cwd
        if cwd is not None and self.cwd is None:
            try:
                check_header_limits(session_id, cwd)
            except InvalidEventError:
                cwd = None
        try:
            check_header_limits(session_id, None)
        except InvalidEventError as err:
            raise ForeignImportError(self.path, str(err), self.meta_line) from err
        file = os.path.abspath(self.path)
        return ForeignSession(
            provenance=Provenance(TOOL, file, session_id),
            created_at=self.created_at,
            cwd=cwd,
            title=self.title,
            events=self.events,
            files=(file,),
        )

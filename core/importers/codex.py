"""OpenAI Codex CLI rollouts read into dsh sessions (issue 33), one file one session.

Codex writes each session to ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``
(``CODEX_HOME`` defaults to ``~/.codex``; archived sessions move to ``archived_sessions/``).
Since September 2025 every line is an envelope ``{"timestamp", "type", "payload"}``:

* ``session_meta``: the session's ``id``, ``timestamp``, ``cwd``, ``model_provider`` (a fork
  or a sub-agent repeats one later in its file: only the first makes the header);
* ``response_item``: what the model saw and said, one Responses API item per line —
  ``message`` (role user, assistant, developer, system), ``reasoning`` (``summary`` texts;
  its ``encrypted_content`` is never shown), ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` and their ``*_output``s, and items dsh has no place for
  (``web_search_call``, ``ghost_snapshot``, ``compaction``…);
* ``event_msg``: what the UI was told — the same user and agent messages again, token
  counts, command ends…: kept log-only, so nothing is said twice;
* ``turn_context`` (the model of the turn), ``compacted`` (a summary and the old messages it
  replaces), ``world_state`` and any newer type: kept log-only.

Earlier rollouts (up to September 2025) have no envelope: line 1 is the bare session meta
``{"id", "timestamp", "instructions", "git"?}``, then bare response items and
``{"record_type": "state"}`` lines, without timestamps. The first Codex (TypeScript,
spring 2025) rewrote one pretty-printed JSON document, ``rollout-<date>-<id>.json``, after
each turn: ``{"session": {"timestamp", "id", "instructions"}, "items": [response items]}``.
All three are read here.

Every line (or item) becomes exactly one event, in file order (a growing file only adds events, so
re-importing it is incremental): a mapped response item a surface event (the conventions of
``core.importers.foreign``), anything else a log-only ``codex/<line type>`` event holding
the line's record. Text Codex injected as a user (``<environment_context>``, AGENTS.md
instructions, a shell command's output) and developer or system messages are user
messages with the plugin source ``codex``; an image is a ``[image]`` placeholder. Codex has
no title, save a ``thread_name_updated`` event in newer versions (the last one wins).

What real files do (``../shared/corpora/foreign_logs/codex``): a fork or sub-agent copies
its parent's first lines, session meta included; trimmed files hold placeholder
timestamps (``"[trimmed for fixture]"``: the previous event's time is taken) or start
without a session meta (the id then comes from the file's name); items come without their
``type``, texts under their type's name (``{"type": "output_text", "output_text": …}``),
calls without arguments and outputs as one content item; reasoning is often nothing but
``encrypted_content`` (kept log-only: nothing to show).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from core.errors import InvalidEventError
from core.importers import bounds
from core.importers.foreign import (
    SNIFF_BYTES,
    ForeignImportError,
    ForeignSession,
    ForeignTool,
    Provenance,
    json_kind,
)
from core.importers.source import (
    LogTooLargeError,
    decompressed_chunks,
    log_lines,
    open_regular_file,
)
from core.jsoncodec import dumps_js, loads_exact, utf8_len
from core.jsondepth import nests_deeper
from core.limits import MAX_JSON_DEPTH, MAX_TITLE_BYTES, check_header_limits
from core.log import NewEvent, validate_new_event
from core.logfile import LogImportError
from core.timestamps import MAX_EPOCH_MS

__all__ = [
    "IMAGE_PLACEHOLDER",
    "PLUGIN_SOURCE",
    "TOOL",
    "default_root",
    "find_files",
    "read_file",
    "read_sessions",
    "sniff",
]

TOOL: Final[ForeignTool] = "codex"
PLUGIN_SOURCE: Final[Mapping[str, str]] = {"kind": "plugin", "plugin": TOOL}
"""The source of text Codex injected into the conversation (not typed by the person)."""
IMAGE_PLACEHOLDER: Final = "[image]"
DEFAULT_PROVIDER: Final = "openai"
UNKNOWN_MODEL: Final = "unknown"

_ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
)
_RECORD_TYPE = re.compile(r"[A-Za-z0-9_.\-/]{1,64}")
_ROLLOUT_NAME = re.compile(r"rollout-.*\.jsonl?(?:\.zst)?")
_NAME_TIME = re.compile(r"rollout-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})")
_NAME_ID = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl?"
)
_HEAD_ENVELOPE = re.compile(
    rb'\A\s*\{\s*(?:"timestamp"\s*:\s*"[^"\\]{0,64}"\s*,\s*)?"type"\s*:\s*"session_meta"'
)
_DOCUMENT = re.compile(rb'\A\s*\{\s*"session"\s*:\s*\{')
_IMAGE_TAG = re.compile(r"\A\s*</?image(?: name=[^>\n]{0,256})?>\s*\Z")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_CWD_TAG = re.compile(r"<cwd>([^<\n]{1,4096})</cwd>")

# Text Codex puts into user-role messages itself (codex-rs protocol instruction markers,
# and the tags its newer versions wrap notices in).
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions for ",
    "<INSTRUCTIONS>",
    "<collaboration_mode>",
    "<skill",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<permissions instructions>",
)
_INJECTED_BLOCK = re.compile(r"\A<([a-z]+(?:_[a-z]+)+)>.*</\1>\Z", re.DOTALL)

_TEXT_BLOCKS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_IMAGE_BLOCKS = frozenset({"input_image", "image", "output_image"})
_HIDDEN_BLOCKS = frozenset({"encrypted_content"})
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})


# --------------------------------------------------------------------------- the face


def default_root() -> Path | None:
    """``$CODEX_HOME/sessions`` (``~/.codex/sessions`` when ``CODEX_HOME`` is unset)."""
    home = os.environ.get("CODEX_HOME")
    return (Path(home) if home else Path.home() / ".codex") / "sessions"


def sniff(path: Path, head: bytes) -> bool:
    """A rollout starts with a ``session_meta`` envelope, or (before September 2025) with a
    bare session meta ``{"id", "timestamp", …}``, or (spring 2025) is a JSON document
    ``{"session": {…}, …}``; a file named ``rollout-*.jsonl`` may also start with another
    envelope (a trimmed file). Never true of dsh's, the reference's,
    Claude Code's or ChatGPT's files (their first lines have other types or shapes)."""
    if _DOCUMENT.match(head):
        return True  # the first Codex's one JSON document
    end = head.find(b"\n")
    first = head if end < 0 else head[:end]
    if not first.strip():
        return False
    try:
        obj = loads_exact(first.decode("utf-8"), frozen=False)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # a first line longer than the head: its opening keys still say what it is
        return end < 0 and _HEAD_ENVELOPE.match(first) is not None
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if kind == "session_meta":
        return isinstance(obj.get("payload"), dict)
    if kind is None:
        return _is_bare_meta(obj)
    named = _ROLLOUT_NAME.fullmatch(path.name) is not None
    return named and kind in _ENVELOPE_TYPES and isinstance(obj.get("payload"), dict)


def find_files(root: Path) -> list[Path]:
    """Every ``rollout-*.jsonl`` (and ``rollout-*.json``) under ``root``, and any other
    ``*.jsonl`` or ``*.json`` whose start ``sniff`` recognises; sorted, symbolic links
    neither followed nor listed."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        for name in files:
            path = base / name
            if path.is_symlink() or not name.endswith((".jsonl", ".json", ".jsonl.zst")):
                continue
            if _ROLLOUT_NAME.fullmatch(name) or _sniff_file(path):
                found.append(path)
    return sorted(found)


def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
    """One session per file, in the order given; a file that cannot be read is a
    ``ForeignImportError`` in its place."""
    for path in paths:
        try:
            yield read_file(path)
        except ForeignImportError as err:
            yield err


def read_file(path: Path) -> ForeignSession:
    """The session of one rollout file, or ``ForeignImportError`` naming the file and line."""
    try:
        file = open_regular_file(path)
    except OSError as err:
        raise ForeignImportError(path, f"cannot read the file: {err.strerror or err}") from err
    with file:
        reader = _Reader(path, name_time=_time_from_name(path))
        try:
            chunks = decompressed_chunks(file)
            first = next(chunks, b"")
            if _DOCUMENT.match(first):
                reader.document(first, chunks)
            else:
                for line in log_lines(itertools.chain((first,), chunks)):
                    reader.line(line.number, line.text, line.ended)
        except LogImportError as err:
            if isinstance(err, ForeignImportError):
                raise
            raise ForeignImportError(path, _message(err), err.line, reader.session_id) from err
        except OSError as err:
            raise ForeignImportError(path, f"cannot read the file: {err}") from err
        return reader.finish()


# --------------------------------------------------------------------------- reading


def _sniff_file(path: Path) -> bool:
    try:
        with open_regular_file(path) as file:
            return sniff(path, file.read(SNIFF_BYTES))
    except OSError:
        return False


def _message(err: LogImportError) -> str:
    text = str(err)
    prefix = f"line {err.line}: "
    return text[len(prefix) :] if err.line and text.startswith(prefix) else text


def _is_bare_meta(obj: Mapping[str, Any]) -> bool:
    return (
        isinstance(obj.get("id"), str)
        and isinstance(obj.get("timestamp"), str)
        and "record_type" not in obj
        and "role" not in obj
    )


def _time(value: object) -> int | None:
    """Epoch ms of an ISO 8601 timestamp; ``None`` for anything else (a placeholder)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = (moment - _EPOCH) // _MS  # exact: no float on the way
    return ms if 0 <= ms <= MAX_EPOCH_MS else None


class _Bad(Exception):
    """A line that is not what Codex writes (its message names what)."""


def _expect(value: object, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _Bad(f"{what} must be {_article(names)}, got {json_kind(value)}")
    return value


def _article(names: str) -> str:
    words = {"str": "a string", "dict": "an object", "list": "a list", "NoneType": "null"}
    return " or ".join(words.get(n, n) for n in names.split(" or "))


def _optional_str(payload: Mapping[str, Any], key: str, what: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    return str(_expect(value, str, what))


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


# --------------------------------------------------------------------------- mapping


def _message_id(number: int) -> str:
    """Stable across re-imports of a growing file: the line a message was read from."""
    return f"codex:{number}"


def _call_id(number: int) -> str:
    return f"codex-call:{number}"


def _is_injected(text: str) -> bool:
    start = text.lstrip()
    return start.startswith(_INJECTED_PREFIXES) or _INJECTED_BLOCK.match(start.rstrip()) is not None


def _content(value: object, what: str) -> list[dict[str, Any]]:
    """Codex content items as dsh blocks: texts as text, images as a placeholder,
    encrypted content left out, any other item as ``[<type>]``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    items = _expect(value, list, what)
    kinds = [item.get("type") if isinstance(item, dict) else None for item in items]
    blocks: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        item = _expect(item, dict, f"an item of {what}")
        kind = item.get("type")
        text = item.get("text")
        if text is None and isinstance(kind, str) and isinstance(item.get(kind), str):
            text = item[kind]  # {"type": "output_text", "output_text": …} in a real file
        if kind in _HIDDEN_BLOCKS:
            continue
        if isinstance(text, str) and _IMAGE_TAG.match(text) and _beside_image(kinds, index):
            continue  # the <image name=…> … </image> Codex wraps an image in
        if kind in _IMAGE_BLOCKS:
            blocks.append({"type": "text", "text": IMAGE_PLACEHOLDER})
        elif text is not None:
            blocks.append({"type": "text", "text": _expect(text, str, f"a text of {what}")})
        elif kind in _TEXT_BLOCKS:
            continue  # a text item without its text: nothing to show
        elif kind == "refusal" and isinstance(item.get("refusal"), str):
            blocks.append({"type": "text", "text": item["refusal"]})
        elif kind == "input_file":
            name = item.get("filename")
            shown = f"[file: {name}]" if isinstance(name, str) else "[file]"
            blocks.append({"type": "text", "text": shown})
        else:
            shown = kind if isinstance(kind, str) and _RECORD_TYPE.fullmatch(kind) else "content"
            blocks.append({"type": "text", "text": f"[{shown}]"})
    return blocks


def _beside_image(kinds: list[Any], index: int) -> bool:
    before = kinds[index - 1] if index > 0 else None
    after = kinds[index + 1] if index + 1 < len(kinds) else None
    return before in _IMAGE_BLOCKS or after in _IMAGE_BLOCKS


def _reasoning(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The summary texts (and raw reasoning texts, when a model gives them) as reasoning
    blocks; ``encrypted_content`` is never read."""
    blocks: list[dict[str, Any]] = []
    for key in ("summary", "content"):
        value = payload.get(key)
        if value is None:
            continue
        for item in _expect(value, list, f"a reasoning {key}"):
            item = _expect(item, dict, f"an item of a reasoning {key}")
            if item.get("type") in _HIDDEN_BLOCKS:
                continue
            text = _expect(item.get("text"), str, f"a text of a reasoning {key}")
            if text:
                blocks.append({"type": "reasoning", "text": text})
    return blocks


def _tool_call(number: int, kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    call_id = _optional_str(payload, "call_id", f"a {kind}'s call_id")
    if call_id is None:
        call_id = _optional_str(payload, "id", f"a {kind}'s id") or _call_id(number)
    if kind == "local_shell_call":
        name = "local_shell"
        arguments = dumps_js(payload.get("action"))
    else:
        name = _optional_str(payload, "name", f"a {kind}'s name") or kind
        if kind == "custom_tool_call":
            arguments = dumps_js({"input": _optional_str(payload, "input", "a tool input") or ""})
        else:
            raw = payload.get("arguments")
            if raw is None:
                arguments = "{}"
            elif isinstance(raw, str):
                arguments = raw
            else:
                arguments = dumps_js(_expect(raw, (dict, list), f"a {kind}'s arguments"))
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _output(value: object) -> tuple[str, bool]:
    """A tool output's text and whether it failed: a string; content items; the older
    ``{"content", "success"}``; anything else as its JSON."""
    if value is None:
        return "", False
    if isinstance(value, str):
        return value, False
    if isinstance(value, list):
        parts = [b["text"] for b in _content(value, "a tool output")]
        return "\n".join(parts), False
    if isinstance(value, dict):
        if "content" in value:
            content, success = value.get("content"), value.get("success")
            text = content if isinstance(content, str) else _output(content)[0]
            return text, success is False
        if value.get("type") in _TEXT_BLOCKS | _IMAGE_BLOCKS:
            return "\n".join(b["text"] for b in _content([value], "a tool output")), False
    return dumps_js(value), False


def _bounded_title(name: str) -> str | None:
    """A thread name cut to what a dsh title may hold (``MAX_TITLE_BYTES``)."""
    title = name.strip()
    if not title:
        return None
    while utf8_len(title) > MAX_TITLE_BYTES:
        title = title[: max(len(title) - (utf8_len(title) - MAX_TITLE_BYTES + 3) // 4, 0)]
    return title or None


def _id_from_name(path: Path) -> str:
    """A file without a session meta: the id its name ends with, else the name itself."""
    found = _NAME_ID.search(path.name)
    if found:
        return found.group(1)
    stem = path.name.removesuffix(".zst").removesuffix(".jsonl").removesuffix(".json")
    return stem or path.name


def _time_from_name(path: Path) -> int | None:
    found = _NAME_TIME.match(path.name)
    if not found:
        return None
    y, mo, d, h, mi, s = (int(g) for g in found.groups())
    try:
        return int(datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        return None


def _mtime(path: Path) -> int:
    try:
        return max(0, min(int(path.stat().st_mtime * 1000), MAX_EPOCH_MS))
    except OSError:
        return 0

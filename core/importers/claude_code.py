"""Claude Code session transcripts read into dsh sessions (issue 33).

Claude Code keeps one JSONL file per session under ``~/.claude/projects/<project-dir>/``
(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude``), named after the session's id; each line
is one record ``{"type", "uuid", "parentUuid", "sessionId", "timestamp", "cwd",
"isSidechain", "message"?, …}``. Records link to their parent (``parentUuid``), so a
file is a tree: a rewind or an edited prompt starts a new branch, and the conversation
is the *main chain*, the path from the last message that is not a sidechain back to the
root. This module follows the conventions of ``core.importers.foreign``:

* the surface is the main chain's ``user`` and ``assistant`` messages. A person's text
  is a ``user/message``; text Claude Code wrote in the person's place (a slash command's
  markup and output, caveats, hook output, ``[Request interrupted by user]``, the
  compaction summary) is a ``user/message`` of source ``{"kind": "plugin", "plugin":
  "claude-code"}``, shown but never referenced. One reply written as several lines (one
  per content block, the same ``message.id``) is one ``assistant/message`` at its first
  line's place; ``thinking`` is a ``reasoning`` block, ``tool_use`` a ``tool-call`` block
  (its ``input`` as a JSON string), each ``tool_result`` a ``tool/result``. An API error
  Claude Code stored as an assistant message (model ``<synthetic>``) is kept as it is: an
  ``assistant/message``. An image is the text ``[image]`` (its base64 data is dropped as
  soon as the line is read, wherever it is); an assistant block of another type is kept,
  renamed ``claude-code/<type>`` so that dsh ignores it, when its JSON is at most
  ``MAX_KEPT_BLOCK_BYTES`` (else only its size is kept);
* everything else is a log-only ``claude-code/<type>`` event holding the record as it is
  (images aside): lines of other types (``progress``, ``system``, ``summary``,
  ``file-history-snapshot``, …, unknown ones too), meta lines (``isMeta``), sidechains
  (``isSidechain``: a subagent's conversation), messages off the main chain (abandoned
  branches) and every line of a subagent's transcript (``agent-*.jsonl`` beside the
  session or under ``<session>/subagents/``: these reuse the parent's ``sessionId`` and
  so are read as part of the parent session, after its own file). A transcript of a
  subagent whose session is not among the files, a file of only ``summary`` or
  snapshot lines, or an empty file holds no conversation and gives no session;
* a ``compact_boundary`` system line has a null ``parentUuid``: the chain goes on through
  its ``logicalParentUuid`` (else through the message before it in the file), so the
  messages before a compaction stay on the surface; the summary Claude Code then writes
  as a user message (``isCompactSummary``) is injected text (plugin source), not a dsh
  compaction checkpoint: the messages it summarises are all there;
* a session is every record carrying its ``sessionId``, whatever the file (Claude Code
  writes a resumed session on in the same file, a subagent in another); a record without
  one belongs to its file's first session (the file's name when none has one). Files
  are grouped by a cheap first pass over their bytes, then each session is read whole,
  one at a time. A record whose ``uuid`` was already read (a resumed transcript copies
  its history) is skipped, and so is a record without a ``uuid`` (other than a message)
  whose text was already read (the ``summary`` lines every resumed file starts with). A
  session continued under a new ``sessionId`` (older versions) stays a session of its
  own: its first record's parent is then in another session, and its chain starts there;
* ``timestamp`` (ISO 8601) becomes epoch ms (a placeholder that is no time: the previous
  record's time); ``cwd`` and the model are kept as they are; the title is the last
  ``custom-title``, else the last ``summary`` whose ``leafUuid`` is a record of the
  session, else the last ``summary`` of its files.

A line that is not a JSON object, or whose fields have the wrong types, spoils its
session: a ``ForeignImportError`` naming the file and line comes in its place.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid as uuidlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from hashlib import blake2b
from pathlib import Path
from typing import Any

from core.errors import InvalidEventError
from core.importers.foreign import (
    SNIFF_BYTES,
    ForeignImportError,
    ForeignSession,
    ForeignTool,
    Provenance,
)
from core.importers.source import log_lines, open_regular_file
from core.jsoncodec import dumps_js, loads_exact, utf8_len
from core.limits import MAX_JSON_DEPTH, check_header_limits
from core.log import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    NewEvent,
    SurfaceOp,
    check_new_event,
)
from core.logfile import LogImportError, check_record_depth
from core.timestamps import check_epoch_ms

__all__ = [
    "MAX_KEPT_BLOCK_BYTES",
    "TOOL",
    "default_root",
    "find_files",
    "read_sessions",
    "sniff",
]

TOOL: ForeignTool = "claude-code"
PROVIDER = "anthropic"
PLUGIN_SOURCE: Mapping[str, str] = {"kind": "plugin", "plugin": TOOL}
MAX_KEPT_BLOCK_BYTES = 64 * 1024
"""The most JSON of an assistant block dsh has no type for that is kept in the message."""
IMAGE_TEXT = "[image]"

_MESSAGE_TYPES = ("user", "assistant")
_INJECTED_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<command-stdout>",
    "<command-name>",
    "<command-message>",
    "<task-notification>",
    "Caveat: The messages below were generated by the user while running local commands",
    "[Request interrupted by user",
    "This session is being continued from a previous conversation",
)
_SHALLOW = MAX_JSON_DEPTH - 16
"""A line with fewer brackets nests less deep, and so does every event made of it (an
event wraps a record's parts in at most one level more than the record had)."""
_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_SESSION_ID_KEY = re.compile(r'"sessionId"\s*:\s*"((?:[^"\\]|\\.)*)"')
_SNIFF_KEYS = ('"parentUuid"', '"sessionId"', '"leafUuid"', '"isSidechain"')


# --------------------------------------------------------------------------- the face


def default_root() -> Path | None:
    """``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects``."""
    config = os.environ.get("CLAUDE_CONFIG_DIR")
    base = Path(config).expanduser() if config else Path.home() / ".claude"
    return base / "projects"


def find_files(root: Path) -> list[Path]:
    """Every ``*.jsonl`` under ``root`` (under its ``projects`` folder when ``root`` is a
    Claude Code configuration folder), sorted; symlinks are not followed."""
    projects = root / "projects"
    if projects.is_dir() and not projects.is_symlink() and root.name != "projects":
        root = projects
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            path = Path(folder) / name
            if name.endswith(".jsonl") and not path.is_symlink() and path.is_file():
                found.append(path)
    return sorted(found)


def sniff(path: Path, head: bytes) -> bool:
    """Whether ``head`` starts like a Claude Code transcript: its first message record is a
    ``user`` or ``assistant`` record with a ``message`` object, or a record with Claude
    Code's keys (``parentUuid``, ``sessionId``, ``leafUuid``, ``isSidechain``); the line
    types only Claude Code writes (``summary``, ``file-history-snapshot``, …) before it
    count too."""
    del path
    text = head[:SNIFF_BYTES].decode("utf-8", errors="replace")
    lines = text.split("\n")
    seen = False  # a line type only Claude Code writes
    for index, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        complete = index < len(lines) - 1 or len(head) < SNIFF_BYTES
        if not complete:  # cut by the sniff window: only its start can be looked at
            return seen or (line.startswith("{") and _looks_like_claude_text(line))
        try:
            obj = loads_exact(line, frozen=False)
        except (ValueError, RecursionError):
            return False
        if not isinstance(obj, dict) or _other_tool(obj):
            return False
        kind = obj.get("type")
        if kind in _CLAUDE_ONLY_TYPES:
            seen = True
            continue
        if kind in _MESSAGE_TYPES:
            return isinstance(obj.get("message"), dict)
        return isinstance(kind, str) and any(key.strip('"') in obj for key in _SNIFF_KEYS)
    return seen


_CLAUDE_ONLY_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "custom-title",
        "permission-mode",
        "last-prompt",
    }
)


def _looks_like_claude_text(line: str) -> bool:
    start = line[:4096]
    typed = re.search(r'"type"\s*:\s*"(user|assistant|summary|system|progress)"', start)
    return typed is not None and sum(key in start for key in _SNIFF_KEYS) >= 2


def _other_tool(obj: Mapping[str, Any]) -> bool:
    """A record of Codex (``payload``) or of dsh itself (``seq`` / ``surface_op``)."""
    return any(key in obj for key in ("payload", "seq", "surface_op", "surfaceOp"))


# --------------------------------------------------------------------------- grouping


@dataclass(slots=True)
class _File:
    path: Path
    home: str | None = None  # the first sessionId of the file
    sessions: dict[str, None] = field(default_factory=dict)  # ordered
    error: ForeignImportError | None = None

    is_subagent: bool = False

    def __post_init__(self) -> None:
        self.is_subagent = (
            self.path.name.startswith("agent-") or self.path.parent.name == "subagents"
        )

    @property
    def owner(self) -> str:
        """The session the file's records without a sessionId belong to: its first
        session, else one of its own (two such files of one name are two sessions)."""
        return self.home if self.home is not None else f"\x00{self.path}"


def _session_id(key: str) -> str:
    """The id of the session grouped under ``key``: a file's name for a file without."""
    return Path(key[1:]).stem if key.startswith("\x00") else key


def _scan(path: Path) -> _File:
    """The sessions ``path`` holds: every ``"sessionId": "…"`` pair in its text (a line
    holding several is parsed to know which is the record's own)."""
    found = _File(path)
    try:
        with open_regular_file(path) as file:
            for line in log_lines(_chunks(file)):
                text = line.text
                if '"sessionId"' not in text:
                    continue
                matches = _SESSION_ID_KEY.findall(text)
                if len(matches) == 1:
                    ids = [_json_string(matches[0])]
                else:  # the key also inside a text: the record says which is its own
                    ids = [_record_session_id(text)]
                for sid in ids:
                    if sid is None:
                        continue
                    if found.home is None:
                        found.home = sid
                    found.sessions[sid] = None
    except LogImportError as err:
        found.error = ForeignImportError(path, _bare(err), err.line)
    except OSError as err:
        found.error = ForeignImportError(path, f"cannot be read: {err.strerror or err}")
    found.sessions.setdefault(found.owner)
    return found


def _bare(err: LogImportError) -> str:
    """The error's words without the ``line N: `` its text starts with."""
    text = str(err)
    prefix = f"line {err.line}: "
    return text[len(prefix) :] if err.line and text.startswith(prefix) else text


def _chunks(file: Any) -> Iterator[bytes]:
    while chunk := file.read(1 << 20):
        yield chunk


def _json_string(escaped: str) -> str | None:
    if "\\" not in escaped:
        return escaped
    try:
        value = loads_exact('"' + escaped + '"', frozen=False)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _record_session_id(text: str) -> str | None:
    try:
        obj = loads_exact(text, frozen=False)
    except (ValueError, RecursionError):
        return None
    sid = obj.get("sessionId") if isinstance(obj, dict) else None
    return sid if isinstance(sid, str) else None


# --------------------------------------------------------------------------- reading


def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
    """The sessions of ``paths`` (grouped by ``sessionId``), one at a time, in the order
    the files are given."""
    files = [_scan(Path(p)) for p in paths]
    order: dict[str, list[_File]] = {}
    spoiled: dict[str, ForeignImportError] = {}
    for scanned in files:
        for sid in scanned.sessions:
            order.setdefault(sid, []).append(scanned)
            if scanned.error is not None and sid not in spoiled:
                spoiled[sid] = scanned.error
    for key, group in order.items():
        sid = _session_id(key)
        if key in spoiled:
            error = spoiled[key]
            yield ForeignImportError(error.file, _bare(error), error.line, sid)
            continue
        # the session's own file first, subagents' transcripts last
        group.sort(key=lambda f: (f.is_subagent, f.path.stem != sid))
        try:
            session = _read_session(key, group)
        except ForeignImportError as err:
            err.original_id = sid
            yield err
            continue
        if session is not None:
            yield session


@dataclass(slots=True)
class _Record:
    obj: dict[str, Any]
    file: Path
    line: int
    time: int | None
    log_only: bool  # a subagent's transcript
    key: str  # its uuid, or one made up for a record without
    shallow: bool  # too few brackets to nest near MAX_JSON_DEPTH: its events need no check


def _read_session(key: str, group: list[_File]) -> ForeignSession | None:
    sid = _session_id(key)
    records: list[_Record] = []
    seen: set[str] = set()
    for entry in group:
        made_up = 0
        try:
            with open_regular_file(entry.path) as file:
                for line in log_lines(_chunks(file)):
                    if not line.text.strip():
                        continue
                    obj = _parse(line.text, line.number, not line.ended)
                    own = obj.get("sessionId")
                    if own is None:
                        own = entry.owner
                    elif not isinstance(own, str):
                        raise LogImportError("sessionId must be a string", line.number)
                    elif own not in entry.sessions:
                        raise LogImportError(
                            "the sessionId of this record is written in a form dsh does not "
                            "read (an escaped key)",
                            line.number,
                        )
                    if own != key:
                        continue
                    record_key = obj.get("uuid")
                    if record_key is not None and not isinstance(record_key, str):
                        raise LogImportError("uuid must be a string", line.number)
                    _check_record(obj, line.number)
                    if record_key is None and obj["type"] in _MESSAGE_TYPES:
                        made_up += 1
                        record_key = _new_uuid(f"{sid}/{entry.path.name}/{made_up}")
                    elif record_key is None:  # the same text is the same record
                        record_key = (
                            "\x00" + blake2b(line.text.encode(), digest_size=16).hexdigest()
                        )
                    if record_key in seen:
                        continue  # the same record again (a resumed transcript's copy)
                    seen.add(record_key)
                    time = _timestamp(obj, line.number)
                    records.append(
                        _Record(
                            obj,
                            entry.path,
                            line.number,
                            time,
                            entry.is_subagent,
                            record_key,
                            _is_shallow(line.text),
                        )
                    )
        except LogImportError as err:
            raise ForeignImportError(entry.path, _bare(err), err.line, sid) from err
        except OSError as err:
            raise ForeignImportError(entry.path, f"cannot be read: {err.strerror or err}") from err
    main = [r for r in records if _is_main_message(r)]
    if not main:
        return None
    used = {r.file for r in records}  # not a file that only quoted the session's id
    return _build(sid, [f for f in group if f.path in used], records, main[-1])


def _is_shallow(text: str) -> bool:
    """Whether every event made of this line is sure to pass the store's depth check."""
    return text.count("{") + text.count("[") < _SHALLOW


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = repr(key)
                raise ValueError(f"duplicate key {shown if len(shown) <= 60 else shown[:59] + '…'}")
            seen.add(key)
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:24]}{'…' if len(text) > 24 else ''} is too large a number")
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_object, parse_float=_finite, parse_constant=_no_constant
)
"""Strict JSON (what ``core.log`` stores): no repeated key, no ``NaN`` or ``Infinity``, no
number too large for a float. A line of the UTF-8 file holds no lone surrogate, so this is
``loads_exact``'s reading too."""


def _parse(text: str, number: int, torn: bool) -> dict[str, Any]:
    try:
        obj = _DECODER.decode(text)
    except (ValueError, RecursionError) as err:
        check_record_depth(text, number)
        if torn:
            raise LogImportError("the file ends in the middle of a record", number) from err
        raise LogImportError(f"invalid JSON ({err})", number) from err
    if not isinstance(obj, dict):
        raise LogImportError("expected a JSON object", number)
    return obj


def _check_record(obj: dict[str, Any], number: int) -> None:
    """The types of the fields this reader uses; images' data dropped."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise LogImportError("a record needs a string type", number)
    for name in ("parentUuid", "logicalParentUuid", "cwd", "timestamp"):
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise LogImportError(f"{name} must be a string or null", number)
    for name in ("isSidechain", "isMeta", "isCompactSummary", "isApiErrorMessage"):
        value = obj.get(name)
        if value is not None and not isinstance(value, bool):
            raise LogImportError(f"{name} must be true or false", number)
    message = obj.get("message")
    if kind in _MESSAGE_TYPES:
        if not isinstance(message, dict):
            raise LogImportError(f"a {kind} record needs a message object", number)
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                _check_block(block, number)
        elif not isinstance(content, str):
            raise LogImportError("message content must be a string or a list", number)
        for name in ("id", "model"):
            value = message.get(name)
            if value is not None and not isinstance(value, str):
                raise LogImportError(f"message {name} must be a string", number)
    elif isinstance(message, dict) and isinstance(message.get("content"), list):
        for block in message["content"]:
            if isinstance(block, dict):
                _drop_image_data(block)


_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking",),
    "tool_use": ("id", "name"),
    "server_tool_use": ("id", "name"),
    "tool_result": ("tool_use_id",),
}


def _check_block(block: Any, number: int) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise LogImportError("a content block must be an object with a string type", number)
    for name in _BLOCK_FIELDS.get(block["type"], ()):
        if not isinstance(block.get(name), str):
            raise LogImportError(f"a {block['type']} block needs a string {name}", number)
    if block["type"] == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise LogImportError(
                        "a tool_result's content must hold objects with a string type", number
                    )
                if part["type"] == "text" and not isinstance(part.get("text"), str):
                    raise LogImportError("a text block needs a string text", number)
                _drop_image_data(part)
        elif content is not None and not isinstance(content, str):
            raise LogImportError("a tool_result's content must be a string or a list", number)
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise LogImportError("a tool_result's is_error must be true or false", number)
    _drop_image_data(block)


def _drop_image_data(block: dict[str, Any]) -> None:
    """An image's (or document's) base64 data replaced by its size, in place."""
    source = block.get("source")
    if block.get("type") in ("image", "document") and isinstance(source, dict):
        data = source.get("data")
        if isinstance(data, str) and len(data) > 64:
            source["data"] = f"[{len(data):,} characters of base64 omitted by dsh]"


def _timestamp(obj: Mapping[str, Any], number: int) -> int | None:
    value = obj.get("timestamp")
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None  # a placeholder (a trimmed or templated file): the previous time
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return check_epoch_ms(round(moment.timestamp() * 1000), "timestamp")
    except (InvalidEventError, OverflowError, ValueError) as err:
        raise LogImportError(str(err), number) from err


def _is_main_message(record: _Record) -> bool:
    obj = record.obj
    return (
        obj["type"] in _MESSAGE_TYPES and not record.log_only and obj.get("isSidechain") is not True
    )


# --------------------------------------------------------------------------- the chain


def _main_chain(records: list[_Record], leaf: _Record) -> set[str]:
    """The keys of the records from ``leaf`` back to its root."""
    by_key: dict[str, int] = {}
    previous_message: dict[str, str] = {}  # key -> the message before it in its file
    last: str | None = None
    for index, record in enumerate(records):
        by_key[record.key] = index
        if last is not None:
            previous_message[record.key] = last
        if record.obj["type"] in _MESSAGE_TYPES and not record.log_only:
            last = record.key
    chain: set[str] = set()
    key: str | None = leaf.key
    while key is not None and key not in chain:
        chain.add(key)
        obj = records[by_key[key]].obj
        parent = obj.get("parentUuid")
        if parent is None or parent not in by_key:
            logical = obj.get("logicalParentUuid")
            if isinstance(logical, str) and logical in by_key:
                parent = logical
            elif "parentUuid" not in obj or obj.get("subtype") == "compact_boundary":
                # no link at all (a hand-written transcript), or a compaction's boundary
                parent = previous_message.get(key)
            else:
                parent = None
        key = parent
    return chain


# --------------------------------------------------------------------------- events


@dataclass(slots=True)
class _Turns:
    turn: int = -1
    step: int = -1

    def person(self) -> None:
        self.turn += 1
        self.step = -1

    def reply(self) -> None:
        self.step += 1

    @property
    def place(self) -> dict[str, int]:
        return {"turn": max(self.turn, 0), "step": max(self.step, 0)}


def _build(sid: str, group: list[_File], records: list[_Record], leaf: _Record) -> ForeignSession:
    chain = _main_chain(records, leaf)
    times = [r.time for r in records if r.time is not None]
    created_at = times[0] if times else _mtime(group[0].path)
    cwd = next(
        (r.obj["cwd"] for r in records if r.key in chain and isinstance(r.obj.get("cwd"), str)),
        None,
    )
    try:
        check_header_limits(sid, cwd)
    except InvalidEventError as err:
        raise ForeignImportError(group[0].path, str(err), 0, sid) from err
    events: list[NewEvent] = []
    turns = _Turns()
    replies: dict[str, tuple[int, dict[str, Any], int, bool]] = {}  # message.id -> event
    time = created_at
    for record in records:
        if record.time is not None:
            time = record.time
        obj = record.obj
        on_surface = (
            record.key in chain and _is_main_message(record) and obj.get("isMeta") is not True
        )
        try:
            if not on_surface:
                events.append(_log_only(record, time))
            elif obj["type"] == "user":
                before, turn = len(events), turns.turn
                events.extend(_user_events(record, time, turns))
                if len(events) == before:
                    events.append(_log_only(record, time))
                if turns.turn != turn:
                    replies.clear()  # a reply never spans a person's message
            else:
                message = obj["message"]
                message_id = message.get("id")
                merged = replies.get(message_id) if isinstance(message_id, str) else None
                if merged is not None:
                    index, data, first_time, shallow = merged
                    shallow = shallow and record.shallow
                    data["message"]["content"].extend(_assistant_blocks(message["content"]))
                    if isinstance(message.get("usage"), dict):
                        data["usage"] = message["usage"]
                    events[index] = _checked(ASSISTANT_MESSAGE, data, first_time, shallow)
                    replies[message_id] = (index, data, first_time, shallow)
                    continue
                turns.reply()
                data = _assistant_data(record, turns)
                if isinstance(message_id, str):
                    replies[message_id] = (len(events), data, time, record.shallow)
                events.append(_checked(ASSISTANT_MESSAGE, data, time, record.shallow))
        except InvalidEventError as err:
            raise ForeignImportError(record.file, str(err), record.line, sid) from err
    return ForeignSession(
        provenance=Provenance(TOOL, os.fspath(group[0].path), sid),
        created_at=created_at,
        cwd=cwd,
        title=_title(records),
        events=events,
        files=tuple(os.fspath(f.path) for f in group),
    )


def _new_uuid(seed: str) -> str:
    """A stable id for a record without a uuid (the same on every import)."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, seed))


def _mtime(path: Path) -> int:
    try:
        return max(0, int(path.stat().st_mtime * 1000))
    except OSError:
        return 0


def _checked(kind: str, data: Mapping[str, Any], time: int, shallow: bool = False) -> NewEvent:
    """The event, its data checked as the store will check it (its depth above all) unless
    it is ``shallow`` (made of a line of few brackets)."""
    surface: SurfaceOp | None = (
        "append" if kind in (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT) else None
    )
    if not shallow:
        check_new_event(kind, data, surface, None, time)
    return NewEvent(kind, data, surface_op=surface, time=time)


def _log_only(record: _Record, time: int) -> NewEvent:
    kind = record.obj.get("type")
    name = kind if isinstance(kind, str) and _TYPE_NAME.fullmatch(kind) else "unknown"
    return _checked(f"{TOOL}/{name}", record.obj, time, record.shallow)


def _user_events(record: _Record, time: int, turns: _Turns) -> list[NewEvent]:
    obj = record.obj
    content = obj["message"]["content"]
    blocks: list[dict[str, Any]] = []
    events: list[NewEvent] = []
    if isinstance(content, str):
        blocks.append({"type": "text", "text": content})
    else:
        results = 0
        for block in content:
            kind = block["type"]
            if kind == "tool_result":
                results += 1
                message_id = record.key if results == 1 else f"{record.key}#{results}"
                events.append(_tool_result(block, message_id, time, turns, record.shallow))
            elif kind == "text":
                blocks.append({"type": "text", "text": block["text"]})
            elif kind == "image":
                blocks.append({"type": "text", "text": IMAGE_TEXT})
            else:
                blocks.append({"type": "text", "text": f"[{_type_label(kind)}]"})
    if blocks:
        text = "\n".join(b["text"] for b in blocks).lstrip()
        injected = (
            obj.get("isCompactSummary") is True
            or obj.get("isVisibleInTranscriptOnly") is True
            or text.startswith(_INJECTED_PREFIXES)
        )
        if not injected:
            turns.person()
        message = {
            "id": record.key if not events else f"{record.key}#text",
            "role": "user",
            "content": blocks,
            "source": dict(PLUGIN_SOURCE) if injected else {"kind": "user"},
        }
        events.append(_checked(USER_MESSAGE, message, time, record.shallow))
    return events


def _type_label(kind: str) -> str:
    return kind if _TYPE_NAME.fullmatch(kind) else "unknown block"


def _tool_result(
    block: dict[str, Any], message_id: str, time: int, turns: _Turns, shallow: bool
) -> NewEvent:
    raw = block.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(raw, str):
        parts.append({"type": "text", "text": raw})
    elif isinstance(raw, list):
        for part in raw:
            if part["type"] == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif part["type"] == "image":
                parts.append({"type": "text", "text": IMAGE_TEXT})
            else:
                parts.append({"type": "text", "text": f"[{_type_label(part['type'])}]"})
    call_id = block["tool_use_id"]
    data = {
        **turns.place,
        "message": {
            "id": message_id,
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": parts,
                    "isError": block.get("is_error") is True,
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        },
    }
    return _checked(TOOL_RESULT, data, time, shallow)


def _assistant_data(record: _Record, turns: _Turns) -> dict[str, Any]:
    message = record.obj["message"]
    model = message.get("model")
    source: dict[str, Any] = {
        "kind": "model",
        "provider": PROVIDER,
        "model": model if isinstance(model, str) else "",
    }
    data: dict[str, Any] = {
        **turns.place,
        "message": {
            "id": record.key,
            "role": "assistant",
            "content": _assistant_blocks(message["content"]),
            "source": source,
        },
    }
    if isinstance(message.get("usage"), dict):
        data["usage"] = message["usage"]
    return data


def _assistant_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for block in content:
        kind = block["type"]
        if kind == "text":
            blocks.append({"type": "text", "text": block["text"]})
        elif kind == "thinking":
            blocks.append({"type": "reasoning", "text": block["thinking"]})
        elif kind == "redacted_thinking":
            blocks.append({"type": "reasoning", "text": "[redacted thinking]"})
        elif kind in ("tool_use", "server_tool_use"):
            try:
                arguments = dumps_js(block.get("input", {}))
            except TypeError as err:
                raise InvalidEventError(f"a tool_use input is not JSON: {err}") from err
            blocks.append(
                {
                    "type": "tool-call",
                    "id": block["id"],
                    "name": block["name"],
                    "arguments": arguments,
                }
            )
        elif kind == "image":
            blocks.append({"type": "text", "text": IMAGE_TEXT})
        else:
            blocks.append(_kept_block(block))
    return blocks


def _kept_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = f"{TOOL}/{_type_label(block['type'])}"
    try:
        size = utf8_len(dumps_js(block))
    except TypeError:
        size = MAX_KEPT_BLOCK_BYTES + 1
    if size <= MAX_KEPT_BLOCK_BYTES:
        return {"type": kind, "block": block}
    return {"type": kind, "omittedBytes": size}


# --------------------------------------------------------------------------- title


def _title(records: list[_Record]) -> str | None:
    custom: str | None = None
    linked: str | None = None
    other: str | None = None
    keys = {r.key for r in records}
    for record in records:
        obj = record.obj
        kind = obj["type"]
        if kind == "custom-title" and isinstance(obj.get("customTitle"), str):
            custom = obj["customTitle"]
        elif kind == "summary" and isinstance(obj.get("summary"), str):
            if obj.get("leafUuid") in keys:
                linked = obj["summary"]
            else:
                other = obj["summary"]
    for title in (custom, linked, other):
        if title is not None and title.strip():
            return _bounded_title(title)
    return None


def _bounded_title(title: str) -> str:
    """One line of at most 200 characters."""
    line = " ".join(title.split())
    return line if len(line) <= 200 else line[:199] + "…"

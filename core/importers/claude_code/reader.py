"""The reader's face (the ``ForeignFormat`` of ``core.importers.foreign``): which files
are Claude Code transcripts, where they are, and their sessions, one at a time."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any

from core.importers.claude_code.events import _build, _new_uuid
from core.importers.claude_code.grouping import _bare, _chunks, _File, _scan, _session_id
from core.importers.claude_code.records import (
    _MESSAGE_TYPES,
    _check_record,
    _is_main_message,
    _is_shallow,
    _parse,
    _Record,
    _timestamp,
)
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from core.importers.source import log_lines, open_regular_file
from core.jsoncodec import loads_exact
from core.logfile import LogImportError

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

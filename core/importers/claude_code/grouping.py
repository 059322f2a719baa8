"""Which sessions each file holds (its ``sessionId`` pairs, found without parsing every
line), so that a session's records are read from every file that carries them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.importers.foreign import ForeignImportError
from core.importers.source import log_lines, open_regular_file
from core.jsoncodec import loads_exact
from core.logfile import LogImportError

_SESSION_ID_KEY = re.compile(r'"sessionId"\s*:\s*"((?:[^"\\]|\\.)*)"')


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

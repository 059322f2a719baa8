"""Sessions of other AI tools (Claude Code, Codex, ChatGPT) read into dsh sessions (issue 33).

Each tool's format is read by one module beside this one (``claude_code``, ``codex``,
``chatgpt``), and each module has the same face (``ForeignFormat``): it says whether a
file is one of its logs (``sniff``), which files under a folder are (``find_files``),
where the tool keeps them (``default_root``) and reads them into ``ForeignSession``\\ s,
one session at a time (memory is bounded by one session, never by the folder).

A reader only maps a tool's records to dsh events (``core.log``'s types and the message
shapes of SPEC §2.1); storing, re-importing and recording where a session came from (a
``session/source`` event at seq 0) is ``core.importers.foreign_import``'s job, the same
for every tool.

Conventions every reader follows, so that the three tools look alike in dsh:

* a person's message: ``user/message``, ``surface_op="append"``, data
  ``{"id", "role": "user", "content": [{"type": "text", "text"}], "source": {"kind":
  "user"}}``; text the tool injected (environment context, command output, a hidden system
  message): the same with ``"source": {"kind": "plugin", "plugin": TOOL}`` — kept on the
  surface for the transcript, never sent in a reference (SPEC §4.6);
* a model's reply: ``assistant/message``, ``"append"``, data ``{"turn", "step",
  "message": {"id", "role": "assistant", "content": [text | reasoning | tool-call blocks],
  "source": {"kind": "model", "provider", "model"}}}``; thinking as ``reasoning`` blocks,
  tool calls as ``tool-call`` blocks whose ``arguments`` is a JSON string;
* a tool's output: ``tool/result``, ``"append"``, data ``{"turn", "step", "message":
  {"id", "role": "user", "content": [{"type": "tool-result", "toolCallId", "content":
  [{"type": "text", "text"}], "isError"}], "source": {"kind": "tool", "callId"}}}``;
* anything else the tool wrote (a line type dsh has no place for, a sidechain, a meta line,
  another branch of a conversation): a log-only event (no ``surface_op``) of type
  ``TOOL/RECORD-TYPE`` (``claude-code/progress``, ``codex/event_msg``, ``chatgpt/node``)
  holding the record, so nothing is lost and the transcript shows it as an unknown item;
* every event has its ``time`` (epoch ms) from the record, else the previous event's (the
  session's ``created_at`` at first); ``turn`` counts the person's messages from 0,
  ``step`` the model's replies within a turn from 0;
* the title is ``ForeignSession.title`` (not an event): the importer writes it.

Every problem with a file is a ``ForeignImportError`` naming the file and the 1-based line
(0: not about one line); a reader yields it in place of the session it spoiled and goes on
with the next, and nothing of that session is stored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from core.log import SESSION_SOURCE, NewEvent
from core.logfile import LogImportError

__all__ = [
    "FOREIGN_TOOLS",
    "ForeignFormat",
    "ForeignImportError",
    "ForeignSession",
    "ForeignTool",
    "Provenance",
    "json_kind",
    "source_event",
]

ForeignTool = Literal["claude-code", "codex", "chatgpt"]
FOREIGN_TOOLS: tuple[ForeignTool, ...] = ("claude-code", "codex", "chatgpt")

SNIFF_BYTES = 64 * 1024
"""How much of a file's start ``ForeignFormat.sniff`` is given."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an imported session came from: the tool, the file it was read from (the
    first, for a session spread over several) and its id in that tool."""

    tool: ForeignTool
    file: str
    original_id: str

    def as_json(self) -> dict[str, Any]:
        """The data of the session's ``session/source`` event."""
        return {"tool": self.tool, "file": self.file, "id": self.original_id}


def json_kind(value: object) -> str:
    """What a decoded JSON value is, for an error line: ``null``, ``a boolean``, ``a
    number``, ``a string``, ``an array`` or ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def source_event(provenance: Provenance, time: int) -> NewEvent:
    """The ``session/source`` event an imported session starts with (seq 0, log-only)."""
    return NewEvent(SESSION_SOURCE, provenance.as_json(), time=time)


@dataclass(slots=True)
class ForeignSession:
    """One session of another tool, read whole (bounded by ``core.importers.bounds``).

    ``events`` are dsh events in log order, each with its ``time``, following the module
    docstring's conventions; they do not include the ``session/source`` event nor the
    title, which the importer writes. ``files``: every file the session was read from."""

    provenance: Provenance
    created_at: int
    cwd: str | None
    title: str | None
    events: list[NewEvent]
    files: tuple[str, ...] = field(default=())


class ForeignImportError(LogImportError):
    """A file of another tool that cannot be imported: ``file`` and ``line`` (1-based; 0
    when not about one line) say where; ``original_id`` is the session it spoils, when
    known."""

    def __init__(
        self,
        file: str | os.PathLike[str],
        message: str,
        line: int = 0,
        original_id: str | None = None,
    ) -> None:
        super().__init__(message, line)
        self.file = os.fspath(file)
        self.original_id = original_id


class ForeignFormat(Protocol):
    """What each tool's module (``core.importers.claude_code``, ``codex``, ``chatgpt``)
    provides, as module-level names."""

    TOOL: ForeignTool

    def sniff(self, path: Path, head: bytes) -> bool:
        """Whether ``path`` (whose first ``SNIFF_BYTES`` are ``head``) is one of this
        tool's logs. Cheap and never wrong about another tool's or dsh's own logs."""
        ...

    def default_root(self) -> Path | None:
        """Where the tool keeps its sessions (honouring its own environment variables,
        e.g. ``$CODEX_HOME``), or ``None`` when it has no such place (ChatGPT)."""
        ...

    def find_files(self, root: Path) -> list[Path]:
        """This tool's logs under the folder ``root``, sorted, symlinks not followed."""
        ...

    def read_sessions(self, paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
        """The sessions held by ``paths`` (files found by ``find_files`` or given by the
        user), one at a time; a file or session that cannot be read is a
        ``ForeignImportError`` in its place, and the others still come."""
        ...

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

The reader is a package, one concern per module: ``reader`` (the face: ``sniff``,
``find_files``, ``read_sessions``), ``grouping`` (which sessions each file holds),
``records`` (a line parsed and checked), ``chain`` (the main chain) and ``events`` (records
into dsh events, and the title). Everything is importable from here, as before.
"""

from core.importers.claude_code.events import _INJECTED_PREFIXES as _INJECTED_PREFIXES
from core.importers.claude_code.events import IMAGE_TEXT as IMAGE_TEXT
from core.importers.claude_code.events import MAX_KEPT_BLOCK_BYTES, TOOL
from core.importers.claude_code.events import PLUGIN_SOURCE as PLUGIN_SOURCE
from core.importers.claude_code.events import PROVIDER as PROVIDER
from core.importers.claude_code.reader import default_root, find_files, read_sessions, sniff

__all__ = [
    "MAX_KEPT_BLOCK_BYTES",
    "TOOL",
    "default_root",
    "find_files",
    "read_sessions",
    "sniff",
]

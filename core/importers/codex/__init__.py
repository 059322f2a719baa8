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

The reader is a package, one concern per module: ``reader`` (the face: ``sniff``,
``find_files``, ``read_sessions``, ``read_file``), ``rollout`` (a file read into one
session), ``content`` (an item's parts into dsh blocks), ``values`` (a record's fields
checked) and ``names`` (what file and thread names say). Everything is importable from
here, as before.
"""

from core.importers.codex.content import IMAGE_PLACEHOLDER
from core.importers.codex.reader import default_root, find_files, read_file, read_sessions, sniff
from core.importers.codex.rollout import DEFAULT_PROVIDER as DEFAULT_PROVIDER
from core.importers.codex.rollout import PLUGIN_SOURCE, TOOL
from core.importers.codex.rollout import UNKNOWN_MODEL as UNKNOWN_MODEL

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

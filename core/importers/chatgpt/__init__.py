"""ChatGPT data exports read into dsh sessions (issue 33): the ``ForeignFormat`` of
``core.importers.foreign`` for ``conversations.json`` and the export's ``.zip``.

An export's ``conversations.json`` is ONE JSON document: an array of conversations,
compact or pretty-printed, that may be gigabytes long. It is never parsed whole: a small
scanner (``split_array``) finds each top-level element's byte span (strings and their
escapes respected, line breaks counted) and each conversation is parsed alone with
``loads_exact``, so memory is bounded by one conversation (``MAX_CONVERSATION_BYTES``).
A conversation that does not parse, is too large, nests too deeply or has a field of the
wrong type is a ``ForeignImportError`` naming the file and its line, and the others still
come; a file whose array structure is lost (cut short, or no ``,`` between two
conversations) ends with one error there, after the conversations read before it.

A ``.zip`` is read in place, never extracted: its ``conversations.json`` (the member of
that name nearest the archive's root; member paths are never used for anything else,
nested archives are not opened) is decompressed as a stream, refused beforehand when the
archive's directory, the member's declared size or its compression ratio is out of bounds,
and stopped should it decompress to more than it declared.

A conversation (``{"id"|"conversation_id", "title", "create_time", "current_node",
"mapping": {node id: {"id", "message", "parent", "children"}}, …}``) becomes one session:

* the surface is the ``current_node`` branch: its parent links walked up to the root, then
  reversed (an export without ``current_node`` takes the leaf written last, and one whose
  nodes have no links at all is read in the mapping's order);
* every other node (another branch, the empty root, a hidden system message
  (``is_visually_hidden_from_conversation``), an empty system message, a content type dsh
  has no place for, a tool output answering no call) is a log-only ``chatgpt/node`` event
  holding the node as it is but its ``children`` (the other nodes' ``parent`` says them);
  the conversation's own fields but those that change as it goes on (``_VOLATILE``:
  ``mapping``, ``title``, ``update_time``, ``current_node``…) are one log-only
  ``chatgpt/conversation`` event first. Log order: depth first from the root, a node's
  other branches before the child on the current branch. So a conversation that went on
  since the last import reads to the events it read to then, and its new ones after
  (what ``dsh import`` needs to add only those); one whose earlier branch changed does
  not, and is reported;
* ``author.role`` ``user`` → a person's message; a visible non-empty ``system`` message →
  an injected one (``{"kind": "plugin", "plugin": "chatgpt"}``); ``assistant`` → a model's
  reply (``metadata.model_slug`` its model), or a ``tool-call`` block when it is addressed
  to a tool (``recipient`` other than ``all``, e.g. ``python`` for code interpreter);
  ``tool`` → the ``tool/result`` of the latest unanswered call to that tool (to the latest
  call, when it gives no name);
* content: ``text`` and ``multimodal_text`` parts joined by line breaks (an image or other
  non-text part as a placeholder such as ``[image]``), ``code`` and ``execution_output``
  their text, ``thoughts`` and ``reasoning_recap`` as ``reasoning`` blocks; a tool's
  ``system_error`` its output as an error;
* times (float seconds) become epoch milliseconds; a node without one takes the previous
  event's; the title is the conversation's ``title``.

The reader is a package, one concern per module: ``reader`` (the face: ``sniff``,
``find_files``, ``read_sessions``), ``files`` (the bytes of a file or a zip member),
``array`` (``split_array``), ``conversations`` (one conversation into a session), ``tree``
(its nodes and current branch) and ``events`` (nodes into dsh events). Everything is
importable from here, as before.
"""

from core.importers.chatgpt.array import MAX_CONVERSATION_BYTES, Element, split_array
from core.importers.chatgpt.conversations import MAX_FAILED_IN_A_ROW
from core.importers.chatgpt.events import CONVERSATION_EVENT, NODE_EVENT, TOOL
from core.importers.chatgpt.files import MAX_ZIP_MEMBER_BYTES, MAX_ZIP_RATIO, RefusedExportError
from core.importers.chatgpt.reader import default_root, find_files, read_sessions, sniff

__all__ = [
    "CONVERSATION_EVENT",
    "MAX_CONVERSATION_BYTES",
    "MAX_FAILED_IN_A_ROW",
    "MAX_ZIP_MEMBER_BYTES",
    "MAX_ZIP_RATIO",
    "NODE_EVENT",
    "TOOL",
    "Element",
    "RefusedExportError",
    "default_root",
    "find_files",
    "read_sessions",
    "sniff",
    "split_array",
]

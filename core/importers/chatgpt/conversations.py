"""One conversation of the export read into a ``ForeignSession`` (or the
``ForeignImportError`` naming its line), and the export's conversations one after another."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.errors import InvalidEventError
from core.importers import bounds
from core.importers.chatgpt.array import Element, _StructureError, split_array
from core.importers.chatgpt.events import CONVERSATION_EVENT, NODE_EVENT, TOOL, _Builder
from core.importers.chatgpt.files import _SourceError
from core.importers.chatgpt.tree import _Bad, _branch, _epoch_ms, _log_order, _nodes
from core.importers.foreign import ForeignImportError, ForeignSession, Provenance, json_kind
from core.jsoncodec import JSONDecodeError, loads_exact, utf8_len
from core.limits import MAX_TITLE_BYTES, check_header_limits

MAX_FAILED_IN_A_ROW = 1000
"""Conversations in a row that cannot be read before the rest of the file is given up:
a file of millions of damaged ones is not an export, and not a million error lines."""
# The conversation's fields that change as it goes on, left out of its log-only event so
# that a conversation that went on reads to the same first events (its title is the
# session's title; its nodes are the other events).
_VOLATILE = frozenset(
    {
        "mapping",
        "title",
        "update_time",
        "current_node",
        "is_archived",
        "is_starred",
        "moderation_results",
        "safe_urls",
        "blocked_urls",
    }
)


def _read_export(
    file: str, chunks: Iterator[bytes]
) -> Iterator[ForeignSession | ForeignImportError]:
    elements = split_array(chunks)
    failed = 0  # conversations in a row that could not be read
    while True:
        try:
            element = next(elements, None)
        except _StructureError as err:
            yield ForeignImportError(file, str(err), err.line)
            return
        except _SourceError as err:
            yield ForeignImportError(file, str(err))
            return
        if element is None:
            return
        result = _conversation(file, element)
        yield result
        failed = failed + 1 if isinstance(result, ForeignImportError) else 0
        if failed >= MAX_FAILED_IN_A_ROW:
            yield ForeignImportError(
                file,
                f"{failed:,} conversations in a row could not be read: the rest of the file "
                "is not read (it is not a ChatGPT export, or it is badly damaged)",
                element.line,
            )
            return


def _conversation(file: str, element: Element) -> ForeignSession | ForeignImportError:
    if element.problem is not None:
        return ForeignImportError(file, element.problem, element.problem_line or element.line)
    text, element.text = element.text, ""
    try:
        value = loads_exact(text, unique_keys=True)
    except (JSONDecodeError, ValueError, RecursionError) as err:
        pos = getattr(err, "pos", None)
        line = element.line + (text.count("\n", 0, pos) if isinstance(pos, int) else 0)
        message = getattr(err, "msg", str(err))
        return ForeignImportError(file, f"the conversation is not valid JSON: {message}", line)
    del text
    original_id = _original_id(value)
    try:
        return _session(file, value)
    except _Bad as err:
        return ForeignImportError(file, f"{_named(original_id)}{err}", element.line, original_id)
    except InvalidEventError as err:
        return ForeignImportError(file, f"{_named(original_id)}{err}", element.line, original_id)


def _named(original_id: str | None) -> str:
    if original_id is None:
        return ""
    shown = original_id if len(original_id) <= 80 else original_id[:79] + "…"
    return f"conversation {shown!r}: "


def _original_id(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    for key in ("id", "conversation_id"):
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
    return None


def _clip_title(title: str) -> str:
    if utf8_len(title) <= MAX_TITLE_BYTES:
        return title
    data = title.encode("utf-8", "surrogatepass")[: MAX_TITLE_BYTES - 3]
    while data and data[-1] & 0xC0 == 0x80:
        data = data[:-1]
    if data and data[-1] >= 0xC0:
        data = data[:-1]
    return data.decode("utf-8", "surrogatepass") + "…"


def _session(file: str, conversation: Any) -> ForeignSession:
    if not isinstance(conversation, dict):
        raise _Bad(f"a conversation must be a JSON object, not {json_kind(conversation)}")
    original_id = _original_id(conversation)
    if original_id is None:
        raise _Bad("the conversation has no id (neither id nor conversation_id is a string)")
    check_header_limits(original_id, None)
    if "mapping" not in conversation:
        raise _Bad("the conversation has no mapping of messages")
    nodes = _nodes(conversation["mapping"])
    branch = _branch(conversation, nodes)
    created_at = _epoch_ms(conversation.get("create_time"), "create_time")
    if created_at is None:
        times = [node.time for node in nodes.values() if node.time is not None]
        created_at = min(times) if times else None
    if created_at is None:
        created_at = _epoch_ms(conversation.get("update_time"), "update_time") or 0
    title = conversation.get("title")
    if title is not None and not isinstance(title, str):
        raise _Bad(f"title must be a string, not {json_kind(title)}")
    default_model = conversation.get("default_model_slug")
    builder = _Builder(created_at, default_model if isinstance(default_model, str) else None)
    builder.log(CONVERSATION_EVENT, {k: v for k, v in conversation.items() if k not in _VOLATILE})
    on_branch = set(branch)
    for key in _log_order(nodes, branch):
        node = nodes[key]
        if key not in on_branch or not builder.surface(node):
            record = {k: v for k, v in node.record.items() if k != "children"}
            builder.log(NODE_EVENT, record, node.time)
    if len(builder.events) > bounds.MAX_IMPORT_EVENTS:
        raise _Bad(f"the conversation holds more than {bounds.MAX_IMPORT_EVENTS:,} events")
    return ForeignSession(
        provenance=Provenance(TOOL, file, original_id),
        created_at=created_at,
        cwd=None,
        title=_clip_title(title) if title else None,
        events=builder.events,
        files=(file,),
    )

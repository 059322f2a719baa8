"""A conversation's nodes mapped to dsh events: a person's and the model's messages,
injected system messages, tool calls and their results, reasoning, placeholders for
parts dsh has no place for."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.importers.chatgpt.tree import _Node
from core.importers.foreign import ForeignTool, json_kind
from core.jsoncodec import dumps_js
from core.log import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, NewEvent, validate_new_event

TOOL: ForeignTool = "chatgpt"
NODE_EVENT = "chatgpt/node"
"""A log-only event holding a node of the conversation that is not on the surface."""
CONVERSATION_EVENT = "chatgpt/conversation"
"""A log-only event holding the conversation's fields but its ``mapping``."""
_PROVIDER = "openai"


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    turn: int
    step: int


class _Builder:
    """The session's events in log order, with the turn and step counters."""

    def __init__(self, created_at: int, default_model: str | None) -> None:
        self.events: list[NewEvent] = []
        self.time = created_at
        self.default_model = default_model
        self.people = 0  # the person's messages so far
        self.step = -1  # of the model's last reply in this turn
        self.pending: list[_Call] = []

    @property
    def turn(self) -> int:
        return max(self.people - 1, 0)

    def _add(self, type: str, data: dict[str, Any], time: int | None, surface: bool) -> None:
        if time is not None:
            self.time = time
        op = "append" if surface else None
        valid = validate_new_event(type, data, op, None, self.time)
        self.events.append(NewEvent(valid.type, valid.data, valid.surface_op, None, valid.time))

    def log(self, type: str, data: dict[str, Any], time: int | None = None) -> None:
        self._add(type, data, time, surface=False)

    def surface(self, node: _Node) -> bool:
        """Add ``node`` to the surface when it has a place there; False when not."""
        message = node.message
        if message is None:
            return False
        metadata = message.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if metadata.get("is_visually_hidden_from_conversation") is True:
            return False
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        content = message.get("content")
        if not isinstance(content, dict):
            return False
        kind = content.get("content_type")
        message_id = message.get("id")
        if not isinstance(message_id, str) or not message_id:
            message_id = node.key
        if role == "user" or role == "system":
            if kind == "code":
                code = content.get("text")
                text = code if isinstance(code, str) else ""
            elif kind in ("text", "multimodal_text", None):
                text = _parts_text(content)
            else:
                return False
            if not text:
                return False
            if role == "user":
                self.people += 1
                self.step = -1
                self.pending.clear()
            source = {"kind": "user"} if role == "user" else {"kind": "plugin", "plugin": TOOL}
            data = {"id": message_id, "role": "user", "content": [_text(text)], "source": source}
            self._add(USER_MESSAGE, data, node.time, surface=True)
            return True
        if role == "assistant":
            return self._assistant(node, message, content, kind, message_id, metadata)
        if role == "tool":
            return self._tool(node, message, content, kind, message_id, author)
        return False

    def _assistant(
        self,
        node: _Node,
        message: dict[str, Any],
        content: dict[str, Any],
        kind: Any,
        message_id: str,
        metadata: dict[str, Any],
    ) -> bool:
        recipient = message.get("recipient", "all")
        blocks: list[dict[str, Any]]
        if isinstance(recipient, str) and recipient not in ("all", ""):
            if kind == "code":
                code = content.get("text")
                if not isinstance(code, str):
                    return False
                arguments = {"code": code}
            elif kind in ("text", "multimodal_text"):
                arguments = {"input": _parts_text(content)}
            else:
                return False
            blocks = [
                {
                    "type": "tool-call",
                    "id": message_id,
                    "name": recipient,
                    "arguments": dumps_js(arguments),
                }
            ]
        elif kind in ("text", "multimodal_text", None):
            text = _parts_text(content)
            blocks = [_text(text)] if text else []
        elif kind == "code":
            code = content.get("text")
            blocks = [_text(code)] if isinstance(code, str) and code else []
        elif kind == "thoughts":
            blocks = _thoughts(content)
        elif kind == "reasoning_recap":
            recap = content.get("content")
            blocks = (
                [{"type": "reasoning", "text": recap}] if isinstance(recap, str) and recap else []
            )
        else:
            return False
        if not blocks:
            return False
        slug = metadata.get("model_slug")
        model = slug if isinstance(slug, str) and slug else (self.default_model or "unknown")
        self.step += 1
        data = {
            "turn": self.turn,
            "step": self.step,
            "message": {
                "id": message_id,
                "role": "assistant",
                "content": blocks,
                "source": {"kind": "model", "provider": _PROVIDER, "model": model},
            },
        }
        self._add(ASSISTANT_MESSAGE, data, node.time, surface=True)
        if blocks[0]["type"] == "tool-call":
            self.pending.append(_Call(message_id, blocks[0]["name"], self.turn, self.step))
        return True

    def _tool(
        self,
        node: _Node,
        message: dict[str, Any],
        content: dict[str, Any],
        kind: Any,
        message_id: str,
        author: Any,
    ) -> bool:
        name = author.get("name") if isinstance(author, dict) else None
        if isinstance(name, str):
            call = next((c for c in reversed(self.pending) if c.name == name), None)
        else:  # a tool that does not say its name answers the latest call
            call = self.pending[-1] if self.pending else None
        if call is None:
            return False
        if kind in ("execution_output", "code", "system_error"):
            text = content.get("text")
            if not isinstance(text, str):
                return False
        elif kind in ("text", "multimodal_text"):
            text = _parts_text(content)
        elif kind == "tether_browsing_display":
            result = content.get("result")
            if not isinstance(result, str):
                return False
            text = result
        else:
            return False
        self.pending.remove(call)
        metadata = message.get("metadata")
        aggregate = metadata.get("aggregate_result") if isinstance(metadata, dict) else None
        failed = kind == "system_error" or (
            isinstance(aggregate, dict)
            and (
                aggregate.get("status") not in (None, "success")
                or aggregate.get("in_kernel_exception") is not None
            )
        )
        block = {
            "type": "tool-result",
            "toolCallId": call.id,
            "content": [_text(text)],
            "isError": failed,
        }
        data = {
            "turn": call.turn,
            "step": call.step,
            "message": {
                "id": message_id,
                "role": "user",
                "content": [block],
                "source": {"kind": "tool", "callId": call.id},
            },
        }
        self._add(TOOL_RESULT, data, node.time, surface=True)
        return True


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


_PLACEHOLDERS: Mapping[str, str] = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio]",
    "audio_transcription": "",
    "video_container_asset_pointer": "[video]",
}


def _parts_text(content: dict[str, Any]) -> str:
    """The parts of a text or multimodal message joined by line breaks; a part that is
    not text (an image…) as a placeholder, an audio transcription as its text."""
    parts = content.get("parts")
    if not isinstance(parts, list):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("content_type")
            if kind == "audio_transcription" and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                shown = kind if isinstance(kind, str) else "attachment"
                out.append(_PLACEHOLDERS.get(shown) or f"[{_safe_kind(shown)}]")
        elif part is not None:
            out.append(f"[{json_kind(part)}]")
    return "\n".join(out)


def _safe_kind(kind: str) -> str:
    """A content type shown in a placeholder: hostile text, so only a short word of it."""
    word = re.sub(r"[^A-Za-z0-9_.-]", "", kind)[:40]
    return word or "attachment"


def _thoughts(content: dict[str, Any]) -> list[dict[str, Any]]:
    thoughts = content.get("thoughts")
    if not isinstance(thoughts, list):
        return []
    blocks: list[dict[str, Any]] = []
    for thought in thoughts:
        if not isinstance(thought, dict):
            continue
        pieces = [thought[k] for k in ("summary", "content") if isinstance(thought.get(k), str)]
        text = "\n".join(p for p in pieces if p)
        if text:
            blocks.append({"type": "reasoning", "text": text})
    return blocks

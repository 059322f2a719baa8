"""A Responses API item's parts mapped to dsh blocks: message content (text, images as a
placeholder, injected text), reasoning summaries, tool calls and their outputs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from core.importers.codex.values import _expect, _optional_str
from core.jsoncodec import dumps_js

IMAGE_PLACEHOLDER: Final = "[image]"
_RECORD_TYPE = re.compile(r"[A-Za-z0-9_.\-/]{1,64}")
_IMAGE_TAG = re.compile(r"\A\s*</?image(?: name=[^>\n]{0,256})?>\s*\Z")


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

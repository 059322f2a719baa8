"""One line of a transcript read as a record: strict JSON parsed, the fields this reader
uses checked (images' data dropped), its time, whether it is a main-chain message."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import InvalidEventError
from core.limits import MAX_JSON_DEPTH
from core.logfile import LogImportError, check_record_depth
from core.timestamps import check_epoch_ms

_MESSAGE_TYPES = ("user", "assistant")
_SHALLOW = MAX_JSON_DEPTH - 16
"""A line with fewer brackets nests less deep, and so does every event made of it (an
event wraps a record's parts in at most one level more than the record had)."""


@dataclass(slots=True)
class _Record:
    obj: dict[str, Any]
    file: Path
    line: int
    time: int | None
    log_only: bool  # a subagent's transcript
    key: str  # its uuid, or one made up for a record without
    shallow: bool  # too few brackets to nest near MAX_JSON_DEPTH: its events need no check


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

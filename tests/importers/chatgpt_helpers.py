"""What the ChatGPT reader's tests share: the hand-made fixtures, reading them, a surface
event as what it shows, and small exports, conversations, chains and zips written on the fly."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.importers import chatgpt
from core.importers.foreign import ForeignImportError, ForeignSession
from core.log import NewEvent

FIXTURES = Path(__file__).parent / "chatgpt"
EXPORT = FIXTURES / "export.json"
DAMAGED = FIXTURES / "damaged.json"
T = 1_735_689_600_000  # the fixtures' create_time, 2025-01-01, in ms


def _read(*paths: Path) -> list[ForeignSession | ForeignImportError]:
    return list(chatgpt.read_sessions(list(paths)))


def _sessions(*paths: Path) -> list[ForeignSession]:
    results = _read(*paths)
    assert all(isinstance(r, ForeignSession) for r in results), results
    return results  # type: ignore[return-value]


def _message(event: NewEvent) -> Any:
    return event.data if event.type == "user/message" else event.data["message"]


def _shown(event: NewEvent) -> tuple[str, ...]:
    """A surface event as (type, what it holds)."""
    message = _message(event)
    out: list[str] = [event.type]
    for block in message["content"]:
        if block["type"] == "tool-result":
            out.append(f"result {block['toolCallId']}: {block['content'][0]['text']}")
        elif block["type"] == "tool-call":
            out.append(f"call {block['name']} {block['id']}: {block['arguments']}")
        else:
            out.append(f"{block['type']}: {block['text']}")
    return tuple(out)


def _write_export(path: Path, conversations: list[Any], indent: int | None = None) -> Path:
    path.write_text(json.dumps(conversations, indent=indent), encoding="utf-8")
    return path


def _conversation(cid: str, *texts: str, at: float = 1_700_000_000.0) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    parent = None
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        key = f"{cid}-{i}"
        mapping[key] = {
            "id": key,
            "parent": parent,
            "children": [],
            "message": {
                "id": key,
                "author": {"role": role},
                "create_time": at + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        if parent is not None:
            mapping[parent]["children"].append(key)
        parent = key
    return {"id": cid, "title": cid, "create_time": at, "current_node": parent, "mapping": mapping}


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _chain(cid: str, *messages: dict[str, Any]) -> dict[str, Any]:
    """A conversation of one branch of these messages (``id`` each), the last current."""
    mapping: dict[str, Any] = {}
    parent = None
    for message in messages:
        key = message["id"]
        mapping[key] = {"id": key, "parent": parent, "children": [], "message": message}
        if parent is not None:
            mapping[parent]["children"].append(key)
        parent = key
    return {"id": cid, "mapping": mapping, "current_node": parent}


def _msg(key: str, role: str, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    author = {"role": role, "name": extra.pop("name", None)}
    return {"id": key, "author": author, "content": content, **extra}

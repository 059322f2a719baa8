"""A tiny foreign session format, for tests only: it stands in for the Claude Code, Codex
and ChatGPT readers (``core.importers.foreign_import.FORMAT_MODULES``) so that the import
pipeline and ``dsh import`` can be tested without them.

A toy file is JSONL: a header ``{"toy": TOOL, "id", "created", "cwd"?, "title"?}``, then one
line per message ``{"role": "user"|"assistant", "text", "time"}``; ``{"more": text}`` adds a
text block to the last message when it is a reply, where it stands (a reply written over
several lines, records between them, as Claude Code does); a line ``{"raw": …}`` is a record kept off the surface (``TOOL/raw``); ``{"bad-event": true}`` gives an event the store
refuses (a surface op on a log-only type). Every file is one session, except a ChatGPT-like
``conversations.json``: a JSON list of such sessions (each ``{"header", "lines"}``).
``install`` registers one module per tool (``TOOL``, ``sniff``, ``default_root``,
``find_files``, ``read_sessions``) in place of the real readers.
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.importers import foreign_import
from core.importers.foreign import ForeignImportError, ForeignSession, Provenance
from core.log import NewEvent

__all__ = ["header_line", "install", "message", "toy_file", "toy_lines"]

ROOTS = {"claude-code": ".toy-claude", "codex": ".toy-codex", "chatgpt": None}


def header_line(
    tool: str, sid: str, created: int = 1_700_000_000_000, **more: Any
) -> dict[str, Any]:
    return {"toy": tool, "id": sid, "created": created, **more}


def message(role: str, text: str, time: int) -> dict[str, Any]:
    return {"role": role, "text": text, "time": time}


def toy_lines(records: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def toy_file(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toy_lines(records))
    return path


def to_events(tool: str, records: Sequence[dict[str, Any]], sid: str) -> list[NewEvent]:
    """What the toy reader makes of the records after the header."""
    events: list[NewEvent] = []
    turn, step = -1, 0
    for n, record in enumerate(records):
        if "raw" in record:
            events.append(
                NewEvent(f"{tool}/raw", {"record": record["raw"]}, time=record.get("time"))
            )
            continue
        if "more" in record:  # more of the last reply, written on a line of its own
            at = next((i for i in range(len(events) - 1, -1, -1) if events[i].surface_op), None)
            last = None if at is None else events[at]
            if last is not None and last.type == "assistant/message":
                reply = dict(last.data["message"])
                reply["content"] = [*reply["content"], {"type": "text", "text": record["more"]}]
                data = {**last.data, "message": reply}
                events[at] = NewEvent(last.type, data, "append", time=last.time)  # type: ignore[index]
            continue
        if record.get("bad-event"):
            events.append(NewEvent(f"{tool}/raw", {}, surface_op="append", time=record.get("time")))
            continue
        text = [{"type": "text", "text": record["text"]}]
        mid = f"{sid}-{n}"
        if record["role"] == "user":
            turn, step = turn + 1, 0
            data: dict[str, Any] = {
                "id": mid,
                "role": "user",
                "content": text,
                "source": {"kind": "user"},
            }
            events.append(NewEvent("user/message", data, "append", time=record["time"]))
        else:
            reply = {
                "id": mid,
                "role": "assistant",
                "content": text,
                "source": {"kind": "model", "provider": tool, "model": "toy-1"},
            }
            data = {"turn": max(turn, 0), "step": step, "message": reply}
            step += 1
            events.append(NewEvent("assistant/message", data, "append", time=record["time"]))
    return events


def _session(tool: str, path: Path, header: Any, records: list[Any], line0: int) -> ForeignSession:
    if not isinstance(header, dict) or header.get("toy") != tool:
        raise ForeignImportError(path, "not a toy header", line0)
    sid = header["id"]
    for offset, record in enumerate(records, start=1):
        ok = isinstance(record, dict) and (
            "raw" in record
            or isinstance(record.get("more"), str)
            or record.get("bad-event") is True
            or (
                record.get("role") in ("user", "assistant")
                and isinstance(record.get("text"), str)
                and isinstance(record.get("time"), int)
            )
        )
        if not ok:
            raise ForeignImportError(path, "not a toy message", line0 + offset, sid)
    return ForeignSession(
        provenance=Provenance(tool, str(path), sid),  # type: ignore[arg-type]
        created_at=header["created"],
        cwd=header.get("cwd"),
        title=header.get("title"),
        events=to_events(tool, records, sid),
        files=(str(path),),
    )


def _module(tool: str) -> types.ModuleType:
    module = types.ModuleType(f"tests_toy_{tool.replace('-', '_')}")
    module.TOOL = tool  # type: ignore[attr-defined]

    def sniff(path: Path, head: bytes) -> bool:
        if tool == "chatgpt":
            return head.lstrip().startswith(b"[") and f'"toy": "{tool}"'.encode() in head
        first = head.split(b"\n", 1)[0]
        try:
            record = json.loads(first)
        except (ValueError, RecursionError):
            return False
        return isinstance(record, dict) and record.get("toy") == tool

    def default_root() -> Path | None:
        name = ROOTS[tool]
        return None if name is None else Path(os.environ["HOME"]) / name

    def find_files(root: Path) -> list[Path]:
        pattern = "conversations.json" if tool == "chatgpt" else "*.jsonl"
        return sorted(p for p in root.rglob(pattern) if p.is_file() and not p.is_symlink())

    def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
        for path in paths:
            try:
                text = path.read_text()
            except OSError as err:
                yield ForeignImportError(path, f"cannot read it: {err.strerror}")
                continue
            if tool == "chatgpt":
                try:
                    conversations = json.loads(text)
                except ValueError:
                    yield ForeignImportError(path, "invalid JSON", 1)
                    continue
                for item in conversations:
                    try:
                        yield _session(tool, path, item["header"], item["lines"], 1)
                    except ForeignImportError as err:
                        yield err
                continue
            lines = text.splitlines()
            try:
                records = []
                for number, line in enumerate(lines, start=1):
                    try:
                        records.append(json.loads(line))
                    except ValueError:
                        sid = (
                            records[0].get("id")
                            if records and isinstance(records[0], dict)
                            else None
                        )
                        raise ForeignImportError(path, "invalid JSON", number, sid) from None
                if not records:
                    raise ForeignImportError(path, "the file is empty", 1)
                yield _session(tool, path, records[0], records[1:], 1)
            except ForeignImportError as err:
                yield err

    module.sniff = sniff  # type: ignore[attr-defined]
    module.default_root = default_root  # type: ignore[attr-defined]
    module.find_files = find_files  # type: ignore[attr-defined]
    module.read_sessions = read_sessions  # type: ignore[attr-defined]
    return module


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a toy reader in place of each real one (``FORMAT_MODULES``)."""
    for tool in list(foreign_import.FORMAT_MODULES):
        module = _module(tool)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(foreign_import.FORMAT_MODULES, tool, module.__name__)  # type: ignore[arg-type]

"""SPEC §4.1 (issue 31) on import: a log whose JSON an ASCII-safe writer made (Python's
``json.dumps``: 🚀 as ``\\ud83d\\ude80``) imports with its characters whole, a reference
log (JSONL or Zstandard, packed rows too) as well as a dsh export; a lone surrogate, or a
pair's halves split between two chunks (two strings), stay as they were."""

from __future__ import annotations

import json
from typing import Any

import zstandard

from core.importers.detect import load_session_log
from core.logfile import parse_jsonl

CREATED = 1_785_000_000_000
HEADER = {"type": "session", "version": 0, "id": "mig-hé🚀", "createdAt": CREATED, "cwd": "/🚀"}


def _records() -> list[dict[str, Any]]:
    user = {"content": [{"type": "text", "text": "launch 🚀, lone \ud800"}],
            "source": {"kind": "user"}}  # fmt: skip
    chunks = {"turn": 1, "step": 0, "index": 0, "dt": [1],
              "texts": ["to the moon \ud83d", "\ude80 and 🚀"]}  # fmt: skip
    return [
        HEADER,
        {
            "type": "user/message",
            "seq": 0,
            "time": CREATED + 1,
            "data": user,
            "surfaceOp": "append",
        },
        {"type": "text-chunks", "seq0": 1, "time0": CREATED + 2, "data": chunks},
    ]


def _ascii_jsonl() -> bytes:
    raw = "".join(json.dumps(r) + "\n" for r in _records()).encode("ascii")
    assert b"\\ud83d\\ude80" in raw and "🚀".encode() not in raw
    return raw


def test_an_ascii_escaped_reference_log_imports_with_its_characters_whole() -> None:
    for raw in (
        _ascii_jsonl(),
        zstandard.ZstdCompressor(write_checksum=True).compress(_ascii_jsonl()),
    ):
        log = load_session_log(raw)
        assert (log.header.id, log.header.cwd) == ("mig-hé🚀", "/🚀")
        message, first, second = log.events[:3]
        assert message.data["content"][0]["text"] == "launch 🚀, lone \ud800"
        # Each chunk is a string of its own: its lone half stays (as in JavaScript).
        assert [first.data["chunk"]["text"], second.data["chunk"]["text"]] == [
            "to the moon \ud83d",
            "\ude80 and 🚀",
        ]


def test_an_ascii_escaped_dsh_export_imports_with_its_characters_whole() -> None:
    header = {"type": "session", "id": "mig-hé🚀", "created_at": 1, "cwd": None}
    event = {"seq": 0, "type": "x/🚀", "time": 2, "data": {"k🚀": ["🚀", "\udc00\ud83d"]},
             "surface_op": None, "source_event_seqs": None}  # fmt: skip
    log = parse_jsonl([json.dumps(header), json.dumps(event)])
    assert log.header.id == "mig-hé🚀"
    (got,) = log.events
    assert got.type == "x/🚀" and dict(got.data) == {"k🚀": ["🚀", "\udc00\ud83d"]}

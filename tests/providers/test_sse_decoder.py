"""The incremental SSE parser inside the OpenAI provider, fed every possible chunking."""

from __future__ import annotations

import pytest

from core.providers.openai import _SSEDecoder

STREAM = (
    "\ufeff: comment\r\n"
    "\r\n"
    "data: first\r\n"
    "\r\n"
    "event: error\n"
    "data:  two spaces kept but one\n"
    "data:second line\n"
    "\n"
    "id: 7\r"
    "data: ünïcode ✓\r"
    "\r"
    "data\n"
    "data:\n"
    "\n"
    "data\n"
    "\n"
    "retry: 10\n"
    "data: [DONE]\n"
    "\n"
).encode()

EXPECTED = [
    ("message", "first"),
    ("error", " two spaces kept but one\nsecond line"),
    ("message", "ünïcode ✓"),
    ("message", "\n"),
    ("message", "[DONE]"),
]


def decode(pieces: list[bytes]) -> list[tuple[str, str]]:
    decoder = _SSEDecoder()
    out: list[tuple[str, str]] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    out.extend(decoder.close())
    return out


def test_whole_stream() -> None:
    assert decode([STREAM]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_every_split_point(cut: int) -> None:
    assert decode([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_byte_by_byte() -> None:
    assert decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_unterminated_last_event_is_delivered_at_eof() -> None:
    assert decode([b"data: a\n\ndata: tail"]) == [("message", "a"), ("message", "tail")]

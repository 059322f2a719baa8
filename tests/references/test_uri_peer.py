"""Differential: dsh's session-reference URIs against the reference's own TypeScript
(``tests.references.peer``: read from a fetched mirror, run by Node), byte for byte, on
many ids rich in surrogates: raw pairs, lone highs and lows, pairs made by joining two
strings, and payloads holding escaped pairs. Skips (saying why) where the mirror, Node or
esbuild is missing; ``DSH_REFERENCE_REPO`` names the mirror."""

from __future__ import annotations

import base64
import json
import random

import pytest

from core.references import (
    SessionReferenceError,
    decode_session_reference_uri,
    encode_session_reference_uri,
)
from tests.references.peer import PeerUnavailable, ask

_PIECES = [
    "\ud800", "\udbff", "\ud83d", "\udc00", "\udfff", "\ude80", "🚀", "😀", "a", "é", "中",
    '"', "\\", "\n", "\x00", "\x1f", "\x7f", "\u2028", "/", "<", "\ufffd", "\\u", "mig-hé",
]  # fmt: skip


def _ids(rng: random.Random, count: int) -> list[str]:
    ids = ["", "target", "mig-hé🚀", "mig-hé\ud83d\ude80", "\ud83d\ude00\ude00", "\ud83d\ud83d"]
    for _ in range(count):
        ids.append("".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 8))))
    for _ in range(count // 5):  # a pair made by joining two strings
        ids.append(rng.choice(_PIECES) + "\ud83d" + "\ude80" + rng.choice(_PIECES))
    return ids


def _b64(raw: bytes) -> str:
    return "dsh-session:" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _uris(rng: random.Random, ids: list[str]) -> list[str]:
    uris = []
    for session_id in ids:
        uris.append(encode_session_reference_uri(session_id))
        ascii_json = json.dumps(session_id)  # every non-ASCII escaped: pairs escaped
        uris.append(_b64(ascii_json.encode("ascii")))
        uris.append(_b64(ascii_json.upper().replace("\\U", "\\u").encode("ascii")))
    for _ in range(len(ids) // 4):  # short random payloads
        size = rng.randint(1, 12)
        uris.append("dsh-session:" + "".join(rng.choice("AIJQZabgiuw09-_") for _ in range(size)))
    return uris


def _dsh_decode(uri: str) -> dict[str, str]:
    try:
        return {"value": decode_session_reference_uri(uri)}
    except SessionReferenceError as err:
        return {"error": err.code}


def test_dsh_agrees_with_the_reference_byte_for_byte() -> None:
    rng = random.Random(31)
    ids = _ids(rng, 1_500)
    uris = _uris(rng, ids)
    try:
        answers = ask([("encode", i) for i in ids] + [("decode", u) for u in uris])
    except PeerUnavailable as why:
        pytest.skip(f"the reference cannot run here: {why}")
    encoded, decoded = answers[: len(ids)], answers[len(ids) :]
    for session_id, answer in zip(ids, encoded, strict=True):
        assert {"value": encode_session_reference_uri(session_id)} == answer, ascii(session_id)
    for uri, answer in zip(uris, decoded, strict=True):
        assert _dsh_decode(uri) == answer, uri
    # The run covered what it claims: escaped pairs refused, lone surrogates accepted.
    assert any("error" in a for a in decoded) and any("value" in a for a in decoded)
    assert sum(1 for a in decoded if "\ud800" <= a.get("value", "x")[:1] <= "\udfff") > 10

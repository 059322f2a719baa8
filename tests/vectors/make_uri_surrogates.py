"""Writes ``uri_surrogates.json``: the reference's own answers (its TypeScript run by Node,
``tests.references.peer``) on session ids and URIs rich in surrogates, so that a lone clone
checks dsh against them (``tests/references/test_uri.py``). Each entry is
``{"op": "encode"|"decode", "arg": …, "value": …}`` or ``{…, "error": code}``; strings as
JSON with every non-ASCII character escaped (a pair escaped is its character, SPEC §4.1).
``python -m tests.vectors.make_uri_surrogates`` (needs the fetched mirror, Node, esbuild)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.references.peer import ask

OUT = Path(__file__).with_name("uri_surrogates.json")


def _b64(raw: bytes) -> str:
    return "dsh-session:" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


IDS = [
    "mig-hé\ud83d\ude80",  # a raw pair: the character
    "\ud83d\ude00\ud83d",  # a pair then a lone high
    "\ude00\ud83d",  # a low then a high: two lone surrogates
    "a\ud800",
    "\udfffz",
    "\ud83d" + "\ude80",  # made by joining two strings
]
URIS = [
    _b64(b'"mig-h\\u00e9\\ud83d\\ude80"'),  # an escaped pair: not canonical
    _b64(b'"\\ud83d\\ude80"'),
    _b64(b'"\\uD83D\\uDE80"'),
    _b64('"🚀"'.encode()),
    _b64(b'"\\ude00\\ud83d"'),  # lone ones, escaped: canonical
    _b64(b'"\\ud83d"'),
    _b64(b'"\\ud83d\\ud83d\\ude80"'),  # a lone high then an escaped pair
    _b64('"\\ud83d🚀"'.encode()),  # a lone high, then the character raw
]


def main() -> None:
    requests = [("encode", i) for i in IDS] + [("decode", u) for u in URIS]
    entries = [
        {"op": op, "arg": arg, **answer}
        for (op, arg), answer in zip(requests, ask(requests), strict=True)
    ]
    OUT.write_text(json.dumps(entries, indent=1) + "\n", encoding="ascii")


if __name__ == "__main__":
    main()

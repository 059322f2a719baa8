"""What reaches the SDK from the client: each JSON-RPC line, with every escaped lone
surrogate (``"\\ud800"``, which JavaScript's ``JSON.stringify`` writes for one) read as
U+FFFD.

The SDK's JSON parser refuses such a string and drops the whole message without an
answer, so a client would wait forever on a request holding one (say, an id copied from
an answer's JSON text). Read as U+FFFD it gets its answer: a session whose id holds a
lone surrogate is "not found" that way, and is named by a prefix of its id or by its
``dsh-session:`` URI, which is ASCII. Standard input is pumped through a pipe by a thread,
so the SDK's own stdio transport reads fd 0 as usual.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from typing import Any

from core.surrogates import merge_surrogate_pairs

__all__ = ["lone_surrogates_replaced", "surrogate_safe_stdin"]

_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_LONE = re.compile("[\ud800-\udfff]")


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE.sub("\ufffd", merge_surrogate_pairs(value))
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    return value


def lone_surrogates_replaced(line: bytes) -> bytes:
    """``line`` as is, unless it is JSON holding a lone surrogate: then the same JSON with
    each one U+FFFD (an escaped pair stays the character it is)."""
    if _ESCAPED_SURROGATE.search(line) is None:
        return line
    try:
        value = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8: the SDK reports it as it would
        return line
    fixed = json.dumps(_replaced(value), ensure_ascii=False, separators=(",", ":"))
    return fixed.encode("utf-8") + b"\n"


def _pump(source: int, sink: int) -> None:
    try:
        with open(source, "rb", buffering=0, closefd=True) as lines:
            for line in iter(lines.readline, b""):
                os.write(sink, lone_surrogates_replaced(line))  # whole: a pipe blocks
    except OSError:  # the server stopped reading (it is ending)
        pass
    finally:
        with contextlib.suppress(OSError):
            os.close(sink)


@contextlib.contextmanager
def surrogate_safe_stdin() -> Iterator[None]:
    """Fd 0 is, meanwhile, a pipe fed line by line from the real standard input through
    ``lone_surrogates_replaced``; restored after."""
    try:
        real = os.dup(0)
    except OSError:  # started without standard input: nothing to read, nothing to fix
        yield
        return
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)
    threading.Thread(
        target=_pump, args=(real, write_end), name="dsh-mcp-stdin", daemon=True
    ).start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.dup2(saved, 0)
        with contextlib.suppress(OSError):
            os.close(saved)

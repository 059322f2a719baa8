"""What the SessionStore contract tests share (``test_store_behaviour``, ``_appends``,
``_reads``): the event types they write, appending a few messages, a log's seqs."""

from __future__ import annotations

from core.log import Event, SurfaceOp
from stores import SessionStore

MSG = "user/message"
ASSISTANT = "assistant/message"
TITLE = "session/title"
CHUNK = "assistant/chunk"


async def add(store: SessionStore, sid: str, n: int = 1, *, type: str = MSG) -> list[Event]:
    """Append ``n`` plain events (surface appends for surface types)."""
    op: SurfaceOp | None = "append" if type in (MSG, ASSISTANT) else None
    return [await store.append(sid, type, {"n": i}, surface_op=op) for i in range(n)]


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]

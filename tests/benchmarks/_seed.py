"""Fast seeding of large SQLite databases for the benchmarks.

The schema comes from ``SqliteSessionStore.open`` itself; rows are then inserted in one
transaction with plain ``sqlite3``, encoded exactly as the store encodes them (ids as
``surrogatepass`` UTF-8 blobs, each event in a row of its own keyed by the session's
integer key, data as ``dumps_js`` text, the store's ``kind`` column).
``check_seeded`` reads a sample back through the store to prove the rows are well formed.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from core.jsoncodec import dumps_js
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    USER_MESSAGE,
    SessionHeader,
    assistant_message,
    build_event,
    user_message,
)
from core.query import message_tail
from core.references.projection import MessageSums, projection_code
from stores import SessionQuery, SqliteSessionStore
from stores.sharing import os_user
from stores.validation import KIND_SURFACE, KIND_TITLE

BASE_TIME = 1_764_000_000_000
PROJECTS = ("/home/dev/shop", "/home/dev/infra", "/home/dev/dsh", "/srv/data", None)
_TOPICS = (
    "Checkout redesign",
    "Kubernetes upgrade",
    "Search relevance",
    "Release notes",
    "Billing migration",
    "Latency budget",
    "Onboarding flow",
    "Café menu",
    "日本語 docs",
    "Incident review",
)


def session_id(i: int) -> str:
    return f"{random.Random(i).getrandbits(64):016x}-{i:06d}"


def _enc(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


async def create_schema(path: Path) -> None:
    store = await SqliteSessionStore.open(path)
    await store.close()


def seed_sessions(path: Path, count: int) -> list[SessionHeader]:
    """``count`` titled sessions (a third renamed once), each with one short exchange."""
    headers: list[SessionHeader] = []
    session_rows: list[tuple[bytes, int, bytes | None]] = []
    event_rows: list[tuple[bytes, int, bytes, int, int, str, str | None, int | None]] = []
    # The surface the store keeps beside the log in each append's transaction (issue 15:
    # what read_message_tail and read_surface_nodes read): every message is a node.
    node_rows: list[tuple[bytes, int, int, int]] = []
    sum_rows: list[tuple[bytes, int, int]] = []
    for i in range(count):
        sid = session_id(i)
        cwd = PROJECTS[i % len(PROJECTS)]
        created = BASE_TIME - i * 60_000
        headers.append(SessionHeader(sid, created, cwd))
        session_rows.append((_enc(sid), created, None if cwd is None else _enc(cwd)))
        key = _enc(sid)
        topic = _TOPICS[i % len(_TOPICS)]
        events: list[tuple[str, object, int, str | None]] = [
            (SESSION_TITLE, {"title": "Draft", "source": {"kind": "fallback"}}, KIND_TITLE, None),
            (
                USER_MESSAGE,
                user_message(f"About {topic} #{i}", id=f"u{i}"),
                KIND_SURFACE,
                '"append"',
            ),
            (
                ASSISTANT_MESSAGE,
                {
                    "turn": 1,
                    "step": 0,
                    "message": assistant_message(
                        f"Answer {i}", provider="bench", model="m1", id=f"a{i}"
                    ),
                    "finish": "completed",
                },
                KIND_SURFACE,
                '"append"',
            ),
            (
                SESSION_TITLE,
                {"title": f"{topic} #{i}", "source": {"kind": "user"}},
                KIND_TITLE,
                None,
            ),
        ]
        codes: list[int] = []
        for seq, (type_, data, kind, op) in enumerate(events):
            code = None
            if kind == KIND_SURFACE:
                code = projection_code(build_event(seq, type_, created + seq, data, "append"))
                node_rows.append((key, seq, seq, code))
                codes.append(code)
            event_rows.append(
                (key, seq, _enc(type_), created + seq, kind, dumps_js(data), op, code)
            )
        sums = MessageSums(codes)
        sum_rows.append((key, sums.messages, sums.bytes))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO sessions (id, created_at, cwd, owner) VALUES (?, ?, ?, ?)",
            # The store's default user owns them (issue 17: a session without an owner is
            # nobody's to read, so nothing read back).
            [(*row, os_user()) for row in session_rows],
        )
        keys = dict(conn.execute("SELECT id, key FROM sessions"))
        conn.executemany(
            "INSERT INTO events (session, seq, type, time, kind, data, surface_op, projection) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ((keys[row[0]], *row[1:]) for row in event_rows),
        )
        conn.executemany(
            "INSERT INTO surface_nodes (session, pos, seq, projection) VALUES (?, ?, ?, ?)",
            ((keys[row[0]], *row[1:]) for row in node_rows),
        )
        conn.executemany(
            "INSERT INTO surface_sums (session, messages, bytes) VALUES (?, ?, ?)",
            ((keys[row[0]], *row[1:]) for row in sum_rows),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return headers


async def check_seeded(path: Path, headers: list[SessionHeader]) -> None:
    """Read the seeded data back through the store (a seeding bug fails loudly)."""
    async with await SqliteSessionStore.open(path) as store:
        listed = await store.list_headers()
        if sorted(listed, key=lambda h: h.id) != sorted(headers, key=lambda h: h.id):
            raise AssertionError("seeded headers do not read back")
        titles = await store.read_titles()
        if len(titles) != len(headers):
            raise AssertionError("seeded titles do not read back")
        sample = headers[len(headers) // 2]
        events = await store.read_events(sample.id)
        if [e.seq for e in events] != [0, 1, 2, 3] or not json.dumps(events[1].data):
            raise AssertionError("seeded events do not read back")
        # The surface as the store keeps it (surface_nodes, surface_sums) is the fold.
        query = SessionQuery(store)
        window = await query.read_surface_window(sample.id, 10)
        nodes = [(n.seq, n.projection) for n in (await query.read_surface_outline(sample.id)).nodes]
        for budget in (0, 10, 10_000):
            tail = (await query.read_message_tail(sample.id, budget)).tail
            if tail != message_tail(nodes, budget):
                raise AssertionError("the seeded surface's sums do not read back")
        if window.seqs != (1, 2) or window.events != tuple(e for e in events if e.is_surface):
            raise AssertionError("the seeded surface does not read back")

"""The PostgreSQL team store indexes messages in SQL (``dsh_search_text``, written by a
trigger: no member writes search rows, issue 30). It must index exactly what
``core.search.indexed_text`` says, for any event a member may append: a differential test
over random events, their data encoded as the store encodes it (``dumps_js``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.jsoncodec import dumps_js
from core.log import build_event
from core.search import indexed_text
from stores.columns import encode_text
from tests.pgcluster import Cluster

# Characters that stress the escaping: NUL and other controls, lone surrogates (and a
# pair of them: its character, SPEC 4.1), backslashes and quotes, separators,
# astral and CJK text, and what the function uses as a stand-in internally (U+0001).
_HARD = [
    "\x00",
    "\x01",
    "\x1f",
    "\ud800",
    "\udfff",
    "\ud83d\ude80",
    "\ud83d",
    "\ude80",
    "\\",
    '"',
    "\\u0000",
    "\\\\",
    "\u2028",
    "\ufeff",
    "😀",
    "中文",
    "é",
    "a",
    " ",
    "\n",
    "\ufffd",
]
_text = st.lists(st.sampled_from(_HARD) | st.text(max_size=3), max_size=6).map("".join)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _text)
_source = st.one_of(
    st.just({"kind": "user"}),
    st.just({"kind": "plugin", "plugin": "compact"}),
    st.just({"kind": "plugin", "plugin": "other"}),
    st.just({"kind": "model", "provider": "p", "model": "m"}),
    st.just({"kind": "session-reference", "version": 1}),
    st.dictionaries(st.sampled_from(["kind", "plugin", "x"]), _scalar, max_size=3),
    _scalar,
    st.lists(_scalar, max_size=2),
)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "text": _text}),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "tool-call", 1]), "text": _scalar}),
    st.dictionaries(st.sampled_from(["type", "text", "id"]), _scalar, max_size=3),
    _scalar,
)
_odd_message = st.fixed_dictionaries(
    {},
    optional={
        "id": _text,
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(st.lists(_block, max_size=4), _scalar),
        "source": _source,
    },
)
# Most messages are of the shapes dsh writes (text blocks, a known source), so that every
# rule is met often; the odd ones test that nothing else is indexed or breaks.
_plain_message = st.fixed_dictionaries(
    {
        "content": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["text", "text", "reasoning"]),
                    "text": st.one_of(_text, _text, _text, _scalar),
                }
            ),
            max_size=3,
        ),
        "source": st.sampled_from(
            [{"kind": "user"}, {"kind": "plugin", "plugin": "compact"}, {"kind": "model"}, None]
        ),
    }
)
_message = st.one_of(_plain_message, _plain_message, _plain_message, _odd_message)
_types = st.sampled_from(
    ["user/message", "steering/message", "assistant/message", "tool/result", "session/title", "x/y"]
)
_event = st.one_of(
    st.tuples(_types, _message),
    st.tuples(
        _types,
        st.one_of(
            st.fixed_dictionaries({"turn": st.integers(0, 3), "message": _message}),
            st.fixed_dictionaries({"turn": st.integers(0, 3), "message": _message}),
            st.dictionaries(st.sampled_from(["turn", "message", "x"]), _scalar, max_size=2),
        ),
    ),
)


def _ascii_json(data: Any) -> str:
    """The JSON an ASCII-safe writer (Python's ``json.dumps``), or a dsh of before SPEC
    4.1 changed, gives: every pair escaped, its halves apart."""
    return json.dumps(data, separators=(",", ":"))


async def _texts_on(
    conn: asyncpg.Connection,
    events: list[tuple[str, Any]],
    encode: Callable[[Any], str] = dumps_js,
) -> list[str | None]:
    rows = await conn.fetch(
        "SELECT dsh_search_text(k, d) FROM unnest($1::bytea[], $2::text[]) "
        "WITH ORDINALITY AS u (k, d, n) ORDER BY n",
        [encode_text(kind) for kind, _ in events],
        [encode(data) for _, data in events],
    )
    return [row[0] for row in rows]


async def _sql_texts(
    url: str, events: list[tuple[str, Any]], encode: Callable[[Any], str] = dumps_js
) -> list[str | None]:
    conn = await asyncpg.connect(url)
    try:
        return await _texts_on(conn, events, encode)
    finally:
        await conn.close()


def test_dsh_search_text_is_indexed_text(pg_cluster: Cluster) -> None:
    _, url = pg_cluster.fresh_schema_url(migrated=True)
    # One connection for every example (a connection per example was most of the time).
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(url))

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_event, min_size=30, max_size=60))
    def check(events: list[tuple[str, Any]]) -> None:
        expected = [
            indexed_text(build_event(0, kind, 0, data, "append", None)) for kind, data in events
        ]
        assert loop.run_until_complete(_texts_on(conn, events)) == expected
        assert loop.run_until_complete(_texts_on(conn, events, _ascii_json)) == expected

    try:
        check()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


def test_the_examples_that_matter_are_indexed_alike(pg_cluster: Cluster) -> None:
    """Fixed cases (hypothesis may not draw them every run): what dsh itself writes."""
    _, url = pg_cluster.fresh_schema_url(migrated=True)
    user = {"kind": "user"}
    events: list[tuple[str, Any]] = [
        (
            "user/message",
            {"content": [{"type": "text", "text": "hé\x00\ud800 \\u0000 😀"}], "source": user},
        ),
        (
            "user/message",
            {
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                "source": user,
            },
        ),
        (
            "user/message",
            {
                "content": [{"type": "text", "text": "sum"}],
                "source": {"kind": "plugin", "plugin": "compact"},
            },
        ),
        (
            "user/message",
            {
                "content": [{"type": "text", "text": "snap"}],
                "source": {"kind": "session-reference"},
            },
        ),
        (
            "steering/message",
            {
                "turn": 1,
                "message": {"content": [{"type": "text", "text": "steer"}], "source": user},
            },
        ),
        (
            "steering/message",
            {
                "turn": 1,
                "message": {
                    "content": [{"type": "text", "text": "x"}],
                    "source": {"kind": "plugin", "plugin": "compact"},
                },
            },
        ),
        (
            "assistant/message",
            {
                "turn": 0,
                "step": 0,
                "message": {
                    "content": [
                        {"type": "reasoning", "text": "no"},
                        {"type": "text", "text": "yes"},
                    ]
                },
            },
        ),
        (
            "assistant/message",
            {"turn": 0, "step": 0, "message": {"content": [{"type": "text", "text": ""}]}},
        ),
        (
            "tool/result",
            {
                "turn": 0,
                "step": 0,
                "message": {"content": [{"type": "text", "text": "tool"}], "source": user},
            },
        ),
    ]
    expected = [indexed_text(build_event(0, k, 0, d, "append", None)) for k, d in events]
    assert expected[:2] == ["hé\ufffd\ufffd \\u0000 😀", "a\nb"]
    assert asyncio.run(_sql_texts(url, events)) == expected

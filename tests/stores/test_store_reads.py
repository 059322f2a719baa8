"""The SessionStore contract (SPEC §2, §3) for reads, run against every store: the surface,
events and bodies by seq, titles, last event times; hostile and megabyte strings round trip."""

from __future__ import annotations

import pytest

from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError
from core.log import NewEvent, Replace, SurfaceRow
from core.surface import fold_surface
from core.surrogates import merge_surrogate_pairs
from stores import SessionStore
from tests.stores.store_behaviour_helpers import ASSISTANT, CHUNK, MSG, TITLE, add, seqs

# --------------------------------------------------------------------------- reads


async def test_read_surface_events(store: SessionStore) -> None:
    header = await store.create_session("s", cwd="/w", created_at=7)
    assert await store.read_surface_events("s") == (header, None, [])
    await store.append("s", CHUNK, {})
    assert await store.read_surface_events("s") == (header, 0, [])
    await add(store, "s", 3)
    await store.append("s", ASSISTANT, {}, surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    await store.append("s", TITLE, {"title": "t"})
    await store.append("s", CHUNK, {})
    got_header, last, surface = await store.read_surface_events("s")
    assert got_header == header
    assert last == 6  # log-only events count
    assert seqs(surface) == [1, 2, 3, 4]  # every surface event, in seq order (not folded)
    log = await store.read_events("s")
    assert surface == [e for e in log if e.surface_op is not None]


async def test_read_surface_rows_are_the_surface_events_without_data(store: SessionStore) -> None:
    header = await store.create_session("s", cwd="/w", created_at=7)
    assert await store.read_surface_rows("s") == (header, None, [])
    await store.append("s", CHUNK, {})
    await add(store, "s", 3)
    await store.append("s", ASSISTANT, {}, surface_op=Replace(1, 2), source_event_seqs=[1, 2])
    await store.append("s", CHUNK, {})
    got_header, last, rows = await store.read_surface_rows("s")
    _, last_full, surface = await store.read_surface_events("s")
    assert (got_header, last) == (header, last_full) == (header, 5)
    assert rows == [SurfaceRow(e.seq, e.surface_op, e.source_event_seqs) for e in surface]  # type: ignore[arg-type]
    assert rows[-1] == SurfaceRow(4, Replace(1, 2), (1, 2))
    assert [r.seq for r in fold_surface(rows)] == [e.seq for e in fold_surface(surface)] == [4, 3]
    with pytest.raises(SessionNotFoundError):
        await store.read_surface_rows("nope")


async def test_read_events_at_returns_the_seqs_asked_for_in_that_order(
    store: SessionStore,
) -> None:
    await store.create_session("s", created_at=1)
    await store.create_session("other", created_at=2)
    await add(store, "other", 9)
    await store.append("s", CHUNK, {"n": 0})
    await add(store, "s", 4)
    log = await store.read_events("s")
    assert await store.read_events_at("s", []) == []
    assert await store.read_events_at("s", [3, 0, 3, 4]) == [log[3], log[0], log[3], log[4]]
    assert await store.read_events_at("s", range(5)) == log
    with pytest.raises(InvalidEventError, match="no event with seq 5"):
        await store.read_events_at("s", [1, 5])
    with pytest.raises(InvalidEventError):
        await store.read_events_at("s", [-1])
    with pytest.raises(InvalidEventError):
        await store.read_events_at("s", [True])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await store.read_events_at("s", "01")
    with pytest.raises(SessionNotFoundError):
        await store.read_events_at("nope", [0])


async def test_read_events_at_many_seqs(store: SessionStore) -> None:
    """More seqs than one SQL statement binds: chunked, still in the order asked for."""
    await store.create_session("s", created_at=1)
    await store.append_batch("s", [NewEvent(MSG, {"i": i}, "append") for i in range(1_234)])
    wanted = [i * 7 % 1_234 for i in range(1_234)]
    got = await store.read_events_at("s", wanted)
    assert [e.seq for e in got] == wanted
    assert [e.data["i"] for e in got] == wanted


async def test_read_bodies_at_are_the_types_and_data_of_read_events_at(
    store: SessionStore,
) -> None:
    """``read_bodies_at`` is ``read_events_at`` reduced to ``(type, data)``: surface and
    log-only events (streamed chunks, which SQLite packs), a replace with many source
    seqs, hostile strings, duplicates, any order, more seqs than one statement binds."""
    await store.create_session("s", created_at=1)
    await store.create_session("other", created_at=2)
    await add(store, "other", 3)
    hostile = ["\ud800", "\x00\x1f", "中文 <b>", '"q" \\', "😀", "x" * 5000]
    for i in range(40):
        text = hostile[i % len(hostile)]
        await store.append_batch(
            "s",
            [
                NewEvent(MSG, {"i": i, "text": text}, "append"),
                *[NewEvent(CHUNK, {"i": i, "k": k, "text": text[:3]}) for k in range(20)],
                NewEvent(ASSISTANT, {"i": i, "message": {"text": text}}, "append"),
            ],
        )
    surface = [e.seq for e in await store.read_events("s") if e.surface_op is not None]
    await store.append(
        "s",
        MSG,
        {"summary": "\udfff"},
        surface_op=Replace(surface[0], surface[-1]),
        source_event_seqs=surface,
    )
    log = await store.read_events("s")
    assert log[-1].source_event_seqs == tuple(surface)
    every = list(range(len(log)))
    for wanted in (
        [],
        every,
        every[::-1],
        [len(log) - 1, 0, 0, 5, 5, len(log) - 1],
        [i * 7 % len(log) for i in range(len(log))],
        list(range(3, len(log), 11)),
    ):
        assert await store.read_bodies_at("s", wanted) == [
            (log[i].type, log[i].data) for i in wanted
        ]
    with pytest.raises(InvalidEventError, match=f"no event with seq {len(log)}"):
        await store.read_bodies_at("s", [1, len(log)])
    with pytest.raises(InvalidEventError):
        await store.read_bodies_at("s", [-1])
    with pytest.raises(InvalidEventError):
        await store.read_bodies_at("s", [True])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await store.read_bodies_at("s", "01")
    with pytest.raises(SessionNotFoundError):
        await store.read_bodies_at("nope", [0])


async def test_titles_latest_by_seq_in_the_raw_log(store: SessionStore) -> None:
    await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await store.create_session("untitled", created_at=3)
    await store.append("a", TITLE, {"title": "first", "source": {"kind": "fallback"}}, time=10)
    await add(store, "a", 2)
    await store.append("a", TITLE, {"title": "second", "source": {"kind": "user"}}, time=5)
    await store.append("a", TITLE, {"title": None, "source": {"kind": "user"}}, time=20)
    await store.append("a", TITLE, {"title": ["not", "str"]}, time=21)
    await store.append("a", TITLE, {"source": {"kind": "user"}}, time=22)
    await add(store, "a", 1)
    await store.append("b", TITLE, {"title": "\ud800 b", "extra": 1}, time=3)
    titles = await store.read_titles()
    assert set(titles) == {"a", "b"}
    a = titles["a"]
    assert (a.title, a.event_seq, a.updated_at) == ("second", 3, 5)
    assert a.source == {"kind": "user"}
    b = titles["b"]
    assert (b.title, b.event_seq, b.updated_at, b.source) == ("\ud800 b", 0, 3, {})
    assert await store.read_titles(["b", "untitled", "missing", "b"]) == {"b": b}
    assert await store.read_titles([]) == {}
    with pytest.raises(TypeError):
        a.source["kind"] = "x"  # type: ignore[index]


async def test_read_titles_of_many_sessions(store: SessionStore) -> None:
    ids = [f"s{i:04d}" for i in range(1100)]
    for sid in ids:
        await store.create_session(sid, created_at=0)
    for i, sid in enumerate(ids):
        if i % 3:
            await store.append(sid, TITLE, {"title": f"t{i}"}, time=i)
    titles = await store.read_titles(ids)
    assert len(titles) == sum(1 for i in range(1100) if i % 3)
    assert titles["s1099"].title == "t1099"
    assert titles["s0001"].updated_at == 1
    assert "s0000" not in titles
    assert await store.read_titles() == titles


async def test_last_event_times_are_the_time_of_the_highest_seq(store: SessionStore) -> None:
    await store.create_session("a", created_at=1)
    await store.create_session("b", created_at=2)
    await store.create_session("empty", created_at=3)
    await store.create_session("\ud800 odd", created_at=4)
    assert await store.read_last_event_times() == {}
    await store.append("a", MSG, {"n": 0}, surface_op="append", time=50)
    # Times need not grow with seq (imported logs): the last event counts, not the latest time.
    await store.append("a", CHUNK, {"n": 1}, time=20)
    await store.append_batch(
        "b", [NewEvent(MSG, {"n": i}, "append", None, 100 + i) for i in range(3)]
    )
    await store.append("\ud800 odd", TITLE, {"title": "t"}, time=7)
    assert await store.read_last_event_times() == {"a": 20, "b": 102, "\ud800 odd": 7}
    await store.append("a", MSG, {"n": 2}, surface_op="append", time=10**12)
    await store.delete_session("b")
    assert await store.read_last_event_times() == {"a": 10**12, "\ud800 odd": 7}


async def test_last_event_times_of_many_sessions(store: SessionStore) -> None:
    ids = [f"s{i:04d}" for i in range(600)]
    for sid in ids:
        await store.create_session(sid, created_at=0)
    for i, sid in enumerate(ids):
        if i % 4:
            await store.append_batch(
                sid, [NewEvent(CHUNK, {"n": n}, None, None, i * 10 + n) for n in range(i % 4)]
            )
    times = await store.read_last_event_times()
    assert times == {sid: i * 10 + i % 4 - 1 for i, sid in enumerate(ids) if i % 4}


# --------------------------------------------------------------------------- strings

HOSTILE = [
    "",
    "\x00",
    "nul\x00inside",
    "\x1b[31mred\x1b[0m\x07",
    "\x7f\x9b\r\n\t\x0b\x0c",
    "\ud800",
    "\udfff",
    "lone \udc00 low",
    "\ud83d\ude00",  # a surrogate pair in a Python str: the astral character (SPEC 4.1)
    "\ude00\ud83d",  # a low then a high: two lone surrogates
    "😀",
    "\ud83d😀\ude00",
    "\u202eevil\u202c \u2066isolate\u2069",
    "[bold]markup[/bold] [link=http://x]y[/link]",
    '"quotes" \\backslash\\ \\u0000 \\ud800',
    "\ufeffbom \ufffe \uffff \U0010ffff",
    "<referenced-sessions>",
]


@pytest.mark.parametrize("given", HOSTILE, ids=[ascii(t) for t in HOSTILE])
async def test_hostile_strings_round_trip(store: SessionStore, given: str) -> None:
    # Every str comes back as it went in, a surrogate pair as its character (SPEC 4.1).
    text = merge_surrogate_pairs(given)
    header = await store.create_session(given, cwd=given, created_at=1)
    assert header.id == header.cwd == text
    assert header == await store.read_header(text)
    data = {text: text, "list": [text, {text: [text]}], "title": text}
    given_data = {given: given, "list": [given, {given: [given]}], "title": given}
    events = await store.append_batch(
        given,
        [
            NewEvent(MSG, given_data, "append"),
            NewEvent(TITLE, {"title": given, "source": {"kind": given}}),
            NewEvent(given or "t", given_data),
        ],
    )
    (got,) = await store.list_headers()
    assert (got.id, got.cwd) == (text, text)
    assert type(got.id) is str
    log = await store.read_events(text)
    assert log == events
    assert log[0].data == data
    assert log[2].type == (text or "t")
    assert (await store.read_titles([text]))[text].title == text
    assert (await store.read_titles())[text].source == {"kind": text}
    # Exactly the same code points, not merely equal after normalisation or pairing.
    assert [ord(c) for c in log[0].data["list"][0]] == [ord(c) for c in text]
    await store.delete_session(text)
    assert await store.list_headers() == []


async def test_a_surrogate_pair_is_the_astral_char_session(store: SessionStore) -> None:
    # SPEC 4.1: a high surrogate followed by a low one is the character, however written.
    header = await store.create_session("mig-hé\ud83d\ude80", cwd="\ud83d\ude00", created_at=1)
    assert (header.id, header.cwd) == ("mig-hé🚀", "😀")
    with pytest.raises(SessionExistsError):
        await store.create_session("mig-hé🚀", created_at=1)
    await store.append("mig-hé\ud83d\ude80", TITLE, {"title": "pair \ud83d\ude80"})
    assert [(h.id, h.cwd) for h in await store.list_headers()] == [("mig-hé🚀", "😀")]
    titles = await store.read_titles(["mig-hé\ud83d\ude80"])
    assert list(titles) == ["mig-hé🚀"] and titles["mig-hé🚀"].title == "pair 🚀"
    (event,) = await store.read_events("mig-hé🚀")
    assert event.data["title"] == "pair 🚀"
    assert await store.read_events("mig-hé\ud83d\ude80") == [event]


def _cut(text: str, limit: int) -> str:
    """The longest head of ``text`` within ``limit`` UTF-8 bytes (``surrogatepass``)."""
    while len(text.encode("utf-8", "surrogatepass")) > limit:
        text = text[:-1]
    return text


async def test_megabyte_strings(store: SessionStore) -> None:
    """A megabyte message, and an id, cwd and title as long as core.limits allows, made of
    NULs, lone surrogates, astral and bidi characters, come back exactly."""
    big = ("a\x00\ud800😀\u202e" * 200_000)[:1_000_000]
    sid, cwd, title = _cut(big[:2000], 1024), _cut(big[:5000], 4096), _cut(big[:2000], 1024)
    assert len(sid.encode("utf-8", "surrogatepass")) > 1010
    await store.create_session(sid, cwd=cwd, created_at=1)
    await store.append(sid, TITLE, {"title": title})
    await store.append(
        sid, MSG, {"text": big, "content": [{"type": "text", "text": big}]}, surface_op="append"
    )
    (header,) = await store.list_headers()
    assert header.id == sid and header.cwd == cwd
    _, last, surface = await store.read_surface_events(sid)
    assert last == 1
    assert surface[0].data["text"] == big
    assert (await store.read_titles())[sid].title == title

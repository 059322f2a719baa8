"""The sizes of ``core.limits`` on every write path of every store (issue 30): an id, cwd
or title over its limit is refused with an ``InvalidEventError`` naming the limit, and
nothing is stored."""

from __future__ import annotations

import re

import pytest

from core.errors import InvalidEventError
from core.limits import (
    MAX_CWD_BYTES,
    MAX_SESSION_ID_BYTES,
    MAX_TITLE_BYTES,
    MAX_TITLE_EVENT_BYTES,
)
from core.log import NewEvent, SessionHeader
from stores import SessionStore

TITLE = "session/title"
LONE = "\ud800"  # a lone surrogate: 3 bytes, as ``surrogatepass`` encodes it


def _message(what: str, limit: int, size: int) -> str:
    return re.escape(f"{what} may hold at most {limit:,} UTF-8 bytes (this one has {size:,})")


async def _nothing_stored(store: SessionStore) -> None:
    assert await store.list_headers() == []


async def test_a_20_mib_session_id_is_refused_in_one_line(store: SessionStore) -> None:
    huge = "x" * (20 * 1024 * 1024)
    with pytest.raises(InvalidEventError, match=_message("a session id", 1024, 20_971_520)):
        await store.create_session(huge)
    with pytest.raises(InvalidEventError, match=_message("a session id", 1024, 20_971_520)):
        await store.import_session(SessionHeader(huge, 1), [])
    await _nothing_stored(store)


@pytest.mark.parametrize(
    ("fits", "over"),
    [
        ("i" * MAX_SESSION_ID_BYTES, "i" * (MAX_SESSION_ID_BYTES + 1)),
        # 341 lone surrogates and a letter are 1,024 bytes; 342 of them are 1,026
        (LONE * 341 + "a", LONE * 342),
        ("é" * (MAX_SESSION_ID_BYTES // 2), "é" * (MAX_SESSION_ID_BYTES // 2) + "a"),
    ],
    ids=["ascii", "surrogates", "two-byte"],
)
async def test_session_ids_are_measured_in_utf8_bytes(
    store: SessionStore, fits: str, over: str
) -> None:
    size = len(over.encode("utf-8", "surrogatepass"))
    with pytest.raises(InvalidEventError, match=_message("a session id", 1024, size)):
        await store.create_session(over, created_at=1)
    with pytest.raises(InvalidEventError, match=_message("a session id", 1024, size)):
        await store.import_session(SessionHeader(over, 1), [NewEvent(TITLE, {"title": "t"})])
    await _nothing_stored(store)
    made = await store.create_session(fits, created_at=1)
    assert await store.list_headers() == [made]


async def test_a_cwd_over_the_limit_is_refused(store: SessionStore) -> None:
    over = "/" + "d" * MAX_CWD_BYTES
    with pytest.raises(InvalidEventError, match=_message("a cwd", 4096, MAX_CWD_BYTES + 1)):
        await store.create_session("s", cwd=over, created_at=1)
    with pytest.raises(InvalidEventError, match=_message("a cwd", 4096, MAX_CWD_BYTES + 1)):
        await store.import_session(SessionHeader("s", 1, over), [])
    await _nothing_stored(store)
    made = await store.create_session("s", cwd=over[:-1], created_at=1)
    assert (await store.read_header("s")).cwd == over[:-1] == made.cwd


def _title_over() -> dict[str, object]:
    return {"title": "t" * (MAX_TITLE_BYTES - 1) + "é", "source": {"kind": "user"}}


def _data_over() -> dict[str, object]:
    """A short title whose event data's JSON is one byte over its limit."""
    data: dict[str, object] = {"title": "t", "source": {"kind": "user"}, "note": ""}
    room = MAX_TITLE_EVENT_BYTES - len('{"title":"t","source":{"kind":"user"},"note":""}')
    data["note"] = "n" * (room + 1)
    return data


async def test_a_title_over_the_limit_is_refused_on_every_write_path(store: SessionStore) -> None:
    await store.create_session("s", created_at=1)
    title_error = _message("a title", 1024, MAX_TITLE_BYTES + 1)
    data_error = _message("a title event's data (as JSON)", 8192, MAX_TITLE_EVENT_BYTES + 1)
    for data, error in ((_title_over(), title_error), (_data_over(), data_error)):
        with pytest.raises(InvalidEventError, match=error):
            await store.append("s", TITLE, data)
        # a batch of the common shapes (the fast path) and one that is not (a dict subclass)
        for batch in (
            [NewEvent("turn/start", {"turn": 1}), NewEvent(TITLE, data)],
            [NewEvent("turn/start", {"turn": 1}), NewEvent(TITLE, _Dict(data))],
            (NewEvent(TITLE, data, time=5),),
        ):
            with pytest.raises(InvalidEventError, match=error):
                await store.append_batch("s", batch)
        with pytest.raises(InvalidEventError, match=error):
            await store.import_session(SessionHeader("t", 1), [NewEvent(TITLE, data)])
    assert await store.read_events("s") == []
    assert [h.id for h in await store.list_headers()] == ["s"]
    assert await store.read_titles() == {}


class _Dict(dict[str, object]):
    pass


async def test_titles_at_the_limits_are_stored(store: SessionStore) -> None:
    await store.create_session("s", created_at=1)
    longest = "t" * (MAX_TITLE_BYTES - 2) + "é"
    await store.append("s", TITLE, {"title": longest})
    data = _data_over()
    data["note"] = str(data["note"])[1:]  # exactly the limit
    await store.append_batch("s", [NewEvent(TITLE, data)])
    events = await store.read_events("s")
    assert [e.data["title"] for e in events] == [longest, "t"]
    assert (await store.read_titles())["s"].title == "t"


async def test_a_title_that_is_not_text_is_still_a_log_event(store: SessionStore) -> None:
    """Only the sizes are new: a ``session/title`` whose title is a number is kept as a
    log-only event, as before, and is no title."""
    await store.create_session("s", created_at=1)
    await store.append("s", TITLE, {"title": "named"})
    await store.append("s", TITLE, {"title": 5})
    assert (await store.read_titles())["s"].title == "named"
    assert store.damaged_rows() == ()

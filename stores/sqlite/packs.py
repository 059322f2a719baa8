"""Packs: runs of small log events stored many to one row (``KIND_PACK``), their layout
(header, chunk runs, linked runs, see ``_pack``), and reading them back (in Python or
by ``core._speedups``), with the replies their linked runs take their texts from.
"""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from collections.abc import Callable, Container, Iterable, Sequence
from itertools import accumulate, pairwise
from typing import Any

from core.jsoncodec import _encode_js, _speedups, dumps_js, loads_exact
from core.log import ASSISTANT_MESSAGE, Event, build_event
from stores.columns import encode_text
from stores.sqlite.encoding import _ZLIB_LEVEL, _inflate, _text
from stores.sqlite.sql import _DATA
from stores.validation import KIND_SURFACE

_PACK_MAX_EVENTS = 512
_PACK_MAX_BYTES = 64 * 1024
"""A pack holds at most this many events and this much JSON (so extending one, or
reading one event of it, stays cheap)."""
_PACK_EVENT_MAX = 2048
"""Larger events are stored in a row of their own."""


def _pack(types: Sequence[str], times: Sequence[int], datas: Sequence[str]) -> bytes:
    """A run of log events as one zlib-compressed BLOB.

    Uncompressed it is lines: a JSON header ``[types, index, times]`` or
    ``[types, index, times, runs]`` (the distinct types; ``0`` when there is one, else
    each event's index into them; the first time then each event's difference from the
    one before; the chunk runs, see below), then one line per event (JSON text never
    holds a raw newline). A header of three means no runs: every line is the event's data
    JSON text (the only layout before chunk runs, still read as it was).

    A chunk run ``[start, count, turn, step, index]`` (non-overlapping, in order) says
    that lines ``start .. start + count - 1`` hold only the escaped contents ``X`` of the
    chunk texts of events whose data JSON text is exactly
    ``{"turn":T,"step":S,"chunk":{"type":"text-delta","index":I,"text":"X"}}`` with
    ``T = turn``, ``S = step`` and ``I = index + k`` on the run's ``k``-th line (see
    ``_CHUNK_LINE``): a streamed reply's skeleton is stored once instead of on every
    line, and zlib sees the texts side by side (issue 15: 44 % smaller packs). A reader
    rebuilds each such line's text (``_chunk_line``) and parses it like any other.

    A linked run ``[start, count, turn, step, index, seq, block, offset, size]`` is such
    a run whose texts are not stored at all: they are consecutive slices of the text of
    block ``block`` of the ``assistant/message`` at ``seq`` (of the same session), from
    code point ``offset`` on, and the run's ``k``-th line holds only the length of the
    ``k``-th text in code points (decimal); ``size`` is the length of their escaped
    contents together (what bounds a pack, without reading the message). The append of
    that message links the runs of its turn and step in the packs right before it, as
    far back as each holds such a run (``_reply_packs``: the batch's, the open one, and
    those stored before it, so a long streamed reply is linked whole and paced appends
    write what one batch writes; ``_link_runs``: only when the texts joined are exactly
    a part of the block, and ``dumps_js`` of each text gives back its line), so a
    finished reply's text is stored once, in its message. A reader unlinks the run
    first (``_unlink_runs``: the slices, escaped by ``dumps_js`` as the append escaped
    them, make the very lines of the text run again), then reads it as a text run. A
    link to no row, to a row that is not an assistant message, to a block that is not
    text, or lengths that overrun the text are damage (``ValueError``). ``_pack`` itself
    writes text runs only.
    """
    lines: list[str] = []
    runs: list[list[int]] = []
    _add_lines(lines, runs, datas)
    return _pack_blob(types, times, lines, runs)


_DIGITS = r"(0|-?[1-9][0-9]{0,17})"
_CHUNK_LINE = re.compile(
    r'\{"turn":' + _DIGITS + r',"step":' + _DIGITS
    + r',"chunk":\{"type":"text-delta","index":' + _DIGITS
    + r',"text":"([^"\\]*+(?:\\.[^"\\]*+)*+)"\}\}'
)  # fmt: skip
"""The data JSON text of a streamed text chunk as ``dumps_js`` writes it: its turn,
step and index (canonical ints of at most 18 digits: ``str(int(x)) == x``, and every
index of a run fits a C ``long long``) and its text's escaped contents (one JSON string's
inside: no raw quote, no raw newline)."""


def _chunk_line(turn: int, step: int, index: int, chars: str) -> str:
    """The data JSON text a chunk run's line ``chars`` stands for (``_CHUNK_LINE``)."""
    return (
        f'{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{index},'
        f'"text":"{chars}"}}}}'
    )


def _add_lines(lines: list[str], runs: list[list[int]], datas: Iterable[str]) -> None:
    """Add events' data JSON texts to the lines and runs of a pack (see ``_pack``): a
    streamed text chunk joins the last run when it continues it (same turn and step, the
    next index, on the next line), else opens a run; any other text is a line as it is.
    Adding texts in several calls gives what one call with all of them gives (so a pack
    extended by paced appends is the pack one batch writes)."""
    match = _CHUNK_LINE.fullmatch
    last = runs[-1] if runs else None
    for text in datas:
        found = match(text)
        if found is None:
            lines.append(text)
            continue
        turn, step, index, chars = found.groups()
        t, s, i = int(turn), int(step), int(index)
        if (
            last is not None
            and len(last) == 5
            and last[0] + last[1] == len(lines)
            and last[4] + last[1] == i
            and last[2] == t
            and last[3] == s
        ):
            last[1] += 1
        else:
            last = [len(lines), 1, t, s, i]
            runs.append(last)
        lines.append(chars)


def _pack_blob(
    types: Sequence[str], times: Sequence[int], lines: list[str], runs: list[list[int]]
) -> bytes:
    table = list(dict.fromkeys(types))
    if len(table) == 1:
        index: int | list[int] = 0
    else:
        position = {t: i for i, t in enumerate(table)}
        index = [position[t] for t in types]
    deltas = [times[0], *(b - a for a, b in pairwise(times))]
    header: list[Any] = (
        [table, index, deltas, runs] if runs or not _plain_types(table) else [table, index, deltas]
    )
    return zlib.compress(
        (_pack_header(header) + "\n" + "\n".join(lines)).encode("utf-8"), _ZLIB_LEVEL
    )


def _pack_header(header: list[Any]) -> str:
    """A pack's header line: ``json.dumps(header, separators=(",", ":"))`` when every type
    is printable ASCII (written by the C encoder of ``dumps_js``, which then agrees: both
    escape only the quote and the backslash; it skips a per-int ``repr`` of the times),
    else ``dumps_js`` (non-ASCII kept as it is, each lone surrogate escaped on its own:
    ``_header_fields`` reads it back exactly). Such a header always has four fields."""
    if _plain_types(header[0]):
        text = _encode_js(header, False) if _encode_js is not None else None
        if text is not None:
            return text  # type: ignore[no-any-return]
        return json.dumps(header, separators=(",", ":"))
    return dumps_js(header)


def _plain_types(table: Iterable[str]) -> bool:
    """Whether every type of a pack's table is printable ASCII: its header is then
    ``json.dumps``' (three fields without runs), else ``dumps_js``' (four, see above)."""
    return all(t.isascii() and t.isprintable() for t in table)


def _header_fields(text: str) -> Any:
    """A pack's header line parsed. A header of four fields (chunk runs, or a type that
    is not printable ASCII: ``_pack_header``) is read as ``loads_exact`` reads (a pair is
    its character, SPEC §4.1: types are merged when appended, and the schema v10 upgrade
    merged those stored before), so a type holding lone surrogates comes back as it went in. A header
    of three with escapes in it was written before schema v7 by ``json.dumps``, which
    escaped every non-ASCII character and so wrote an astral character and the pair of
    lone surrogates alike: it is read as it always was (``json.loads``, pairs merged)."""
    fields = loads_exact(text, frozen=False)
    if "\\" in text and (fields.__class__ is not list or len(fields) != 4):
        return json.loads(text)
    return fields


def _pack_parts(blob: bytes) -> tuple[list[str], list[int], list[str], list[list[int]]]:
    """The types, times, stored lines and chunk runs of a pack (a run's lines still hold
    only their texts' contents, or their lengths; see ``_pack``). Anything but a pack
    ``_pack`` could have written raises ``ValueError`` (or ``TypeError``, ``zlib.error``)."""
    return _body_parts(_inflate(blob))


def _body_parts(text: str) -> tuple[list[str], list[int], list[str], list[list[int]]]:
    """``_pack_parts`` of an inflated pack."""
    header, body = text.split("\n", 1)
    fields = _header_fields(header)
    runs: list[list[int]] = []
    if fields.__class__ is list and len(fields) == 4:
        runs = fields.pop()
        if runs.__class__ is not list:
            raise ValueError("a pack's chunk runs are not a list")
    table, index, deltas = fields
    times = list(accumulate(deltas))
    types = [table[0]] * len(times) if index == 0 else [table[i] for i in index]
    lines = body.split("\n")
    end = 0
    for run in runs:
        if (
            run.__class__ is not list
            or len(run) not in (5, 9)
            or any(x.__class__ is not int for x in run)
            or run[0] < end
            or run[1] < 1
            or (len(run) == 9 and min(run[5:]) < 0)
        ):
            raise ValueError(f"an unexpected chunk run in a pack: {run!r}")
        end = run[0] + run[1]
    if end > len(lines):
        raise ValueError(f"a pack's chunk runs reach line {end} of {len(lines)}")
    return types, times, lines, runs


def _rebuild_lines(
    lines: list[str], runs: list[list[int]], picked: Iterable[int] | None = None
) -> list[str]:
    """The data JSON text of each event of a pack from its stored lines (only of the
    lines ``picked``, in order, when given)."""
    if not runs:
        return lines if picked is None else [lines[i] for i in picked]
    out = list(lines)
    for start, count, turn, step, index in runs:
        for k in range(count):
            out[start + k] = _chunk_line(turn, step, index + k, lines[start + k])
    return out if picked is None else [out[i] for i in picked]


def _pack_types(blob: bytes) -> list[str]:
    """The distinct types of a pack, decompressing only as far as its header line (a
    pack of streamed chunks is not inflated whole just to learn it holds chunks): the
    header's first field in both layouts (with and without chunk runs)."""
    inflater = zlib.decompressobj()
    head = b""
    data = blob
    while b"\n" not in head:
        if not data and not inflater.unconsumed_tail:
            break
        head += inflater.decompress(inflater.unconsumed_tail or data, 4096)
        data = b""
    table = _header_fields(head.split(b"\n", 1)[0].decode("utf-8"))[0]
    return [str(t) for t in table]


class _ReplyTexts:
    """The text blocks of the replies a read's chunk runs point at (see ``_pack``), each
    reply's row fetched and decoded once per read. A run pointing at no row, at a row
    that is not an assistant message, or at a block that is not text is ``ValueError``
    (the read names the file)."""

    __slots__ = ("_contents", "_fetch", "_gone", "_held", "_values")
    # How a reply's stored JSON is read (the schema v10 upgrade reads rows written before
    # it as they were written: ``loads_unmerged``).
    _loads: Callable[[str], Any] | None = None  # None: the module's loads_exact

    def __init__(
        self,
        fetch: Callable[[int], tuple[int, bytes, str | bytes] | None],
        gone: Callable[[], object] | None = None,
    ) -> None:
        self._fetch = fetch  # (kind, type, data) of the session's row at a seq
        self._gone = gone  # raises SessionNotFoundError when the session went meanwhile
        self._contents: dict[int, list[Any]] = {}
        self._held: dict[int, tuple[int, bytes, str | bytes]] = {}  # see ``hold``
        self._values: dict[int, tuple[str | bytes, Any]] = {}  # see ``value``

    def hold(self, rows: Iterable[Any]) -> None:
        """The read's own rows (``_EVENT_COLUMNS``): a reply among them is taken from
        here instead of being fetched again (a whole read holds every reply, after the
        packs pointing at it)."""
        for row in rows:
            if row[4] == KIND_SURFACE and row[2] == _ASSISTANT_MESSAGE_TYPE:
                self._held[row[0]] = (row[4], row[2], row[5])

    def value(self, seq: int, data: str | bytes) -> Any:
        """The decoded data of the row at ``seq`` holding ``data`` when a run took its
        texts from it, else ``None``: a read decodes each reply once (a decoded value is
        frozen, so the event may share it). The read is done with that row: neither is
        kept (a read holds no more raw rows than it did)."""
        self._held.pop(seq, None)
        found = self._values.pop(seq, None)
        return found[1] if found is not None and found[0] == data else None

    @classmethod
    def of(cls, raw: sqlite3.Connection, key: int) -> _ReplyTexts:
        """The replies of the session with this key."""
        sql = f"SELECT kind, type, {_DATA} FROM events WHERE session = ? AND seq = ?"
        return cls(lambda seq: raw.execute(sql, (key, seq)).fetchone())

    def __call__(self, seq: int, block: int) -> str:
        content = self._contents.get(seq)
        if content is None:
            row = self._held.get(seq) or self._fetch(seq)
            if row is None:
                if self._gone is not None:
                    self._gone()
                raise ValueError(f"a chunk run points at event {seq}, which is not stored")
            kind, raw_type, data = row
            if kind != KIND_SURFACE or raw_type != _ASSISTANT_MESSAGE_TYPE:
                raise ValueError(f"a chunk run points at event {seq}, not an assistant message")
            decoded = (self._loads or loads_exact)(_text(data))
            self._values[seq] = (data, decoded)
            message = decoded.get("message") if isinstance(decoded, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, list):
                raise ValueError(f"a chunk run points at event {seq}, which has no content")
            self._contents[seq] = content
        found = content[block] if block < len(content) else None
        text = found.get("text") if isinstance(found, dict) else None
        if found is None or found.get("type") != "text" or text.__class__ is not str:
            raise ValueError(f"a chunk run points at block {block} of event {seq}: not a text")
        return text


_ASSISTANT_MESSAGE_TYPE = encode_text(ASSISTANT_MESSAGE)


def _unlink_runs(
    body: bytes,
    first: int,
    wanted: Container[int] | None,
    replies: _ReplyTexts | None,
    escape: Callable[[list[str]], list[str]] | None = None,
) -> bytes:
    """An inflated pack whose chunk runs that point at a reply (see ``_pack``) are text
    runs again: each line's text is its slice of the reply's text block, escaped by
    ``dumps_js`` as the append escaped the chunk's text (the append linked the run only
    when those were the very texts of its lines), and the run loses its last four
    fields. A linked run none of whose seqs is ``wanted`` gets empty texts instead (no
    reader looks at them). Any other pack is returned as it is. (``escape``: how the
    append escaped the texts, ``_escaped_pieces`` by default.)"""
    newline = body.find(b"\n")
    if newline < 3 or body[newline - 3 : newline] != b"]]]":
        return body  # no chunk runs (a header's runs field is its last, a list of lists)
    fields = loads_exact(body[:newline].decode("utf-8"))  # lists are FrozenLists
    if (
        not isinstance(fields, list)
        or len(fields) != 4
        or not isinstance(fields[0], list)
        or any(t.__class__ is not str for t in fields[0])
        or not isinstance(fields[3], list)
        or all(not isinstance(run, list) or len(run) != 9 for run in fields[3])
    ):
        return body  # no linked run (or no pack: the reader says how)
    lines = body[newline + 1 :].decode("utf-8").split("\n")
    runs = list(fields[3])
    for r, run in enumerate(runs):
        if not isinstance(run, list) or len(run) != 9:
            continue
        if any(x.__class__ is not int for x in run) or min(run[5:]) < 0 or run[0] < 0:
            raise ValueError(f"an unexpected chunk run in a pack: {run!r}")
        start, count, _turn, _step, _index, seq, block, offset, size = run
        if count < 1 or start + count > len(lines):
            raise ValueError(f"a pack's chunk runs reach line {start + count} of {len(lines)}")
        if wanted is not None and not any(first + start + k in wanted for k in range(count)):
            lines[start : start + count] = [""] * count
        else:
            if replies is None:
                raise ValueError(f"a chunk run points at event {seq}, which this read cannot see")
            text = replies(seq, block)
            stored = ",".join(lines[start : start + count])
            lengths = loads_exact("[" + stored + "]")  # ValueError when not JSON
            if len(lengths) != count or set(map(type, lengths)) != {int} or min(lengths) < 0:
                raise ValueError(f"a chunk run's lengths are not lengths: {stored[:40]!r}")
            bounds = list(accumulate(lengths, initial=offset))
            if bounds[-1] > len(text):
                raise ValueError(
                    f"a chunk run reaches code point {bounds[-1]} of a text of {len(text)} "
                    f"(event {seq})"
                )
            escaped = (escape or _escaped_pieces)([text[a:b] for a, b in pairwise(bounds)])
            if sum(map(len, escaped)) != size:
                raise ValueError(f"a chunk run's texts are not the {size} characters it says")
            lines[start : start + count] = escaped
        runs[r] = list(run[:5])
    header = [fields[0], fields[1], fields[2], runs]
    return (_pack_header(header) + "\n" + "\n".join(lines)).encode("utf-8")


def _escaped_pieces(pieces: list[str]) -> list[str]:
    """Each text as ``dumps_js`` escapes it, without its quotes: one encoding of them all
    split at the '","' between them, unless that is found inside a text too (after a
    backslash: an escaped quote then a comma, as in a chunk ending in '",'), when each is
    escaped alone. Inside an escaped text every quote follows a backslash, so a split
    with no '\\","' anywhere is the right one."""
    joined = dumps_js(pieces)[2:-2]
    if '\\","' in joined:
        return [dumps_js(piece)[1:-1] for piece in pieces]
    return joined.split('","')


def _unpack_events(
    first: int,
    n: int,
    blob: bytes,
    wanted: Container[int] | None = None,
    replies: _ReplyTexts | None = None,
) -> list[Event]:
    """The pack's events (only those whose seq is in ``wanted``, when given); its chunk
    runs that point at a reply take their texts from ``replies`` (``_unlink_runs``).

    ``core._speedups.unpack_events`` decodes them in one C pass where it is built (chunk
    runs included: it rebuilds each run line's text, then parses it); it declines
    (``ValueError``) any pack but the plain ones ``_pack`` writes, which then take the
    reference path (``_py_unpack_events``: its value, or its error)."""
    body = _unlinked(zlib.decompress(blob), first, wanted, replies)
    if _C_UNPACK_EVENTS is not None:
        try:
            return _C_UNPACK_EVENTS(first, n, body, wanted)
        except ValueError:
            pass
    return _py_unpack_body(first, n, body, wanted)


_C_UNPACK_EVENTS: Callable[[int, int, bytes, Container[int] | None], list[Event]] | None = getattr(
    _speedups, "unpack_events", None
)


def _unlinked(
    body: bytes, first: int, wanted: Container[int] | None, replies: _ReplyTexts | None
) -> bytes:
    """``_unlink_runs`` of the inflated pack: by ``core._speedups.unlink_runs`` where it
    is built (the very bytes, in one C pass over the lines, each text escaped straight
    into UTF-8); it declines (``ValueError``) the packs the store does not write, damaged
    ones among them, which then take the reference path (its value, or its error)."""
    if _C_UNLINK_RUNS is not None:
        try:
            return _C_UNLINK_RUNS(body, first, wanted, replies)
        except ValueError:
            pass
    return _unlink_runs(body, first, wanted, replies)


_C_UNLINK_RUNS: Callable[[bytes, int, Container[int] | None, _ReplyTexts | None], bytes] | None = (
    getattr(_speedups, "unlink_runs", None)
)


def _py_unpack_events(
    first: int,
    n: int,
    blob: bytes,
    wanted: Container[int] | None = None,
    replies: _ReplyTexts | None = None,
) -> list[Event]:
    """``_unpack_events`` in Python: the reference of the C version."""
    body = _unlink_runs(zlib.decompress(blob), first, wanted, replies)
    return _py_unpack_body(first, n, body, wanted)


def _py_unpack_body(
    first: int, n: int, body: bytes, wanted: Container[int] | None = None
) -> list[Event]:
    """``_py_unpack_events`` of an inflated pack without linked runs."""
    types, times, lines, runs = _body_parts(body.decode("utf-8"))
    if any(len(run) != 5 for run in runs):
        raise ValueError("a pack's chunk run points at a reply this read did not resolve")
    build = build_event
    if wanted is not None:
        if len(lines) != n or len(types) != n:
            raise ValueError(f"a pack of {n} events holds {len(lines)}")
        picked = [i for i in range(n) if first + i in wanted]
        datas = loads_exact("[" + ",".join(_rebuild_lines(lines, runs, picked)) + "]")
        return [
            build(first + i, types[i], times[i], data, None, None)
            for i, data in zip(picked, datas, strict=True)
        ]
    datas = loads_exact("[" + ",".join(_rebuild_lines(lines, runs)) + "]")
    if not (len(types) == len(datas) == n):
        raise ValueError(f"a pack of {n} events holds {len(datas)}")
    return [
        build(first + i, type_, time, data, None, None)
        for i, (type_, time, data) in enumerate(zip(types, times, datas, strict=True))
    ]


class _DamagedPack(Exception):
    """The open pack an append would extend, or a linked message row it must make whole,
    does not decode (the append names the file)."""

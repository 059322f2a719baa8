"""Pack drafts: the packs an append writes or extends, and the linking of a streamed
reply's chunk runs to the message that holds their text (``_link_runs``).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Sequence
from typing import Any

from core.jsoncodec import dumps_js, loads_exact
from core.log import ValidatedEvent
from stores.sqlite.packs import (
    _PACK_MAX_BYTES,
    _PACK_MAX_EVENTS,
    _add_lines,
    _chunk_line,
    _DamagedPack,
    _pack_blob,
    _pack_parts,
)
from stores.sqlite.sql import KIND_PACK


class _PackDraft:
    """A pack being written by an append: its events' types and times, its stored lines
    and chunk runs (see ``_pack``); compressed once the batch's replies are linked."""

    __slots__ = ("first", "lines", "linked", "runs", "times", "types")

    def __init__(
        self,
        first: int,
        types: list[str],
        times: list[int],
        lines: list[str] | None = None,
        runs: list[list[int]] | None = None,
    ) -> None:
        self.first = first
        self.types = types
        self.times = times
        self.lines: list[str] = [] if lines is None else lines
        self.runs: list[list[int]] = [] if runs is None else runs
        self.linked = False  # whether ``_link_runs`` pointed a run of it at a reply

    def blob(self) -> bytes:
        return _pack_blob(self.types, self.times, self.lines, self.runs)


def _with_blob(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """An insert row whose data is a ``_PackDraft``, with the draft's blob instead."""
    return (*row[:6], row[6].blob(), *row[7:])


def _open_draft(open_pack: tuple[int, int, bytes], first: int) -> _PackDraft | None:
    """The open pack (the session's last row, ``(seq, n, blob)``) as a draft, when it
    ends right before ``first`` (else ``None``); laid out as ``_pack`` lays it out. One
    that does not decode is ``_DamagedPack``."""
    seq, n, blob = open_pack
    if seq + n != first:
        return None
    try:
        types, times, lines, runs = _pack_parts(blob)
    except (ValueError, TypeError, zlib.error) as err:
        raise _DamagedPack(str(err)) from err
    if not runs:
        # A pack without chunk runs (one written before them, or one without chunks):
        # its lines are its texts, laid out again as ``_pack`` lays them out.
        lines, texts = [], lines
        _add_lines(lines, runs, texts)
    return _PackDraft(seq, types, times, lines, runs)


def _fill_draft(draft: _PackDraft, batch: Sequence[ValidatedEvent], end: int) -> int:
    """Move as many of ``batch[:end]`` into the open pack as it has room for; the index
    of the first event left over."""
    n = len(draft.types)
    if n >= _PACK_MAX_EVENTS:
        return 0
    size = _text_size(draft.lines, draft.runs)
    take = 0
    while take < end and n + take < _PACK_MAX_EVENTS:
        size += len(batch[take].data_json) + 1
        if size > _PACK_MAX_BYTES:
            break
        take += 1
    if take == 0:
        return 0
    added = batch[:take]
    _add_lines(draft.lines, draft.runs, [e.data_json for e in added])
    draft.types += [e.type for e in added]
    draft.times += [e.time for e in added]
    return take


def _reply_packs(
    raw: sqlite3.Connection,
    key: int,
    rows: Sequence[tuple[Any, ...]],
    opened: _PackDraft | None,
    stored: dict[int, _PackDraft | None],
    seq: int,
    data: Any,
) -> list[_PackDraft]:
    """The packs a reply at ``seq`` may link (``_link_runs``), in order: the packs right
    before it, walking back over the rows (this batch's ``rows``, then the open pack,
    then the packs stored before it, read once into ``stored`` by the seq they end
    before) while each holds a chunk run of the reply's turn and step. The same packs
    whether the reply was appended in one batch or streamed in many (paced and batch
    appends write the same packs), and a reply of many packs is linked whole."""
    turn, step = data.get("turn"), data.get("step")

    def of_reply(draft: _PackDraft) -> bool:
        return any(run[2] == turn and run[3] == step for run in draft.runs)

    chain: list[_PackDraft] = []
    for row in reversed(rows):
        if row[1] >= seq:
            continue
        draft = row[6]
        if draft.__class__ is not _PackDraft or not of_reply(draft):
            chain.reverse()
            return chain
        chain.append(draft)
    if opened is not None and of_reply(opened):
        chain.append(opened)
        before = opened.first
        while True:
            if before not in stored:
                stored[before] = _stored_pack_before(raw, key, before)
            found = stored[before]
            if found is None or not of_reply(found):
                break
            chain.append(found)
            before = found.first
    chain.reverse()
    return chain


def _stored_pack_before(raw: sqlite3.Connection, key: int, before: int) -> _PackDraft | None:
    """The session's row ending right before seq ``before`` as a draft, when it is a pack
    that decodes (a damaged one is left as it is: its readers name the damage)."""
    row = raw.execute(
        "SELECT seq, n, kind, data FROM events WHERE session = ? AND seq < ? "
        "ORDER BY seq DESC LIMIT 1",
        (key, before),
    ).fetchone()
    if row is None or row[2] != KIND_PACK:
        return None
    try:
        return _open_draft((row[0], row[1], row[3]), before)
    except _DamagedPack:
        return None


def _link_runs(drafts: Sequence[_PackDraft], replies: Sequence[tuple[int, Any]]) -> None:
    """Point the chunk runs of ``drafts`` at the reply that holds their text (issue 15):
    for each ``assistant/message`` of the batch (``(seq, data)``), each text run of the
    same turn and step before it whose texts joined are, exactly, a part of one of the
    message's text blocks becomes ``[start, count, turn, step, index, seq, block, offset,
    chars]`` with each line the length of its text in code points (see ``_pack``). A run
    that matches nothing stays as it is; a draft that changed says so (``linked``)."""
    for seq, data in replies:
        turn, step = data.get("turn"), data.get("step")
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if turn.__class__ is not int or step.__class__ is not int or not isinstance(content, list):
            continue
        blocks = [
            (b, block["text"])
            for b, block in enumerate(content)
            if isinstance(block, dict)
            and block.get("type") == "text"
            and block.get("text").__class__ is str
        ]
        if not blocks:
            continue
        after: dict[int, int] = {}  # where the last run found in each block ended
        for draft in drafts:
            for r, run in enumerate(draft.runs):
                start, count, run_turn, run_step = run[0], run[1], run[2], run[3]
                if (
                    len(run) != 5
                    or run_turn != turn
                    or run_step != step
                    or draft.first + start + count > seq
                ):
                    continue
                chars = draft.lines[start : start + count]
                stored = '["' + '","'.join(chars) + '"]'
                try:
                    texts = loads_exact(stored)
                except ValueError:
                    continue
                # Only when the read rebuilds these very lines from the texts (it escapes
                # each with ``dumps_js``, as the append wrote it).
                if dumps_js(texts) != stored:
                    continue
                whole = "".join(texts)
                if not whole:
                    continue
                for b, text in blocks:
                    at = text.find(whole, after.get(b, 0))
                    if at < 0:
                        at = text.find(whole)
                    if at >= 0:
                        break
                else:
                    continue
                after[b] = at + len(whole)
                draft.runs[r] = [*run, seq, b, at, sum(map(len, chars))]
                draft.lines[start : start + count] = [str(len(t)) for t in texts]
                draft.linked = True


def _text_size(lines: list[str], runs: list[list[int]]) -> int:
    """The length of a pack's data JSON texts joined by newlines (what bounds a pack),
    from its stored lines and chunk runs without rebuilding them."""
    size = sum(map(len, lines)) + len(lines) - 1
    for run in runs:
        start, count, turn, step, index = run[:5]
        skeleton = len(_chunk_line(turn, step, 0, "")) - 1  # without the index's digit
        size += count * skeleton + sum(len(str(index + k)) for k in range(count))
        if len(run) == 9:  # its lines hold lengths, its texts' escaped size is its last
            size += run[8] - sum(map(len, lines[start : start + count]))
    return size

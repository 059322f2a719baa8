"""The C read path of ``core/_speedups.c`` on linked runs (a pack's text runs that the
store linked to the reply after them, ``_link_runs``) against the Python unlinking: the
same texts, damaged links read alike or declined."""

from __future__ import annotations

import json
import zlib
from collections.abc import Container
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.jsoncodec import dumps_js, loads_exact
from stores import sqlite as sqlite_store
from tests.core.speedups_reads_helpers import (
    any_text,
    chunk_text,
    json_values,
    outcome,
    same_outcome,
    speedups,
    wanted_of,
)

# ---------------------------------------------------------------- linked runs (packs)

# What escapes differently, or fools a split of the escaped texts joined: astral
# characters (one code point, two UTF-16 units), lone surrogates, control characters,
# CJK, quotes, backslashes, a quote then a comma.
LINKED_PIECES = [
    '",', '","', "\\", '"', ",", "😀", "\ud83d", "\ude00", "\x00", "\x1f", "\x7f", "中文", "</",
    "\u2028", "é", "\n", "\t", " ",
]  # fmt: skip
linked_text = st.lists(st.sampled_from(LINKED_PIECES) | any_text, max_size=4).map("".join)


def reply_data(turn: int, step: int, blocks: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {"content": [{"type": kind, "text": text} for kind, text in blocks]},
    }


def reply_texts(replies: dict[int, dict[str, Any]]) -> sqlite_store._ReplyTexts:
    """The store's reader of replies over these messages (by seq) instead of a session."""
    kind, message = sqlite_store.KIND_SURFACE, sqlite_store._ASSISTANT_MESSAGE_TYPE
    return sqlite_store._ReplyTexts(
        lambda seq: (kind, message, dumps_js(replies[seq])) if seq in replies else None
    )


@st.composite
def linked_packs(
    draw: st.DrawFn,
) -> tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]]:
    """A pack whose text runs the store linked to the replies after it (``_link_runs``):
    replies whose text is the runs' texts with text around them, in a block among
    others; other lines around the runs; some runs left text runs (their reply differs).
    Its first seq, count, blob, data JSON texts and the replies by seq."""
    first = draw(st.integers(min_value=0, max_value=2**40))
    datas: list[str] = []
    replies: dict[int, dict[str, Any]] = {}
    for turn in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            datas.append(dumps_js(draw(json_values)))
        pieces = draw(st.lists(linked_text, min_size=1, max_size=10))
        index = draw(st.integers(0, 5))
        datas += [chunk_text(turn, 0, index + k, t) for k, t in enumerate(pieces)]
        text = draw(linked_text) + "".join(pieces) + draw(linked_text)
        if draw(st.integers(0, 5)) == 0:
            text = text.replace("".join(pieces), "") + "?"  # not its chunks: no link
        blocks = [("text", text)]
        if draw(st.booleans()):
            blocks.insert(0, ("reasoning", draw(linked_text)))
        # as the store holds a reply: validated, so a surrogate pair is its character
        # (SPEC §4.1) and chunks holding its two halves apart are not its text
        replies[turn] = loads_exact(dumps_js(reply_data(turn, 0, blocks)), frozen=False)
    if draw(st.booleans()):
        datas.append(dumps_js({"turn": 0, "status": "completed"}))
    n = len(datas)
    times = list(range(1000, 1000 + n))
    draft = sqlite_store._PackDraft(first, ["assistant/chunk"] * n, times)
    sqlite_store._add_lines(draft.lines, draft.runs, datas)
    by_seq = {first + n + turn: data for turn, data in replies.items()}
    sqlite_store._link_runs([draft], list(by_seq.items()))
    return first, n, draft.blob(), datas, by_seq


def check_unlink(
    body: bytes, first: int, wanted: Container[int] | None, replies: dict[int, Any] | None
) -> tuple[str, Any]:
    """The C unlinking of a pack gives the Python one's very bytes, or declines; its
    outcome (the Python one's)."""

    def texts() -> sqlite_store._ReplyTexts | None:
        return None if replies is None else reply_texts(replies)

    want = outcome(lambda: sqlite_store._unlink_runs(body, first, wanted, texts()))
    fast = outcome(lambda: speedups.unlink_runs(body, first, wanted, texts()))
    if fast[0] == "value":
        assert fast == want, (body, fast, want)
    else:
        assert issubclass(fast[1], ValueError)
    assert outcome(lambda: sqlite_store._unlinked(body, first, wanted, texts())) == want
    return want


def check_linked_pack(
    first: int, n: int, blob: bytes, wanted: Container[int] | None, replies: dict[int, Any]
) -> None:
    """Both readers of a pack with linked runs agree: its events, or their error."""
    want = outcome(
        lambda: sqlite_store._py_unpack_events(first, n, blob, wanted, reply_texts(replies))
    )
    got = outcome(lambda: sqlite_store._unpack_events(first, n, blob, wanted, reply_texts(replies)))
    assert same_outcome(got, want), (got, want)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(linked_packs(), st.data())
def test_unlink_runs_is_the_python_unlinking(
    pack: tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]], data: st.DataObject
) -> None:
    """On the packs the store links the C version never declines: the Python version's
    bytes, whose events are the very texts written (wanted ones: the texts of runs with
    no seq wanted are not looked at, so not fetched)."""
    first, n, blob, datas, replies = pack
    body = zlib.decompress(blob)
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    for seqs in (None, wanted):
        kind, unlinked = check_unlink(body, first, seqs, replies)
        assert kind == "value"
        events = sqlite_store._py_unpack_body(first, n, unlinked, seqs)
        assert [dumps_js(e.data) for e in events] == [
            datas[i] for i in range(n) if seqs is None or first + i in seqs
        ]
        check_linked_pack(first, n, blob, seqs, replies)
    linked = [run for run in header_of(body)[3] if len(run) == 9]
    if linked and wanted is not None:
        unseen = {seq for run in linked for seq in range(first + run[0], first + sum(run[:2]))}
        if not unseen & {s for s in range(first, first + n) if s in wanted}:
            assert check_unlink(body, first, wanted, None)[0] == "value"  # no reply read


def header_of(body: bytes) -> Any:
    return json.loads(body.split(b"\n", 1)[0])


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(linked_packs(), st.data())
def test_unlink_runs_agrees_on_damaged_links(
    pack: tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]], data: st.DataObject
) -> None:
    """A linked run changed (each of its fields, its lengths, its reply's text) or bytes
    of the pack changed: the same bytes or the same error on both paths."""
    first, n, blob, _datas, replies = pack
    body = zlib.decompress(blob)
    head, *lines = body.split(b"\n")
    fields = header_of(body)
    linked = [r for r, run in enumerate(fields[3]) if len(run) == 9]
    damage = data.draw(st.sampled_from(["field", "length", "reply", "bytes"]))
    if damage == "field" and linked:
        run = fields[3][data.draw(st.sampled_from(linked))]
        at = data.draw(st.integers(0, 9))
        value = data.draw(
            st.sampled_from([-1, 0, 1, 2, n, n + 1, 2**63, True, 1.0, "1", None])
            | st.integers(-3, 3).map(lambda d, v=run[at % 9]: v + d)
        )
        if at == 9:
            run.append(value)
        else:
            run[at] = value
        head = dumps_js(fields).encode()
    elif damage == "length" and linked:
        run = fields[3][data.draw(st.sampled_from(linked))]
        k = run[0] + data.draw(st.integers(0, run[1] - 1))
        lines[k] = data.draw(
            st.sampled_from([b"", b"-1", b"-0", b" 1", b"01", b"1.0", b"1e1", b"x", b"[1]"])
            | st.sampled_from([b"1,2", b"99999999999999999999", b"true", b'"1"', b"\xff"])
            | st.integers(0, 40).map(lambda v: str(v).encode())
        )
    elif damage == "reply":
        seq = data.draw(st.sampled_from(sorted(replies)))
        content = replies[seq]["message"]["content"]
        block = data.draw(st.integers(0, len(content) - 1))
        content[block] = data.draw(
            st.sampled_from(
                [
                    {"type": "text", "text": content[block]["text"][1:]},
                    {"type": "text", "text": content[block]["text"] + "x"},
                    {"type": "text", "text": "x" + content[block]["text"]},
                    {"type": "reasoning", "text": content[block]["text"]},
                    {"type": "text", "text": 5},
                    {"type": "text"},
                ]
            )
        )
        if data.draw(st.integers(0, 5)) == 0:
            del replies[seq]
    else:
        damaged = bytearray(body)
        for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
            at = data.draw(st.integers(min_value=0, max_value=len(damaged) - 1))
            damaged[at] = data.draw(
                st.sampled_from(b'\n\\"{}[],:0-9 \x01\x80\xc3\xa9\xed\xa0\xff')
                | st.integers(0, 255)
            )
        head, *lines = bytes(damaged).split(b"\n")
    body = b"\n".join([head, *lines])
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    check_unlink(body, first, wanted, replies)
    check_unlink(body, first, wanted, None)
    blob = zlib.compress(body)
    for count in (n, n + data.draw(st.sampled_from([-1, 1]))):
        check_linked_pack(first, count, blob, wanted, replies)


def test_unlink_runs_on_hand_made_links() -> None:
    """Damage the store-level tests name one by one, and what the C version declines."""
    replies = {9: reply_data(1, 0, [("reasoning", "r"), ("text", 'ab"c\ud83d😀')])}
    lines = b"2\n2\n2"  # 'ab', '"c', then the surrogate and the astral character
    for run in [
        b"[0,3,1,0,0,9,1,0,12]", b"[0,3,1,0,0,9,1,0,13]", b"[0,3,1,0,0,9,1,1,12]",
        b"[0,3,1,0,0,8,1,0,12]", b"[0,3,1,0,0,9,0,0,12]", b"[0,3,1,0,0,9,2,0,12]",
        b"[0,3,1,0,0,9,1,-1,12]", b"[0,3,1,0,0,9,1,0]", b"[0,3,1,0,0,9,1,0,true]",
        b"[0,4,1,0,0,9,1,0,12]", b"[1,2,1,0,0,9,1,0,12]", b"[0,0,1,0,0,9,1,0,12]",
        b"[-1,3,1,0,0,9,1,0,12]", b"[0,2,1,0,0,9,1,0,5],[1,2,1,0,0,9,1,2,10],[2,1,1,0,2,9,1,4,7]",
        b"[0,3,1,0,0,9,1,0,12],[0,3,1,0,0]", b"[0,2,1,0,0,9,1,0,5],[2,1,1,0,2,9,1,4,7]", b"[0,3,1,0,0,9,1,0,12],7", b"[0,3,1,0,0,9,1,0,12.0]",
        b"[0,3,1,0,0,9,1,0,9223372036854775808]", b"[0,3,1,0,0,9223372036854775807,1,0,12]",
    ]:  # fmt: skip
        for head in [b'[["t"],0,[5,1,1],[' + run + b"]]", b'[["t"] ,0,[5,1,1],[' + run + b"]]"]:
            for body in [head + b"\n" + lines, head + b"\n" + lines.replace(b"2\n2", b"2\n02")]:
                for wanted in (None, {7}, {8}, {9}, [7, 9], set()):
                    check_unlink(body, 7, wanted, replies)
                    check_unlink(body, 7, wanted, None)
                    for n in (2, 3, 4):
                        check_linked_pack(7, n, zlib.compress(body), wanted, replies)
    run = b"[0,3,1,0,0,9,1,0,12]"
    for head in [
        b'[["t"],0,[5,1,1],[' + run + b"]]", b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3]]]",
        b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0]]]", b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3,4]]]",
        b'[["t"],0,[5,1,1],[' + run + b",]]", b'[["t"],0,[5,1,1],[' + run + b"],[]]",
        b'[["t"],0,[5,1,1],[' + run + b"]] ", b' [["t"],0,[5,1,1],[' + run + b"]]",
        b'[["t","u"],[0,1,0],[5,1,1],[' + run + b"]]", b'[[],0,[5,1,1],[' + run + b"]]",
        b'[["\xc3\xa9\xe2\x80\xa8\x7f"],0,[5,1,1],[' + run + b"]]",
        b'[["\x01"],0,[5,1,1],[' + run + b"]]", b'[["\xed\xa0\x80"],0,[5,1,1],[' + run + b"]]",
        b'[["\xff"],0,[5,1,1],[' + run + b"]]", b'[["\xff"],0,[5,1,1],[[0,3,1,0,0]]]',
        b'[["t"],0,[5,-0,1],[' + run + b"]]", b'[["t"],0,[5,01,1],[' + run + b"]]",
        b'[["t"],0,[5,1.0,1],[' + run + b"]]", b'[["t"],-0,[5,1,1],[' + run + b"]]",
        b'[["t"],0,[1234567890123456789,1,1],[' + run + b"]]", b'[["t"],0,[],[' + run + b"]]",
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,012]]]', b'[["t"],0,[5,1,1],[[0,3,-0,0,0,9,1,0,12]]]',
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,1e1]]]', b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]',
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]]]', b'[["t"];0,[5,1,1],[' + run + b"]]",
        b'["t",0,[5,1,1],[' + run + b"]]", b'[["t"],0,[5,1,1],[' + run + b"],7]",
    ]:  # fmt: skip
        for wanted in (None, {7}, {9}):
            body = head + b"\n" + lines
            check_unlink(body, 7, wanted, replies)
            check_linked_pack(7, 3, zlib.compress(body), wanted, replies)
    for head in [  # as the encoder writes them: taken
        b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3]]]", b'[[],0,[],[[0,1,2,3,4],' + run + b"]]",
        b'[["t","u"],[0,1,0],[5,-1,1],[' + run + b"]]", b'[["\xc3\xa9\xe2\x80\xa8"],0,[5],[' + run + b"]]",
    ]:  # fmt: skip
        speedups.unlink_runs(head + b"\n" + lines, 7, None, reply_texts(replies))
    body = b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]]\n' + lines
    assert check_unlink(body, 7, None, replies) == (
        "value",
        b'[["t"],0,[5,1,1],[[0,3,1,0,0]]]\nab\n\\"c\n\\ud83d\xf0\x9f\x98\x80',
    )

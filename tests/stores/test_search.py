"""Full-text search of messages (issue 18, ``core.search``), one behaviour on every store."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import InvalidEventError
from core.log import NewEvent, Replace, SessionHeader, assistant_message, user_message
from core.search import RANK_WINDOW, SNIPPET_WIDTH, SearchHit, rank_hits
from stores import SessionStore

MSG = "user/message"
ASSISTANT = "assistant/message"
STEER = "steering/message"
TOOL = "tool/result"
CHUNK = "assistant/chunk"
TITLE = "session/title"
CHECKPOINT = {"kind": "plugin", "plugin": "compact"}


def reply(text: str | list[dict[str, Any]]) -> dict[str, Any]:
    return {"turn": 1, "step": 0, "message": assistant_message(text, provider="p", model="m")}


async def session(store: SessionStore, sid: str, *texts: str) -> SessionHeader:
    """A session whose messages alternate user, assistant."""
    header = await store.create_session(sid, created_at=1)
    for i, text in enumerate(texts):
        if i % 2 == 0:
            await store.append(sid, MSG, user_message(text), surface_op="append")
        else:
            await store.append(sid, ASSISTANT, reply(text), surface_op="append")
    return header


def places(hits: list[SearchHit]) -> list[tuple[str, int]]:
    return [(h.session_id, h.seq) for h in hits]


def marked(hit: SearchHit) -> list[str]:
    return [hit.snippet[a:b] for a, b in hit.spans]


async def test_user_and_assistant_messages_are_found_case_insensitively(
    store: SessionStore,
) -> None:
    await session(store, "a", "How should we retry?", "Settle the RETRY policy: three tries")
    await session(store, "b", "nothing to see here")
    hits = await store.search_messages("retry policy")
    assert places(hits) == [("a", 1)]
    assert hits[0].snippet == "Settle the RETRY policy: three tries"
    assert marked(hits[0]) == ["RETRY", "policy"]
    # Substrings inside words; every term must be there.
    assert places(await store.search_messages("etr")) in (
        [("a", 1), ("a", 0)],
        [("a", 0), ("a", 1)],
    )
    assert await store.search_messages("retry unicorn") == []


async def test_scripts_without_spaces_are_found_by_substring(store: SessionStore) -> None:
    await session(store, "cjk", "我们决定了重试策略是三次", "好的，明白")
    await session(store, "greek", "Η ΠΟΛΙΤΙΚΗ επανάληψης")
    hits = await store.search_messages("重试策略")
    assert places(hits) == [("cjk", 0)]
    assert marked(hits[0]) == ["重试策略"]
    # Two characters: shorter than a trigram, found by the fallback scan.
    assert places(await store.search_messages("重试")) == [("cjk", 0)]
    assert places(await store.search_messages("明白")) == [("cjk", 1)]
    assert places(await store.search_messages("ΠΟΛΙΤΙΚΗ")) == [("greek", 0)]


async def test_short_terms_are_found_newest_first(store: SessionStore) -> None:
    await session(store, "s", "ok one", "fine", "OK two", "no match")
    hits = await store.search_messages("ok")
    assert places(hits) == [("s", 2), ("s", 0)]
    assert marked(hits[0]) == ["OK"]
    # A short term narrows a long one.
    await session(store, "t", "retry ok", "retry later")
    assert places(await store.search_messages("retry ok")) == [("t", 0)]


async def test_only_what_was_said_is_indexed(store: SessionStore) -> None:
    sid = "s"
    await store.create_session(sid, created_at=1)
    reasoning = [
        {"type": "reasoning", "text": "hidden thoughts zebra"},
        {"type": "text", "text": "visible answer"},
        {"type": "tool-call", "id": "c1", "name": "zebra_tool", "arguments": "{}"},
    ]
    await store.append(sid, ASSISTANT, reply(reasoning), surface_op="append")
    tool = {"kind": "tool", "callId": "c1"}
    result = {"turn": 1, "step": 0, "message": user_message("zebra output", source=tool)}
    await store.append(sid, TOOL, result, surface_op="append")
    plugin = user_message("zebra context", source={"kind": "plugin", "plugin": "x"})
    await store.append(sid, MSG, plugin, surface_op="append")
    snapshot = user_message(
        "<session-references>zebra from another session</session-references>",
        source={"kind": "session-reference", "version": 1, "references": []},
    )
    await store.append(sid, MSG, snapshot, surface_op="append")
    chunk = {"turn": 1, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": "zebra"}}
    await store.append(sid, CHUNK, chunk)
    await store.append(sid, TITLE, {"title": "zebra title", "source": {"kind": "user"}})
    # A message logged without a surface op is not on the surface either.
    await store.append(sid, "vendor/note", {"message": user_message("zebra note")})
    assert await store.search_messages("zebra") == []
    assert places(await store.search_messages("visible")) == [(sid, 0)]
    steering = {"turn": 1, "message": user_message("steer toward zebra")}
    await store.append(sid, STEER, steering, surface_op="append")
    assert places(await store.search_messages("zebra")) == [(sid, 7)]


async def test_replaced_messages_leave_and_a_checkpoint_is_found(store: SessionStore) -> None:
    await session(store, "s", "alpha question", "alpha answer", "beta question")
    summary = user_message("summary: we discussed gamma", source=CHECKPOINT)
    await store.append("s", MSG, summary, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    assert await store.search_messages("alpha") == []
    assert places(await store.search_messages("beta")) == [("s", 2)]
    assert places(await store.search_messages("gamma")) == [("s", 3)]
    # A checkpoint replaced in turn (nested compaction) leaves too.
    again = user_message("summary: delta", source=CHECKPOINT)
    await store.append("s", MSG, again, surface_op=Replace(3, 2), source_event_seqs=[2, 3])
    assert await store.search_messages("gamma") == []
    assert await store.search_messages("beta") == []
    assert places(await store.search_messages("summary")) == [("s", 4)]


async def test_a_batch_appended_and_replaced_at_once(store: SessionStore) -> None:
    await store.create_session("s", created_at=1)
    batch = [
        NewEvent(MSG, user_message("first epsilon"), "append"),
        NewEvent(ASSISTANT, reply("epsilon reply"), "append"),
        NewEvent(MSG, user_message("zeta summary", source=CHECKPOINT), Replace(0, 1), [0, 1]),
    ]
    await store.append_batch("s", batch)
    assert await store.search_messages("epsilon") == []
    assert places(await store.search_messages("zeta")) == [("s", 2)]


async def test_a_rejected_batch_indexes_nothing(store: SessionStore) -> None:
    await session(store, "s", "kept words")
    bad = [
        NewEvent(MSG, user_message("lost words"), "append"),
        NewEvent(MSG, user_message("bad replace"), Replace(0, 99), [0]),
    ]
    with pytest.raises(InvalidEventError):
        await store.append_batch("s", bad)
    assert await store.search_messages("lost") == []
    assert await store.search_messages("bad replace") == []
    assert places(await store.search_messages("words")) == [("s", 0)]


async def test_a_deleted_session_is_no_longer_found(store: SessionStore) -> None:
    await session(store, "gone", "eta words")
    await session(store, "kept", "eta words")
    await store.delete_session("gone")
    assert places(await store.search_messages("eta")) == [("kept", 0)]


async def test_an_imported_session_is_indexed(store: SessionStore) -> None:
    header = SessionHeader("imp", created_at=5, cwd=None)
    events = [
        NewEvent(MSG, user_message("imported theta"), "append", time=6),
        NewEvent(ASSISTANT, reply("answer"), "append", time=7),
    ]
    await store.import_session(header, events)
    assert places(await store.search_messages("theta")) == [("imp", 0)]


async def test_ranking_is_by_relevance(store: SessionStore) -> None:
    filler = " ".join(f"filler{i}" for i in range(60))
    await session(store, "long", f"kappa {filler}")
    await session(store, "short", "kappa kappa")
    await session(store, "mid", f"kappa {filler[:100]}")
    hits = await store.search_messages("kappa")
    assert places(hits) == [("short", 0), ("mid", 0), ("long", 0)]
    assert hits[0].score > hits[1].score > hits[2].score
    assert places(await store.search_messages("kappa", limit=2)) == [("short", 0), ("mid", 0)]


async def test_snippets_are_one_safe_line_around_the_match(store: SessionStore) -> None:
    before = "line one\nline two\t" + "x" * 200
    await session(store, "s", before + " lambda\x1b[31m end " + "y" * 200, "\u202elambda")
    hits = {h.seq: h for h in await store.search_messages("LAMBDA")}
    long = hits[0]
    assert len(long.snippet) == SNIPPET_WIDTH
    assert long.snippet.startswith("…") and long.snippet.endswith("…")
    assert marked(long) == ["lambda"]
    assert "\x1b" not in long.snippet and "\n" not in long.snippet
    assert long.snippet.isprintable()
    assert hits[1].snippet == "\ufffdlambda" and marked(hits[1]) == ["lambda"]
    await session(store, "t", "mu\nnu")
    (hit,) = await store.search_messages("mu")
    assert hit.snippet == "mu nu"


async def test_bad_queries_and_limits(store: SessionStore) -> None:
    await session(store, "s", "iota")
    assert await store.search_messages("") == []
    assert await store.search_messages("  \n ") == []
    for limit in (0, -1, True, 1.5):
        with pytest.raises(ValueError):
            await store.search_messages("iota", limit=limit)  # type: ignore[arg-type]
    # FTS query syntax and LIKE wildcards are plain text.
    for query in ('"', "io*", "NEAR(", "%", "_", "\\", "a OR b", "-iota"):
        assert await store.search_messages(query) == []
    await session(store, "p", 'say "100% sure_ly" \\o/')
    assert places(await store.search_messages('"100%')) == [("p", 0)]
    assert places(await store.search_messages("e_l")) == [("p", 0)]
    assert places(await store.search_messages("\\o/")) == [("p", 0)]


async def test_nul_and_lone_surrogates_do_not_stop_an_append(store: SessionStore) -> None:
    await session(store, "s", "nul\x00here omega", "lone \ud800 omega")
    hits = {h.seq: h for h in await store.search_messages("omega")}
    assert hits[0].snippet == "nul\ufffdhere omega"
    assert hits[1].snippet == "lone \ufffd omega"
    first = (await store.read_events("s"))[0]
    assert first.data["content"][0]["text"] == "nul\x00here omega"


async def test_a_query_with_nul_or_lone_surrogates_is_searched_like_the_index(
    store: SessionStore,
) -> None:
    # A query from argv (undecodable bytes: ``\udcff``), ACP JSON (``\ud800``) or a paste
    # (NUL) is folded as the index folds the messages: no store error, and the same
    # message is found.
    await session(store, "s", "nul\x00here omega", "lone \ud800 omega")
    for query in ("a\udcffbc", "x\x00", "omega\x00zz"):
        assert await store.search_messages(query) == []
    # Each stands for U+FFFD, which the index holds in place of both messages' ones.
    for query in ("\udcff", "\ud800", "\x00"):
        assert sorted(places(await store.search_messages(query))) == [("s", 0), ("s", 1)]
    assert places(await store.search_messages("nul\x00here")) == [("s", 0)]
    assert places(await store.search_messages("lone \udcff omega")) == [("s", 1)]
    assert places(await store.search_messages("\ud800 lone")) == [("s", 1)]


async def test_case_is_folded_in_every_script_whatever_the_server_locale(
    store: SessionStore,
) -> None:
    # PostgreSQL's ILIKE folds case by the database's LC_CTYPE: in a C-locale database
    # (the test cluster's, many containers') only ASCII letters were folded, so a Greek,
    # Cyrillic or accented word typed in another case than it was written was not found.
    await session(store, "s", "Η ΠΟΛΙΤΙΚΗ ΕΠΑΝΑΛΗΨΗΣ", "Привет МИР", "ÉCOLE été", "ΟΔΥΣΣΕΥΣ")
    for query, seq in (
        ("πολιτικη", 0),
        ("Πολιτικη επαναληψησ", 0),
        ("пРИВЕТ", 1),
        ("мир", 1),
        ("école", 2),
        ("ÉTÉ", 2),
        ("é", 2),
        ("οδυσσευς", 3),
        ("ΣΣΕ", 3),
    ):
        assert places(await store.search_messages(query)) == [("s", seq)], query
    # Other characters stay literal: no pattern syntax of any store.
    await session(store, "p", "Ω.*[a] (x) ^$ \\d+ ω|")
    assert places(await store.search_messages("ω.*[A]")) == [("p", 0)]
    assert places(await store.search_messages("(X) ^$ \\D+")) == [("p", 0)]
    assert await store.search_messages("ω..") == []


async def test_the_window_is_the_newest_true_matches_when_lookalikes_crowd_it(
    store: SessionStore,
) -> None:
    # SQLite's index keeps no positions: it finds messages holding the term's trigrams
    # ("abc" and "bcd"), not the term ("abcd"), and checks each one. Newer lookalikes
    # may not take the window's places: it is the newest RANK_WINDOW true matches.
    true = [f"abcd {k}" for k in range(RANK_WINDOW + 100)]
    await store.import_session(
        SessionHeader("old", created_at=1),
        [NewEvent(MSG, user_message(text), "append", time=2) for text in true],
    )
    await store.import_session(
        SessionHeader("new", created_at=3),
        [NewEvent(MSG, user_message(f"abc-bcd {k}"), "append", time=4) for k in range(3_000)],
    )
    found = [("old", seq, text) for seq, text in reversed(list(enumerate(true)))]
    expected = rank_hits(found, ["abcd"], 20)
    assert {h.seq for h in expected} <= set(range(100, RANK_WINDOW + 100))
    assert await store.search_messages("abcd") == expected
    window = await store.search_messages("abcd", limit=RANK_WINDOW + 100)
    assert sorted(places(window)) == [("old", seq) for seq in range(100, RANK_WINDOW + 100)]
    # A short term beside it narrows the candidates, not the rule.
    assert places(await store.search_messages("abcd 7", limit=5)) == places(
        rank_hits(found, ["abcd", "7"], 5)
    )

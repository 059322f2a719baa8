"""The network-free parts of the ``llm`` benchmark (``tests/benchmarks/bench_llm.py``): its
corpus is the same for the same seed, is dsh's own export format (``dsh import DIR`` stores
exactly its events), holds the planted terms as often as the queries expect, and the
peer's driver reads the same texts from it. The peer itself (pip, ``llm``) is never
installed here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.log import ASSISTANT_MESSAGE, SESSION_TITLE, USER_MESSAGE, message_text
from core.logfile import parse_jsonl
from stores import SqliteSessionStore
from tests.benchmarks import _llm_corpus as corpus
from tests.benchmarks._llm_driver import read_exchanges
from tests.cli.conftest import Run


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def test_the_corpus_is_the_same_for_the_same_seed_and_differs_for_another(
    tmp_path: Path,
) -> None:
    size = corpus.Size(4, 3)
    first = _files(corpus.write_corpus(tmp_path / "a", size))
    again = _files(corpus.write_corpus(tmp_path / "b", size))
    other = _files(corpus.write_corpus(tmp_path / "c", size, seed=corpus.SEED + 1))
    assert len(first) == 4
    assert first == again
    assert first.keys() == other.keys() and first != other
    stamp = json.loads((tmp_path / "a" / "corpus.json").read_text())
    assert stamp == {"conversations": 4, "exchanges": 3, "seed": corpus.SEED, "parts": 10}
    assert [p.name for p in corpus.parts(tmp_path / "a" / "conversations")] == ["part-00"]
    assert corpus.FULL.parts == 10 and corpus.Size(30, 1_000).parts == 3


def test_each_file_is_a_dsh_export_of_prompts_and_responses_the_driver_reads_alike(
    tmp_path: Path,
) -> None:
    size = corpus.Size(3, 4)
    folder = corpus.write_corpus(tmp_path, size)
    texts = corpus.Texts(size)
    for k in range(size.conversations):
        path = corpus.log_path(folder, size, k)
        log = parse_jsonl(path.read_text(encoding="utf-8").splitlines())
        assert log.header.id == corpus.session_id(k)
        types = [e.type for e in log.events]
        assert types == [SESSION_TITLE] + [USER_MESSAGE, ASSISTANT_MESSAGE] * size.exchanges
        said = [
            message_text(e.data if e.type == USER_MESSAGE else e.data["message"])
            for e in log.events[1:]
        ]
        first = k * size.exchanges * 2
        assert said == [texts.message(first + i) for i in range(size.exchanges * 2)]
        assert read_exchanges(path) == list(zip(said[::2], said[1::2], strict=True))


def test_the_planted_terms_are_where_the_queries_expect_them() -> None:
    size = corpus.Size(40, 10)  # 800 messages
    texts = corpus.Texts(size)
    hits = corpus.expected_hits(texts)
    assert hits["rare word"] == size.rare_count == 3
    assert hits["1-char ASCII, few hits"] == hits["1-char CJK, few hits"] == size.short_count
    assert hits["2-char ASCII, no hit"] == hits["2-char CJK, no hit"] == 0
    assert hits["two words"] >= size.pair_count
    assert 0 < hits["CJK substring"] < hits["common word"] < size.messages
    assert not any(corpus.ABSENT_LETTERS & set(w) for w in texts.words)
    # The 1-character terms stand as words of their own (a word-token index finds them).
    for n in range(size.messages):
        text = texts.message(n).casefold()
        if corpus.SHORT_ASCII_HIT in text:
            assert corpus.SHORT_ASCII_HIT in text.replace(".", " ").split()
    assert corpus.FULL.rare_count == 15 and corpus.FULL.messages == 200_000


def test_dsh_import_of_the_folder_stores_every_event_of_it(dsh: Run, tmp_path: Path) -> None:
    size = corpus.Size(5, 3)
    folder = corpus.write_corpus(tmp_path / "corpus", size)
    result = dsh("import", str(folder))
    assert result.code == 0, result.err
    assert "5 imported" in result.out
    texts = corpus.Texts(size)

    async def stored() -> None:
        async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as store:
            messages = 0
            for k in range(size.conversations):
                header, events = corpus.conversation(texts, k)
                got = await store.read_events(header.id)
                assert [(e.seq, e.type, e.time, e.data, e.surface_op) for e in got] == [
                    (e.seq, e.type, e.time, e.data, e.surface_op) for e in events
                ]
                messages += sum(1 for e in got if e.surface_op is not None)
            assert messages == size.messages

    asyncio.run(stored())
    hits = dsh("search", corpus.RARE, "--json", "--limit", "100").json()
    assert len(hits) == corpus.expected_hits(texts)["rare word"] == size.rare_count

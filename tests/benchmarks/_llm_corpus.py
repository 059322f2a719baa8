"""The ``llm`` workload's corpus: conversations of prompt/response exchanges, made from a
seed, written as dsh's own JSONL export (``core.logfile.export_jsonl``: the format
``dsh export --format json`` writes and ``dsh import DIR`` reads back unchanged), one file
per conversation. The llm side reads the same files (``_llm_driver``), so both tools load
exactly the same texts.

The texts are English-like sentences of 5-16 words drawn by Zipf's law from a vocabulary
without the letters ``q``, ``x`` and ``z``; a prompt is 1-3 sentences, a response 2-6; 5 % of
the messages end with a Chinese sentence (no spaces: one token for an FTS5 ``unicode61``
tokenizer, which is why llm cannot find a substring of it). Planted, so that the queries
have known answers at every size:

* the rare word ``RARE`` in ``rare_count`` messages, evenly spaced (15 at full size);
* ``PAIR`` (two words outside the vocabulary), each in 1 % of the messages, drawn apart
  (both together in about 1 in 10,000), and both in ``pair_count`` more messages (10 at
  full size): 40 messages hold both at full size;
* the short terms as tokens of their own (so a word-token index finds them as a
  substring index does): ``x`` (a 1-character ASCII term, in ``short_count`` messages)
  and ``龍`` (a 1-character CJK term, as often); ``qz`` and ``鳳凰`` (2 characters, in
  no message at all).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    USER_MESSAGE,
    Event,
    SessionHeader,
    assistant_message,
    user_message,
)
from core.logfile import export_jsonl

SEED = 36
BASE_TIME = 1_767_000_000_000  # ms
RARE = "retrypolicy"
PAIR = ("kubernetes", "rollback")
PAIR_RATE = 0.01
COMMON = "server"
CJK_SUBSTRING = "数据库"
SHORT_ASCII_HIT = "x"
SHORT_CJK_HIT = "龍"
SHORT_ASCII_NONE = "qz"
SHORT_CJK_NONE = "鳳凰"
ABSENT_LETTERS = frozenset("qxz")

QUERIES: tuple[tuple[str, str], ...] = (
    ("common word", COMMON),
    ("rare word", RARE),
    ("two words", " ".join(PAIR)),
    ("1-char ASCII, few hits", SHORT_ASCII_HIT),
    ("2-char ASCII, no hit", SHORT_ASCII_NONE),
    ("1-char CJK, few hits", SHORT_CJK_HIT),
    ("2-char CJK, no hit", SHORT_CJK_NONE),
    ("CJK substring", CJK_SUBSTRING),
)
"""(label, query): what every search row of the table asks."""

SHORT_LABELS = frozenset(label for label, q in QUERIES if len(q) <= 2)
LONG_LABELS = ("common word", "rare word", "two words")


def _words(text: str) -> list[str]:
    return text.split()


_FUNCTION_WORDS = _words(
    "the to and a of is in it that we for this you on with be not can as are if but at "
    "from or have an will so do use by all just one when what should was more then there "
    "which our like need i they would also only now here how get has no some any "
    "your than into out up been make same each other"
)
_TOPIC_WORDS = _words(
    "file test run error server table change code build function value request "
    "user config data version path release log update check session type branch "
    "client response commit time call case list string issue result message package "
    "step field option output input default cache schema key migration service image "
    "container cluster node worker limit timeout retry token format parse column "
    "row store lock thread process memory disk network port host route handler "
    "model prompt reply stream chunk event state screen widget layout style theme "
    "terminal command script shell variable module import class method object array "
    "loop async await future task job deploy review merge rebase patch "
    "benchmark latency budget metric trace span alert dashboard backup restore replica "
    "primary database postgres sqlite trigger policy role grant owner member share "
    "search pattern match filter sort order group count sum average median percentile"
)
_SYLLABLES = _words(
    "con ver sta pro re de in ter com par tran pre sub for mer dis en mon lat "
    "tor ran cal vi na ri mo lu pe sa ta ko be li ga fo ne du mi ca ro bo"
)
_SUFFIXES = ("", "", "", "ing", "ed", "er", "ly", "ion", "al", "ic", "ous", "ure", "ity", "ant")
_CJK_WORDS = _words(
    "我们 需要 检查 数据库 的 索引 查询 性能 服务器 部署 测试 日志 错误 用户 配置 问题 "
    "优化 缓存 连接 事务 权限 迁移 版本 文件 会话 搜索 结果 这个 已经 可以"
)
VOCABULARY_SIZE = 3_000


def vocabulary(rng: random.Random) -> list[str]:
    """Real words at the top ranks, made-up ones (syllables and a suffix) below; none
    holds a planted term or a letter of ``ABSENT_LETTERS``."""
    planted = (RARE, *PAIR)
    words = [
        w
        for w in dict.fromkeys(_FUNCTION_WORDS + _TOPIC_WORDS)
        if not ABSENT_LETTERS & set(w) and w not in planted
    ]
    seen = set(words)
    while len(words) < VOCABULARY_SIZE:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
        word += rng.choice(_SUFFIXES)
        if word not in seen and not any(p in word or word in p for p in planted):
            seen.add(word)
            words.append(word)
    assert not any(ABSENT_LETTERS & set(w) for w in words)
    return words


def _zipf(count: int) -> list[float]:
    return list(itertools.accumulate(1 / (rank + 1) for rank in range(count)))


@dataclass(frozen=True)
class Size:
    conversations: int
    exchanges: int  # prompt/response pairs per conversation

    @property
    def messages(self) -> int:
        return self.conversations * self.exchanges * 2

    @property
    def rare_count(self) -> int:
        """Messages holding ``RARE``: 15 at 200,000 messages, at least 3."""
        return max(3, round(15 * self.messages / 200_000))

    @property
    def pair_count(self) -> int:
        """Messages where both words of ``PAIR`` are planted: 10 at 200,000, at least 2."""
        return max(2, round(10 * self.messages / 200_000))

    @property
    def short_count(self) -> int:
        """Messages holding each planted 1-character term: 10 at 200,000, at least 2."""
        return max(2, round(10 * self.messages / 200_000))

    @property
    def parts(self) -> int:
        """Folders the corpus is written in (see ``PARTS``)."""
        return max(1, min(PARTS, self.messages // 20_000, self.conversations))

    def label(self) -> str:
        return f"{self.conversations:,} x {self.exchanges} exchanges ({self.messages:,} msgs)"


FULL = Size(2_000, 50)
QUICK = Size(100, 10)


def _planted(total: int, count: int, offset: int) -> set[int]:
    """``count`` message numbers of ``0..total-1``, evenly spaced from ``offset``."""
    step = total / count
    return {(int(i * step) + offset) % total for i in range(count)}


class Texts:
    """The corpus's message texts, message ``n`` (0-based, over the whole corpus; even:
    a prompt, odd: a response) from its own seeded generator."""

    def __init__(self, size: Size, seed: int = SEED) -> None:
        self.size = size
        self.seed = seed
        rng = random.Random(seed)
        self.words = vocabulary(rng)
        self.weights = _zipf(len(self.words))
        self.cjk_weights = _zipf(len(_CJK_WORDS))
        total = size.messages
        self.rare = _planted(total, size.rare_count, 7)
        self.short_ascii = _planted(total, size.short_count, 11)
        self.short_cjk = _planted(total, size.short_count, 5_003 % total)
        self.pair = _planted(total, size.pair_count, 1_009 % total)

    def message(self, n: int) -> str:
        rng = random.Random(self.seed * 1_000_003 + n)
        response = n % 2 == 1
        lengths = [rng.randint(5, 16) for _ in range(rng.randint(2, 6) if response else 1 + n % 3)]
        drawn = rng.choices(self.words, cum_weights=self.weights, k=sum(lengths))
        planted = [word for word in PAIR if rng.random() < PAIR_RATE or n in self.pair]
        if n in self.rare:
            planted.append(RARE)
        if n in self.short_ascii:
            planted.append(SHORT_ASCII_HIT)
        for word in planted:  # inserted, never over another planted word
            drawn.insert(rng.randrange(len(drawn) + 1), word)
        lengths[-1] += len(planted)
        sentences = []
        start = 0
        for count in lengths:
            words = drawn[start : start + count]
            start += count
            sentences.append(words[0].capitalize() + " " + " ".join(words[1:]) + ".")
        if n in self.short_cjk:
            sentences.append(SHORT_CJK_HIT)
        if rng.random() < 0.05:
            cjk = rng.choices(_CJK_WORDS, cum_weights=self.cjk_weights, k=rng.randint(4, 10))
            sentences.append("".join(cjk) + "。")
        return " ".join(sentences)


def session_id(k: int) -> str:
    return f"llm-bench-{k:05d}"


def conversation(texts: Texts, k: int) -> tuple[SessionHeader, list[Event]]:
    """Conversation ``k`` as dsh stores it: a title, then prompt and response in turn
    (``dsh import`` gives them the seqs of the file)."""
    size = texts.size
    sid = session_id(k)
    created = BASE_TIME + k * 3_600_000
    header = SessionHeader(sid, created, f"/home/dev/project{k % 7}")
    first = k * size.exchanges * 2
    title = {"title": f"Conversation {k}", "source": {"kind": "user"}}
    events = [Event(0, SESSION_TITLE, created, title)]
    for i in range(size.exchanges * 2):
        n = first + i
        text = texts.message(n)
        at = created + 1 + i * 20_000
        seq = len(events)
        if i % 2 == 0:
            events.append(
                Event(seq, USER_MESSAGE, at, user_message(text, id=f"{sid}-u{i}"), "append")
            )
        else:
            message = assistant_message(
                text, provider="bench", model="bench-canned", id=f"{sid}-a{i}"
            )
            data = {"turn": i // 2 + 1, "step": 0, "message": message}
            events.append(Event(seq, ASSISTANT_MESSAGE, at, data, "append"))
    return header, events


PARTS = 10
"""The corpus is written in up to this many folders (``part-00``…, one per 20,000
messages), which the loads take in turn, dsh and llm alternating (so that the machine's
load falls on both alike)."""


def log_path(folder: Path, size: Size, k: int) -> Path:
    """Where conversation ``k``'s log is under ``folder``."""
    part = k * size.parts // size.conversations
    return folder / f"part-{part:02d}" / f"{session_id(k)}.jsonl"


def parts(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("part-*") if p.is_dir())


def write_corpus(root: Path, size: Size, seed: int = SEED) -> Path:
    """Every conversation as ``root/conversations/part-NN/<id>.jsonl`` (dsh's export
    format; ``dsh import`` of the folder finds them all) and ``root/corpus.json`` (the
    size and seed: a later run with the same ones reuses the folder). Returns the folder
    of the logs."""
    folder = root / "conversations"
    stamp = root / "corpus.json"
    wanted = {
        "conversations": size.conversations,
        "exchanges": size.exchanges,
        "seed": seed,
        "parts": PARTS,
    }
    if stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return folder
    stamp.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.rglob("*.jsonl"):
        old.unlink()
    texts = Texts(size, seed)
    for k in range(size.conversations):
        header, events = conversation(texts, k)
        lines = export_jsonl(header, events)
        path = log_path(folder, size, k)
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    stamp.write_text(json.dumps(wanted))
    return folder


def corpus_texts(texts: Texts) -> Iterator[str]:
    """Every message's text, in order (for the expected hit counts)."""
    for n in range(texts.size.messages):
        yield texts.message(n)


def expected_hits(texts: Texts) -> dict[str, int]:
    """How many messages contain every term of each query, as a case-insensitive substring
    (dsh's rule): what both tools must agree on where a word-token index can see it."""
    counts = dict.fromkeys((label for label, _ in QUERIES), 0)
    terms = {label: query.casefold().split() for label, query in QUERIES}
    for text in corpus_texts(texts):
        folded = text.casefold()
        for label, words in terms.items():
            if all(w in folded for w in words):
                counts[label] += 1
    return counts

"""The ``team_search`` workload's team (members, their sessions and shares, the rare and
the absent word) and its messages' texts: an English-like Zipf vocabulary, 5 % Chinese,
the event rows as the engine writes them."""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from core.jsoncodec import dumps_js
from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, assistant_message, user_message
from core.references.projection import message_code

WORKLOAD = "team_search"
ADMIN = "dsh_admin"
GROUP = "dsh_users"
MEMBERS = tuple(f"m{i:02d}" for i in range(20))
SEARCHER = "m03"
SESSIONS_PER_MEMBER = 50
SHARED_SESSIONS = 3  # each member shares this many of its sessions …
SHARED_WITH = 2  # … with this many next members
BASE_TIME = 1_765_000_000_000
RARE_EVERY = 25_000  # one message in this many carries the rare word
RARE = "retrypolicy"
ABSENT = "zyzzogeton"


# ---------------------------------------------------------------- the texts


def _words(text: str) -> list[str]:
    return text.split()


_FUNCTION_WORDS = _words(
    "the to and a of is in it that we for this you on with be not can as are if but at "
    "from or have an will so do use by all just one when what should was more then there "
    "which our like need it's i they would also only now here how get has no some any "
    "your than into out up been make same each other"
)
_TOPIC_WORDS = _words(
    "file test run error server table query change code build function value request "
    "user config data version path release log update check session type branch index "
    "client response commit time call case list string issue result message package "
    "step field option output input default cache schema key migration service image "
    "container cluster node worker queue limit timeout retry token format parse column "
    "row store lock thread process memory disk network port host proxy route handler "
    "model prompt reply stream chunk event state screen widget layout style theme "
    "terminal command script shell variable module import class method object array "
    "loop async await future task job deploy rollback review merge rebase patch diff "
    "benchmark latency budget metric trace span alert dashboard backup restore replica "
    "primary database postgres sqlite trigger policy role grant owner member share "
    "search pattern match filter sort order group count sum average median percentile"
)
_SYLLABLES = _words(
    "con ver sta pro re de ex in ter com par tran pre sub for mer dis en mon lat "
    "tor ran cal vi na ri mo lu pe sa ta ko be li ga fo ne du mi ca ro bo"
)
_SUFFIXES = ("", "", "", "ing", "ed", "er", "ly", "ion", "al", "ic", "ous", "ure", "ity", "ant")
_CJK_WORDS = _words(
    "我们 需要 检查 数据库 的 索引 查询 性能 服务器 部署 测试 日志 错误 用户 配置 问题 "
    "优化 缓存 连接 事务 权限 迁移 版本 文件 会话 搜索 结果 这个 已经 可以"
)
VOCABULARY_SIZE = 3_000


def vocabulary(rng: random.Random) -> list[str]:
    """Real words at the top ranks (function words, then a chat about code's), made-up
    ones (syllables and a suffix) below: ``VOCABULARY_SIZE`` distinct words. None holds
    the rare or the absent word (a search is a substring match)."""
    words = list(dict.fromkeys(_FUNCTION_WORDS + _TOPIC_WORDS))
    seen = set(words)
    while len(words) < VOCABULARY_SIZE:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
        word += rng.choice(_SUFFIXES)
        if word not in seen:
            seen.add(word)
            words.append(word)
    assert not any(RARE in w or ABSENT in w for w in words)
    return words


def _zipf(count: int) -> list[float]:
    """Cumulative Zipf(1) weights of ``count`` ranks (for ``random.choices``)."""
    return list(itertools.accumulate(1 / (rank + 1) for rank in range(count)))


class Texts:
    """Message texts: sentences of 5-16 words drawn by Zipf's law, a user message 1-3 of
    them, an assistant's 2-6; 5 % end with a Chinese sentence; one in ``RARE_EVERY``
    carries the rare word."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng)
        self.weights = _zipf(len(self.words))
        self.cjk_weights = _zipf(len(_CJK_WORDS))

    def message(self, assistant: bool) -> str:
        rng = self.rng
        lengths = [
            rng.randint(5, 16) for _ in range(rng.randint(2, 6) if assistant else rng.randint(1, 3))
        ]
        drawn = rng.choices(self.words, cum_weights=self.weights, k=sum(lengths))
        if rng.random() < 1 / RARE_EVERY:
            drawn[rng.randrange(len(drawn))] = RARE
        sentences = []
        start = 0
        for n in lengths:
            words = drawn[start : start + n]
            start += n
            sentences.append(words[0].capitalize() + " " + " ".join(words[1:]) + ".")
        if rng.random() < 0.05:
            cjk = rng.choices(_CJK_WORDS, cum_weights=self.cjk_weights, k=rng.randint(4, 10))
            sentences.append("".join(cjk) + "。")
        return " ".join(sentences)

    def message_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


@dataclass(frozen=True)
class Message:
    """One surface event as the store writes it."""

    type: bytes
    data: str
    projection: int
    text: str


def message(texts: Texts, seq: int) -> Message:
    """The ``seq``-th message of a session: user and assistant in turn, as the engine
    writes them (``data`` is ``dumps_js`` of the event's data)."""
    assistant = seq % 2 == 1
    text = texts.message(assistant)
    if assistant:
        body = assistant_message(
            text, provider="deepseek", model="deepseek-chat", id=texts.message_id()
        )
        data = dumps_js({"turn": seq // 2 + 1, "step": 0, "message": body})
        kind = ASSISTANT_MESSAGE
    else:
        data = dumps_js(user_message(text, id=texts.message_id()))
        kind = USER_MESSAGE
    code = message_code("assistant" if assistant else "user", False, len(text.encode()))
    return Message(kind.encode(), data, code, text)


def event_time(slot: int, seq: int) -> int:
    """Every session gets a message a minute (its ``seq``-th in minute ``seq``), at its
    ``slot`` in that minute."""
    return BASE_TIME + seq * 60_000 + slot * 37


EVENT_COLUMNS = (
    "session_key",
    "seq",
    "type",
    "time",
    "kind",
    "data",
    "surface_op",
    "projection",
    "session_owner",
)


def event_records(
    texts: Texts, sessions: Sequence[tuple[int, str]], lo: int, hi: int
) -> Iterator[tuple[Any, ...]]:
    """``dsh_events`` rows (``EVENT_COLUMNS``) of seqs ``lo``..``hi - 1`` of each session,
    in time order: minute by minute, the sessions in a new random order each minute (so
    a member's messages are spread among the others', as when a team works at once)."""
    order = list(sessions)
    for seq in range(lo, hi):
        texts.rng.shuffle(order)
        for slot, (key, owner) in enumerate(order):
            m = message(texts, seq)
            yield (
                key,
                seq,
                m.type,
                event_time(slot, seq),
                1,
                m.data,
                '"append"',
                m.projection,
                owner,
            )

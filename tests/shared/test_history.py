"""The whole history of a session (issue 31): every surface event as written, and which
ones a compaction or another replace took off the surface (folded as SPEC §2.3 says)."""

from __future__ import annotations

from pathlib import Path

from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    SESSION_TITLE,
    USER_MESSAGE,
    NewEvent,
    Replace,
    user_message,
)
from core.surface import fold_surface
from stores import SqliteSessionStore
from tui.shared.history import COMPACTED, REPLACED, whole_history


def say(text: str) -> NewEvent:
    return NewEvent(USER_MESSAGE, user_message(text), "append")


async def test_whole_history_marks_exactly_what_left_the_surface(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "h.sqlite3") as store:
        await store.create_session("s")
        await store.append_batch("s", [say("a"), say("b"), say("c")])  # 0 1 2
        await store.append("s", SESSION_TITLE, {"title": "t", "source": {"kind": "user"}})  # 3
        summary = user_message("sum 1", source=COMPACT_CHECKPOINT_SOURCE)
        await store.append(
            "s", USER_MESSAGE, summary, surface_op=Replace(0, 1), source_event_seqs=(0, 1)
        )  # 4
        await store.append(
            "s",
            USER_MESSAGE,
            user_message("c, edited"),
            surface_op=Replace(2, 2),
            source_event_seqs=(2,),
        )  # 5
        await store.append("s", USER_MESSAGE, user_message("d"), surface_op="append")  # 6
        again = user_message("sum 2", source=COMPACT_CHECKPOINT_SOURCE)
        await store.append(
            "s", USER_MESSAGE, again, surface_op=Replace(4, 5), source_event_seqs=(4, 5)
        )  # 7
        events = await store.read_events("s")
    history, taken = whole_history(events)
    assert [e.seq for e in history] == [0, 1, 2, 4, 5, 6, 7]  # the title is log-only
    assert taken == {0: COMPACTED, 1: COMPACTED, 2: REPLACED, 4: COMPACTED, 5: COMPACTED}
    on_surface = [e.seq for e in history if e.seq not in taken]
    assert sorted(on_surface) == sorted(e.seq for e in fold_surface(events))

"""``LazyReplayStore`` (``dsh replay FILE`` in the app): a dsh JSONL log read from its lines,
newest page first, then checked and loaded whole in a worker thread. Before and after the
check every read the newest page needs gives exactly what the eager ``ReplayStore`` gives;
a bad line found later is told once (file and line) and fails the reads of the whole log;
nothing is ever written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.errors import StoreError
from stores import SessionQuery
from stores.replay import LazyReplayStore, ReplayStore
from tests.replays.corpus import large_log_lines
from tui.shared.replay import ReplayError, open_replay

LOGS = Path(__file__).parents[1] / "replays" / "logs"
CORPUS = sorted(LOGS.glob("*.jsonl"))


@pytest.fixture(autouse=True)
def _no_early_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check starts only when a test says so (no fallback timer firing meanwhile)."""
    monkeypatch.setattr("stores.replay._START_AT_LATEST_S", 3600.0)


async def newest_reads(store: ReplayStore, page: int) -> tuple[object, ...]:
    query = SessionQuery(store)
    (header,) = await store.list_headers()
    window = await query.read_surface_page(header.id, page)
    return (
        header,
        window.events,
        window.unknown,
        window.captured_through_seq,
        await store.read_titles(),
        await store.read_last_event_times(),
        await store.last_surface_seq(header.id),
        await store.read_header(header.id),
    )


@pytest.mark.parametrize("log", CORPUS, ids=[p.stem for p in CORPUS])
async def test_the_newest_page_is_what_the_whole_log_gives(log: Path) -> None:
    eager = await open_replay(str(log))
    lazy = await open_replay(str(log), lazy=True)
    assert isinstance(lazy, LazyReplayStore) and not isinstance(eager, LazyReplayStore)
    (header,) = await eager.list_headers()
    for page in (1, 3, 25):
        before = await newest_reads(lazy, page)
        _, _, rows = await eager.read_surface_tail(header.id, page)
        if all(row.surface_op == "append" for row in rows):
            assert not lazy.loaded  # served from the lines alone
        # (else the surface is folded from every row: that read waits for the check)
        assert before == await newest_reads(eager, page)
    await lazy.wait_loaded()
    assert lazy.loaded
    assert await lazy.read_events(header.id) == await eager.read_events(header.id)
    assert await newest_reads(lazy, 25) == await newest_reads(eager, 25)
    with pytest.raises(StoreError):
        await lazy.append(header.id, "user/message", {}, surface_op="append")


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


async def test_a_bad_line_found_later_is_told_once_with_its_line(tmp_path: Path) -> None:
    lines = list(large_log_lines(2_000))
    lines[101] = lines[101].replace('"seq":100', '"seq":100,"extra":1')  # line 102
    log = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ReplayError, match="line 102"):
        await open_replay(str(log))  # --svg and --text: the whole file first
    lazy = await open_replay(str(log), lazy=True)
    assert isinstance(lazy, LazyReplayStore)
    reads = await newest_reads(lazy, 25)  # the newest page is fine
    assert reads[1]
    assert lazy.take_notice() is None  # nothing found yet: the check has not run
    with pytest.raises(StoreError, match="line 102"):
        await lazy.read_surface_rows("large")  # a read of the whole log checks it first
    notice = lazy.take_notice()
    assert notice is not None and notice[1] is True
    assert "bad.jsonl: line 102" in notice[0] and "unknown event field" in notice[0]
    assert lazy.take_notice() is None  # told once


async def test_the_check_starts_after_the_page_is_read_and_the_app_polls(tmp_path: Path) -> None:
    log = _write(tmp_path / "ok.jsonl", list(large_log_lines(3_000)))
    lazy = await open_replay(str(log), lazy=True)
    assert isinstance(lazy, LazyReplayStore)
    await lazy.change_token()  # the follower's prime, before any page: no check yet
    assert lazy._worker is None
    await newest_reads(lazy, 25)
    await lazy.change_token()  # the next poll: the page is drawn
    assert lazy._worker is not None
    await asyncio.wait_for(lazy.wait_loaded(), 60)
    assert lazy.loaded and lazy.failure is None
    await lazy.close()


async def test_other_formats_and_at_are_read_whole(tmp_path: Path) -> None:
    from tests.cli.test_replay import REFERENCE_LOG

    assert not isinstance(await open_replay(str(REFERENCE_LOG), lazy=True), LazyReplayStore)
    log = _write(tmp_path / "ok.jsonl", list(large_log_lines(200)))
    assert not isinstance(await open_replay(str(log), lazy=True, at=5), LazyReplayStore)
    # A header that is not right: the whole-file reader names the line.
    bad = _write(
        tmp_path / "bad.jsonl", ['{"type":"session","id":1}', *list(large_log_lines(20))[1:]]
    )
    with pytest.raises(ReplayError, match="line 1"):
        await open_replay(str(bad), lazy=True)

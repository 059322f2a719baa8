"""Golden replays: every log of the corpus (``tests/replays/logs``, a reference
implementation log, a generated 100,000-event log) drawn by ``dsh replay --svg``'s renderer
and compared with its baseline in ``snapshots/replays/``.

Redraw them all with ``pytest tests/replays --snapshot-update`` (then look at each)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from core.config import DshConfig
from tests.replays.corpus import LOG_DIR, REFERENCE_LOG, large_log_lines
from tests.ui.snapshots import assert_svg
from tui.app.svg import render_svg
from tui.shared.replay import open_replay, replay_now, replay_runtime

pytestmark = pytest.mark.timeout(240)

SIZE = (120, 40)
LOGS = sorted(LOG_DIR.glob("*.jsonl"))


async def draw(path: Path, *, expand_cards: bool = False) -> str:
    """The replay's screen. The banner names the file as given: by its bare name, from its
    own folder, so a baseline does not depend on where the repository is."""
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        store = await open_replay(path.name)
    finally:
        os.chdir(here)
    try:
        now = await replay_now(store)
        runtime = replay_runtime(DshConfig(database=path.with_suffix(".never")), store)
        return await render_svg(runtime, size=SIZE, expand_cards=expand_cards, now=lambda: now)
    finally:  # as dsh replay does: a large log's temporary database (and its thread) goes
        await store.close()


def test_the_corpus_is_there() -> None:
    assert {p.stem for p in LOGS} >= {
        "references",
        "deleted_reference",
        "nested_compactions",
        "steering_and_tools",
        "unknown_events",
        "hostile",
        "non_ascii",
        "huge_message",
    }


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
async def test_replay(request: pytest.FixtureRequest, log: Path) -> None:
    svg = await draw(log, expand_cards=log.stem in ("references", "deleted_reference"))
    assert f"Replay of {log.name} (read-only)".replace(" ", "&#160;") in svg
    assert "\x1b" not in svg
    assert_svg(request, svg, f"replays/{log.stem}")


async def test_replay_of_a_reference_implementation_log(request: pytest.FixtureRequest) -> None:
    assert_svg(request, await draw(REFERENCE_LOG), "replays/reference_log")


@pytest.mark.slow
async def test_replay_of_100000_events_shows_its_newest_page(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path = tmp_path / "large.jsonl"
    lines = list(large_log_lines(100_000))
    await asyncio.to_thread(path.write_text, "".join(line + "\n" for line in lines), "utf-8")
    svg = await draw(path)
    shown = svg.replace("&#160;", " ")
    assert "(turn 5263)" in shown and "question 5264" in shown  # 19 events a turn
    assert_svg(request, svg, "replays/large_100000")

"""Events of types dsh does not know in ``dsh show`` (whole and ``--tail``) and ``dsh
replay`` (``--text``, ``--svg``): the type and a one-line escaped JSON preview, between
the surface items in seq order, only those after the newest compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.logfile import export_jsonl
from stores import MemorySessionStore
from tests.cli.conftest import Run
from tests.cli.test_replay import svg_text
from tests.ui.test_transcript_unknown import build


def write_log(path: Path) -> Path:
    async def lines() -> list[str]:
        store = MemorySessionStore()
        await build(store, "odd-session")
        header = await store.read_header("odd-session")
        return list(export_jsonl(header, await store.read_events("odd-session")))

    path.write_text("".join(line + "\n" for line in asyncio.run(lines())), encoding="utf-8")
    return path


def check_text(out: str) -> None:
    assert out.count("▸ step/start event") == 7
    assert "▸ request/header event" in out and "more characters]" in out
    assert "session/opened" not in out and "while compacting" not in out
    # Literal and safe: markup stays text, no escape or bidi character reaches the terminal.
    assert "[bold red]PWNED[/]" in out
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    # In seq order: the last exchange's question, its step, its answer, its step end.
    last = out.rindex("late 6")
    assert last < out.rindex("step/start") < out.rindex("late answer 6")
    assert out.rindex("late answer 6") < out.rindex("step/end")


def test_show_and_replay_text_show_unknown_events(dsh: Run, tmp_path: Path) -> None:
    log = write_log(tmp_path / "odd.jsonl")
    replayed = dsh("replay", str(log), "--text", db=tmp_path / "never.sqlite3")
    assert replayed.code == 0, replayed.err
    check_text(replayed.out)
    assert dsh("import", str(log)).code == 0
    shown = dsh("show", "odd-session")
    assert shown.code == 0, shown.err
    assert shown.out == replayed.out
    tail = dsh("show", "odd-session", "--tail", "2")
    assert tail.code == 0, tail.err
    # The last two surface items and the unknown events among them.
    assert tail.out.count("▸ step/start event") == 1
    assert "step/end" in tail.out
    assert shown.out.endswith(tail.out[tail.out.index("You · ") :])


def test_replay_svg_shows_unknown_events(dsh: Run, tmp_path: Path) -> None:
    log = write_log(tmp_path / "odd.jsonl")
    out = tmp_path / "odd.svg"
    result = dsh("replay", str(log), "--svg", str(out), "--size", "120x60")
    assert result.code == 0, result.err
    text = svg_text(out.read_text(encoding="utf-8"))
    assert "approval/asked event" in text and "step/start event" in text
    # The composer says the replay takes no message (the banner and it: long paths cut).
    assert "Message…" not in text and text.count("eplay of") == 2

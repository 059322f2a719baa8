"""``dsh show``, ``show --json`` and ``export`` (every format) of a large session hold a page
of it, not the log (issue 31: 3-4 GB for a 1 GB session).

Each command runs in-process over a SQLite session of N events and of 4N events under
``tracemalloc``: the larger log may raise the peak by far less than a quarter of the bytes
it adds (reading it whole cost 2-4 times them). The output is checked too, against what the
whole reads give, so a command cannot pass by printing less.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
from pathlib import Path

import pytest

from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, NewEvent, assistant_message, user_message
from core.logfile import export_jsonl
from stores import SqliteSessionStore
from tui.cli.commands import main

SMALL = 400
TEXT_BYTES = 8_000


def _events(count: int) -> list[NewEvent]:
    line = "streamed text of a large session, line after line of it. " * 16 + "\n"
    out: list[NewEvent] = []
    for n in range(count):
        text = f"message {n}\n" + line * (TEXT_BYTES // len(line))
        if n % 10 == 9:
            out.append(NewEvent("step/start", {"n": n, "note": text}, time=1_000 + n))
        elif n % 10 == 5:
            reply = assistant_message(f"reply {n}", provider="offline", model="echo-1")
            data = {"turn": n, "step": 0, "message": reply}
            out.append(NewEvent(ASSISTANT_MESSAGE, data, "append", time=1_000 + n))
        else:
            out.append(NewEvent(USER_MESSAGE, user_message(text), "append", time=1_000 + n))
    return out


def _build(path: Path, count: int) -> None:
    async def go() -> None:
        async with await SqliteSessionStore.open(path) as store:
            header = await store.create_session("big", created_at=1_000)
            events = _events(count)
            for start in range(0, count, 200):
                await store.append_batch(header.id, events[start : start + 200])

    asyncio.run(go())


def _run(db: Path, out: Path, args: list[str], *, traced: bool) -> int:
    """The command's peak of traced memory (bytes); its standard output goes to ``out``."""
    with out.open("w", encoding="utf-8") as stdout, contextlib.redirect_stdout(stdout):
        if traced:
            tracemalloc.start()
        try:
            code = main(["--db", str(db), *args])
            peak = tracemalloc.get_traced_memory()[1] if traced else 0
        finally:
            tracemalloc.stop()
    assert code == 0
    return peak


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("big")
    small, large = base / "small.sqlite3", base / "large.sqlite3"
    _build(small, SMALL)
    _build(large, 4 * SMALL)
    return small, large


COMMANDS = {
    "show": ["show", "big"],
    "show --json": ["show", "big", "--json"],
    "export json": ["export", "big", "--format", "json"],
    "export reference": ["export", "big", "--format", "reference"],
    "export md": ["export", "big", "--format", "md"],
    "export json -o": ["export", "big", "--format", "json", "-o", "{out}"],
    "export md -o": ["export", "big", "--format", "md", "-o", "{out}"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_memory_does_not_grow_with_the_log(
    name: str, logs: tuple[Path, Path], dsh_env: Path, tmp_path: Path
) -> None:
    small, large = logs
    out = tmp_path / "stdout"
    target = tmp_path / "export.out"
    args = [arg.replace("{out}", str(target)) for arg in COMMANDS[name]]
    _run(small, out, args, traced=False)  # imports and caches, once
    low = _run(small, out, args, traced=True)
    high = _run(large, out, args, traced=True)
    added = 3 * SMALL * TEXT_BYTES
    print(f"{name}: peak {low:,} → {high:,} for {added:,} more bytes")
    assert high - low < added / 4, f"{name}: peak {low:,} → {high:,} for {added:,} more bytes"
    written = target.read_text("utf-8") if "-o" in args else out.read_text("utf-8")
    assert f"message {4 * SMALL - 2}" in written  # the last message is there
    if name.startswith("export"):
        expected = asyncio.run(_whole_export(large, name.split()[1]))
        assert written == "".join(line + "\n" for line in expected)
    if name == "show --json":
        assert len(json.loads(written)) == 4 * SMALL


async def _whole_export(path: Path, fmt: str) -> list[str]:
    """The export as the whole reads made it (before it was streamed)."""
    from core.importers.reference import reference_lines
    from stores import SessionQuery
    from tui.shared.export import export_markdown

    async with await SqliteSessionStore.open(path) as store:
        header = await store.read_header("big")
        if fmt == "json":
            return list(export_jsonl(header, await store.read_events("big")))
        if fmt == "reference":
            return list(reference_lines(header, await store.read_events("big")))
        snapshot = await SessionQuery(store).read_surface("big")
        return export_markdown(header, None, snapshot.events)

"""The sizes of ``core.limits`` at the command line (issue 30): ``dsh new --cwd``,
``dsh rename``, ``dsh import`` and ``dsh migrate`` say which limit in one line, never a
traceback, and store nothing of what is over it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from core.jsoncodec import dumps_js
from stores import open_store
from tests.cli.conftest import Run
from tests.cli.test_import_reference import HEADER, log, msg

TOO_LONG_CWD = "/" + "d" * 5000
CWD_ERROR = "a cwd may hold at most 4,096 UTF-8 bytes (this one has 5,001)"
TITLE_ERROR = "a title may hold at most 1,024 UTF-8 bytes (this one has 2,000)"


def _one_error_line(err: str, words: str) -> None:
    assert err.count("\n") == 1 and err.startswith("dsh: error: ") and words in err, err
    assert "Traceback" not in err


def test_new_with_a_cwd_over_the_limit(dsh: Run) -> None:
    made = dsh("new", "--cwd", TOO_LONG_CWD)
    assert made.code == 1 and made.out == ""
    _one_error_line(made.err, CWD_ERROR)
    assert dsh("sessions", "--json").json() == []


def test_rename_over_the_limit(dsh: Run) -> None:
    sid = dsh("new").out.strip()
    assert dsh("rename", sid, "short").code == 0
    renamed = dsh("rename", sid, "é" * 1000)
    assert renamed.code == 1 and renamed.out == ""
    _one_error_line(renamed.err, TITLE_ERROR)
    assert [row["title"] for row in dsh("sessions", "--json").json()] == ["short"]


def _dsh_log(*lines: dict[str, Any]) -> str:
    return "".join(dumps_js(line) + "\n" for line in lines)


def _title_line(seq: int, title: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "type": "session/title",
        "time": 2,
        "data": {"title": title},
        "surface_op": None,
        "source_event_seqs": None,
    }


def test_import_rejects_a_log_whose_header_or_title_is_too_long(dsh: Run, tmp_path: Path) -> None:
    header = {"type": "session", "id": "x", "created_at": 1, "cwd": None}
    cases = {
        "id.jsonl": (
            _dsh_log({**header, "id": "i" * 1025}),
            "line 1: a session id may hold at most 1,024 UTF-8 bytes (this one has 1,025)",
        ),
        "cwd.jsonl": (_dsh_log({**header, "cwd": TOO_LONG_CWD}), f"line 1: {CWD_ERROR}"),
        "title.jsonl": (
            _dsh_log(header, _title_line(0, "ok"), _title_line(1, "é" * 1000)),
            f"line 3: {TITLE_ERROR}",
        ),
        "reference.jsonl": (
            log(msg(0, "a"), header={**HEADER, "cwd": TOO_LONG_CWD}).decode(),
            f"line 1: {CWD_ERROR}",
        ),
        "reference-title.jsonl": (
            log(
                msg(0, "a"),
                {"type": "session/title", "seq": 1, "time": 5, "data": {"title": "é" * 1000}},
            ).decode(),
            f"line 3: {TITLE_ERROR}",
        ),
    }
    root = tmp_path / "logs"
    root.mkdir()
    for name, (text, words) in cases.items():
        path = root / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        result = dsh("import", str(path))
        assert result.code == 1
        _one_error_line(result.err, f"cannot import {path}: {words}; nothing imported")
    assert dsh("sessions", "--json").json() == []
    (root / "good.jsonl").write_text(_dsh_log(header, _title_line(0, "fine")))
    tree = dsh("import", str(root))
    assert tree.code == 1
    assert f"rejected: title.jsonl: line 3: {TITLE_ERROR}" in tree.out
    assert "1 imported, 0 already present, 0 conflicting (not overwritten), 5 rejected" in tree.out
    assert [row["title"] for row in dsh("sessions", "--json").json()] == ["fine"]


def _corrupt(path: Path, sql: str, *args: object) -> None:
    """A row as an older dsh, or a hand, could have written it."""
    with sqlite3.connect(path) as raw:
        assert raw.execute(sql, args).rowcount == 1
    raw.close()


def test_migrate_skips_a_session_over_the_limits_and_copies_the_rest(
    dsh: Run, dsh_env: Path, tmp_path: Path
) -> None:
    ids = [dsh("new", "--cwd", "/w").out.strip() for _ in range(4)]
    for sid in ids:
        assert dsh("rename", sid, f"title of {sid}").code == 0
    wide, titled = ids[1], ids[2]
    _corrupt(
        dsh_env, "UPDATE sessions SET cwd = ? WHERE id = ?", TOO_LONG_CWD.encode(), wide.encode()
    )
    _corrupt(
        dsh_env,
        "UPDATE events SET data = ? WHERE kind = 2 AND session = "
        "(SELECT key FROM sessions WHERE id = ?)",
        dumps_js({"title": "é" * 1000}),
        titled.encode(),
    )
    target = tmp_path / "target.sqlite3"
    moved = dsh("migrate", "--to", str(target))
    assert moved.code == 1
    assert f"REFUSED (the target does not take it; skipped): {wide}: {CWD_ERROR}" in moved.err
    assert f"REFUSED (the target does not take it; skipped): {titled}: {TITLE_ERROR}" in moved.err
    assert moved.out.startswith(f"4 sessions in {dsh_env}: 2 copied, 0 completed, 0 already")
    assert "0 conflicts, 2 refused; " in moved.out

    async def target_ids() -> set[str]:
        async with await open_store(target) as store:
            return {h.id for h in await store.list_headers()}

    assert asyncio.run(target_ids()) == {ids[0], ids[3]}

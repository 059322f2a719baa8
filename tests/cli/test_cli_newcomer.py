"""Issue 13, "a newcomer's first hour": the command line's messages, confirmations and output."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tui.shared.runtime
from tests.cli.conftest import Run
from tests.providers.fake_openai import DSH


def new(dsh: Run, *args: str) -> str:
    result = dsh("new", *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_reference_to_a_deleted_session_is_one_plain_line(dsh: Run) -> None:
    target = new(dsh)
    gone = new(dsh)
    mention = dsh("mention", gone).out.strip()
    assert dsh("delete", gone).code == 0
    result = dsh("send", target, f"look at {mention}")
    assert result.code == 1
    assert result.err == (
        f"dsh: error: the referenced session '{gone}' does not exist (was it deleted?) "
        "[SESSION_REFERENCE_READ_FAILED] — nothing was sent\n"
    )
    assert "Error(" not in result.err


def test_self_reference_says_it_once(dsh: Run) -> None:
    target = new(dsh)
    mention = dsh("mention", target).out.strip()
    result = dsh("prepare", "--session", target, f"me {mention}")
    assert result.code == 1
    assert result.err == (
        "dsh: error: a message cannot reference its own session "
        "[SESSION_REFERENCE_SELF_REFERENCE]\n"
    )


@pytest.mark.parametrize(
    "command",
    [
        ("delete", "{name}"),
        ("show", "{name}"),
        ("send", "{name}", "hello"),
        ("rename", "{name}", "new title"),
        ("export", "{name}"),
        ("mention", "{name}"),
        ("compact", "{name}"),
        ("candidates", "{name}"),
        ("prepare", "--session", "{name}", "hello"),
    ],
)
def test_a_name_that_is_a_title_and_an_id_prefix_is_an_error_listing_both(
    dsh: Run, command: tuple[str, ...]
) -> None:
    prefixed = new(dsh)
    titled = new(dsh)
    name = prefixed[:8]
    assert dsh("rename", titled, name).code == 0
    assert dsh("rename", prefixed, "evil \x1b[31m title").code == 0
    before = dsh("show", titled, "--json").json()

    result = dsh(*(part.format(name=name) for part in command))

    assert result.code == 1 and result.out == ""
    lines = result.err.splitlines()
    assert lines[0] == (
        f"dsh: error: '{name}' names 2 sessions (1 by title, 1 by id prefix); "
        "name one by its full id"
    )
    assert sorted(lines[1:]) == sorted(
        [f"  {titled}  {name}", f"  {prefixed}  evil \\x1b[31m title"]
    )
    assert dsh("show", titled, "--json").json() == before, "nothing changed"
    assert dsh("show", prefixed, "--json").code == 0, "nothing deleted"


def test_demo_again_keeps_what_the_user_wrote_and_renamed(dsh: Run) -> None:
    assert dsh("demo").code == 0
    assert dsh("send", "demo-notes", "my own note: buy milk").code == 0
    assert dsh("rename", "demo-notes", "My notes").code == 0
    dsh("delete", "demo-webshop-checkout")
    before = dsh("show", "demo-notes", "--json").json()

    again = dsh("demo")

    assert again.code == 0, again.err
    assert "created 1 missing demo sessions; 6 existing ones were left untouched" in again.out
    assert dsh("show", "demo-notes", "--json").json() == before
    assert "My notes" in dsh("sessions").out
    assert dsh("show", "demo-webshop-checkout").code == 0, "the missing one is back"


def test_demo_reset_without_a_terminal_needs_yes(dsh: Run) -> None:
    assert dsh("demo").code == 0
    assert dsh("send", "demo-notes", "my own note").code == 0
    before = dsh("show", "demo-notes", "--json").json()

    refused = dsh("demo", "--reset")
    assert refused.code == 1 and refused.out == ""
    assert refused.err == (
        "dsh: error: --reset deletes the demo sessions and everything written in them; "
        "add --yes to confirm (there is no terminal to ask on)\n"
    )
    assert dsh("show", "demo-notes", "--json").json() == before

    done = dsh("demo", "--reset", "--yes")
    assert done.code == 0 and "(rebuilt)" in done.out
    assert "my own note" not in dsh("show", "demo-notes").out


def test_demo_says_how_to_reach_dsh_when_it_is_not_on_path(dsh_env: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "VIRTUAL_ENV")}
    bindir = Path(sys.executable).parent

    def demo(path: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tui.cli", "--db", str(dsh_env), "demo"],
            env={**env, "PATH": path},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert f"`dsh` is not on your PATH: run `. {bindir / 'activate'}`" in demo("/usr/bin:/bin")
    assert "not on your PATH" not in demo(f"{bindir}:/usr/bin:/bin")


def test_offline_delay_is_read_by_send(dsh: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    session = new(dsh)
    monkeypatch.setenv("DSH_OFFLINE_DELAY", "soon")
    for command in (("send", session, "hi"), ("prepare", "--session", session, "hi")):
        result = dsh(*command)
        assert result.code == 1
        assert result.err == (
            "dsh: error: environment: DSH_OFFLINE_DELAY must be a number of seconds (0–60)\n"
        )


@pytest.mark.parametrize("command", ["send", "prepare"])
def test_offline_delay_slows_the_offline_model_of_cli_commands(
    dsh: Run, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    session = new(dsh)
    delays: list[float] = []
    real_open_runtime = tui.shared.runtime.open_runtime

    @contextlib.asynccontextmanager
    async def spying_open_runtime(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with real_open_runtime(*args, **kwargs) as rt:
            delays.append(rt.provider.chunk_delay)
            yield rt

    # (``tui.cli.commands`` loads it when a command runs)
    monkeypatch.setattr(tui.shared.runtime, "open_runtime", spying_open_runtime)
    monkeypatch.setenv("DSH_OFFLINE_DELAY", "0.001")
    args = ("send", session, "hi") if command == "send" else ("prepare", "--session", session, "hi")
    assert dsh(*args).code == 0
    assert delays == [0.001]


def test_export_to_a_file_says_where_it_went_and_stdout_stays_clean(
    dsh: Run, tmp_path: Path
) -> None:
    session = new(dsh)
    target = tmp_path / "out.md"
    done = dsh("export", session, "-o", str(target))
    assert done.code == 0, done.err
    assert done.out == f"exported to {target.resolve()}\n"
    assert target.read_text(encoding="utf-8").startswith("# ")
    to_stdout = dsh("export", session)
    assert to_stdout.out.startswith("# ") and "exported to" not in to_stdout.out + to_stdout.err


def _limit_file_size() -> None:  # in the child: no file may grow past 64 KiB ("disk full")
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead


def test_a_failed_export_leaves_the_existing_file_whole(dsh: Run, tmp_path: Path) -> None:
    assert dsh("demo").code == 0
    target = tmp_path / "export" / "long.md"
    target.parent.mkdir()
    target.write_text("the previous export, intact\n", encoding="utf-8")
    db = tmp_path / "dsh.sqlite3"
    assert len(dsh("export", "demo-webshop-long-history").out) > 65536
    done = subprocess.run(
        [*DSH, "--db", str(db), "export", "demo-webshop-long-history", "-o", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limit_file_size,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"dsh: error: cannot write {target}: File too large")
    assert done.stderr.endswith("; nothing was written\n")
    assert target.read_text(encoding="utf-8") == "the previous export, intact\n"
    assert [p.name for p in target.parent.iterdir()] == ["long.md"], "no temp file left"


def test_sessions_in_a_pipe_at_80_columns_keeps_every_row_whole(
    dsh: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dsh("demo").code == 0
    monkeypatch.setenv("COLUMNS", "80")
    out = dsh("sessions").out
    lines = out.splitlines()
    assert len(lines) == 1 + 7, out  # the header and one line per session: nothing folded
    ids = [line.split("\t")[0] for line in lines[1:]]
    assert "demo-research-with-references" in ids and "demo-webshop-long-history" in ids
    assert all(line == line.rstrip() for line in lines)
    assert "Release review (uses references)" in out, "a pipe gets whole titles"


LONG_LINE = " ".join(f"word{i}" for i in range(40))  # ~300 characters, one line


def test_show_into_a_pipe_does_not_wrap_and_has_no_trailing_spaces(
    dsh: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert dsh("demo").code == 0
    assert dsh("send", "demo-notes", f"{LONG_LINE}\n  indented {LONG_LINE}").code == 0
    out = dsh("show", "demo-notes").out
    lines = out.splitlines()
    assert f"  {LONG_LINE}" in lines, "the user's line, whole"
    assert f"    indented {LONG_LINE}" in lines
    assert any(line.startswith("  Request: ") and LONG_LINE in line for line in lines), (
        "the Markdown reply, one paragraph per line"
    )
    assert [line for line in lines if line != line.rstrip()] == []

    heading = new(dsh)
    assert dsh("send", heading, "see:\n\n# Big heading").code == 0
    assert "  Big heading" in dsh("show", heading).out.splitlines(), "not centred far right"

    expanded = dsh("show", "demo-research-with-references", "--expand").out.splitlines()
    assert (
        "    assistant: Merge **shipping** and **billing** into one address step, and fold the "
        "review page into payment with an order summary beside the card form."
    ) in expanded
    assert [line for line in expanded if line != line.rstrip()] == []

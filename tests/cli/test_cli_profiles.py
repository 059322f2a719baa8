"""Issue 32 §1 and §3 on the command line, on SQLite and PostgreSQL: ``dsh profiles``,
``dsh new --profile``, ``dsh send --profile`` (switches, says so), a missing key said
before anything is stored, ``dsh usage``, and hostile profile names in a log shown escaped."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.log import SESSION_PROFILE
from core.usage import format_tokens
from stores import open_store
from tests.cli.conftest import Result, Run
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json, run_dsh
from tests.storekinds import pg_schema_url
from tests.terminal_safety import assert_terminal_safe

CONFIG = """\
default_profile = "local"

[profiles.local]
provider = "offline"
model = "echo-2"

[profiles.work]
provider = "openai"
model = "deepseek-chat"
api_key_env = "DSH_TEST_WORK_KEY"
context_window = 64000
price_input = 0.27
price_output = 1.10

[profiles.odd]
provider = "offline"
model = "m\\u001b[31m[bold]x"
"""

HOSTILE_NAME = "\x1b[31m[bold]x"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dsh_env: Path) -> Path:
    path = tmp_path / "dsh.toml"
    path.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("DSH_CONFIG", str(path))
    monkeypatch.delenv("DSH_TEST_WORK_KEY", raising=False)
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, dsh_env: Path, config: Path) -> Iterator[str]:
    """The database of each durable kind: a SQLite file, or a PostgreSQL schema's URL."""
    if request.param == "sqlite":
        yield str(dsh_env)
        return
    with pg_schema_url(request.getfixturevalue("pg_cluster")) as url:
        yield url


@pytest.fixture
def run(dsh: Run, where: str) -> Run:
    """``dsh`` on the fixture's database."""
    return lambda *args, **kw: dsh("--db", where, *args, db=None, **kw)


def one_line(result: Result, code: int = 1) -> str:
    assert result.code == code, (result.out, result.err)
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("dsh: error: ")
    return lines[0]


def log_of(run: Run, session: str) -> list[dict[str, Any]]:
    shown = run("show", session, "--json")
    assert shown.code == 0, shown.err
    events: list[dict[str, Any]] = shown.json()
    return events


def new(run: Run, *args: str) -> str:
    made = run("new", *args)
    assert made.code == 0, made.err
    return made.out.strip()


def sessions(run: Run) -> dict[str, dict[str, Any]]:
    listed = run("sessions", "--json")
    assert listed.code == 0, listed.err
    return {row["id"]: row for row in listed.json()}


# --------------------------------------------------------------------------- dsh profiles


def test_profiles_lists_each_once_with_the_default_and_never_a_key(
    dsh: Run, config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No database is opened: a location where none can be made does not matter.
    nowhere = tmp_path / "missing-dir" / "deeper" / "db.sqlite3"
    listed = dsh("profiles", "--json", db=nowhere)
    assert listed.code == 0, listed.err
    assert listed.json() == [
        {"name": "local", "provider": "offline", "model": "echo-2", "default": True},
        {"name": "odd", "provider": "offline", "model": "m\x1b[31m[bold]x", "default": False},
        {"name": "offline", "provider": "offline", "model": "echo-1", "default": False},
        {"name": "work", "provider": "openai", "model": "deepseek-chat", "default": False},
    ]
    assert "\x1b" not in listed.out  # escaped in the JSON text, lossless once parsed
    assert not nowhere.parent.exists()
    table = dsh("profiles", db=nowhere)
    assert table.code == 0, table.err
    assert_terminal_safe(table.out, "profiles")
    head, *rows = [line.split("\t") for line in table.out.splitlines()]
    assert head == ["profile", "provider", "model", "default", "key"]
    assert rows == [
        ["local", "offline", "echo-2", "yes", "—"],
        ["odd", "offline", "m\\x1b[31m[bold]x", "", "—"],
        ["offline", "offline", "echo-1", "", "—"],
        ["work", "openai", "deepseek-chat", "", "DSH_TEST_WORK_KEY (not set)"],
    ]
    # With the key set: the variable's name, never its value; $DSH_PROFILE picks the default.
    monkeypatch.setenv("DSH_TEST_WORK_KEY", "sk-very-secret-value")
    monkeypatch.setenv("DSH_PROFILE", "work")
    table = dsh("profiles", db=nowhere)
    assert "sk-very-secret-value" not in table.out + table.err
    assert table.out.splitlines()[-1].split("\t") == [
        "work",
        "openai",
        "deepseek-chat",
        "yes",
        "DSH_TEST_WORK_KEY",
    ]
    as_json = dsh("profiles", "--json", db=nowhere)
    assert "sk-very-secret-value" not in as_json.out
    assert [p["name"] for p in as_json.json() if p["default"]] == ["work"]


def test_profiles_without_a_config_is_the_builtin_offline_one(dsh: Run) -> None:
    listed = dsh("profiles", "--json")
    assert listed.json() == [
        {"name": "offline", "provider": "offline", "model": "echo-1", "default": True}
    ]


# --------------------------------------------------------------------------- new / send


def test_new_with_a_profile_records_it_and_the_reply_uses_it(run: Run) -> None:
    sid = new(run, "--profile", "odd", "--no-cwd")
    log = log_of(run, sid)
    assert [(e["seq"], e["type"], e["data"]) for e in log] == [
        (0, SESSION_PROFILE, {"profile": "odd", "provider": "offline", "model": "m\x1b[31m[bold]x"})
    ]
    assert sessions(run)[sid]["profile"] == "odd"
    plain = new(run)  # no profile recorded: the default's name
    assert sessions(run)[plain]["profile"] == "local"
    sent = run("send", sid, "which model?")
    assert sent.code == 0, sent.err
    assert "switched" not in sent.err
    reply = [e for e in log_of(run, sid) if e["type"] == "assistant/message"][-1]["data"]
    assert reply["message"]["source"]["model"] == "m\x1b[31m[bold]x"
    assert reply["profile"] == "odd"


def test_new_with_an_unknown_profile_creates_nothing(run: Run) -> None:
    before = sessions(run)
    line = one_line(run("new", "--profile", "nope"))
    assert "unknown profile 'nope'" in line and "local, odd, offline, work" in line
    line = one_line(run("new", "--profile", HOSTILE_NAME))
    assert "\x1b" not in line and "\\x1b" in line
    assert sessions(run) == before


def test_send_with_a_profile_switches_says_so_and_sticks(run: Run) -> None:
    sid = new(run)
    first = run("send", sid, "hello")
    assert first.code == 0, first.err
    sent = run("send", "--profile", "odd", sid, "again")
    assert sent.code == 0, sent.err
    (said,) = [line for line in sent.err.splitlines() if "switched" in line]
    assert said == "dsh: switched hello to profile odd (offline, m\\x1b[31m[bold]x)"
    assert_terminal_safe(sent.err, "send --profile")
    log = log_of(run, sid)
    marks = [e for e in log if e["type"] == SESSION_PROFILE]
    assert [m["data"]["profile"] for m in marks] == ["odd"]
    replies = [e["data"] for e in log if e["type"] == "assistant/message"]
    assert [r["message"]["source"]["model"] for r in replies] == ["echo-2", "m\x1b[31m[bold]x"]
    assert sessions(run)[sid]["profile"] == "odd"
    # The next send, without --profile, stays on it; naming it again records nothing more.
    assert run("send", sid, "and again").code == 0
    again = run("send", "--profile", "odd", sid, "once more")
    assert again.code == 0 and "switched" not in again.err
    log = log_of(run, sid)
    assert len([e for e in log if e["type"] == SESSION_PROFILE]) == 1
    replies = [e["data"] for e in log if e["type"] == "assistant/message"]
    assert {r["message"]["source"]["model"] for r in replies[1:]} == {"m\x1b[31m[bold]x"}


def test_an_unknown_profile_on_send_is_one_line_and_stores_nothing(run: Run) -> None:
    sid = new(run)
    assert run("send", sid, "hello").code == 0
    before = log_of(run, sid)
    for args in (
        ("send", "--profile", "nope", sid, "hi"),
        ("retry", "--profile", "nope", sid),
        ("edit", "--profile", "nope", sid, "0", "hi"),
    ):
        assert "unknown profile 'nope'" in one_line(run(*args)), args
    assert log_of(run, sid) == before


def test_a_missing_key_is_said_before_anything_is_stored(run: Run) -> None:
    sid = new(run)
    assert run("send", sid, "hello").code == 0
    before = log_of(run, sid)
    for args in (
        ("send", "--profile", "work", sid, "hi"),
        ("retry", "--profile", "work", sid),
        ("edit", "--profile", "work", sid, "0", "hi"),
    ):
        line = one_line(run(*args))
        assert line.startswith("dsh: error: profile 'work': no API key: set DSH_TEST_WORK_KEY")
    assert log_of(run, sid) == before, "not even the profile switch"
    # A session on that profile: every command that asks the model says it first.
    made = run("new", "--profile", "work")
    assert made.code == 0
    assert made.err == (
        "dsh: note: profile 'work': no API key: set DSH_TEST_WORK_KEY (or choose another profile)\n"
    )
    work = made.out.strip()
    recorded = log_of(run, work)
    for args in (
        ("send", work, "hi"),
        ("reply", work),
        ("retry", work),
        ("edit", work, "0", "hi"),
        ("compact", work),
    ):
        assert "no API key: set DSH_TEST_WORK_KEY" in one_line(run(*args)), args
    assert log_of(run, work) == recorded
    # Another profile with its key works at once: the switch, the message, the reply.
    switched = run("send", "--profile", "local", work, "hi")
    assert switched.code == 0, switched.err
    assert [e["type"] for e in log_of(run, work)][:3] == [
        SESSION_PROFILE,
        "user/message",
        SESSION_PROFILE,
    ]


# --------------------------------------------------------------------------- usage


def test_usage_of_an_offline_session_is_marked_as_estimates(run: Run) -> None:
    sid = new(run, "--profile", "local")
    empty = run("usage", sid, "--json")
    assert empty.code == 0, empty.err
    assert empty.json() == {
        "profile": "local",
        "input_tokens": 0,
        "output_tokens": 0,
        "cost": None,
        "next_request_tokens": empty.json()["next_request_tokens"],
        "context_window": 128000,
        "next_request_exact": False,
        "replies": 0,
    }
    assert run("send", sid, "x" * 4000).code == 0
    assert run("retry", sid).code == 0  # a retried reply was paid for: it counts
    figures = run("usage", sid, "--json").json()
    assert figures["replies"] == 2
    assert figures["input_tokens"] > 2 * 1000 and figures["output_tokens"] > 0
    assert figures["next_request_tokens"] > 1000 > empty.json()["next_request_tokens"]
    shown = run("usage", sid)
    assert shown.code == 0, shown.err
    # aligned: every label padded to the longest ("context window") and two spaces
    rows = shown.out.splitlines()
    assert all(row[14:16] == "  " and row[16] != " " for row in rows), rows
    lines = {row[:16].rstrip(): row[16:] for row in rows}
    assert lines["profile"] == "local (offline, echo-2)"
    assert lines["replies"] == "2"
    assert lines["input tokens"].startswith("≈") and lines["output tokens"].startswith("≈")
    assert lines["cost"] == "— (the profile sets no prices)"
    tokens = figures["next_request_tokens"]
    share = round(tokens / 128_000 * 100)
    assert (
        lines["next request"] == f"≈{format_tokens(tokens)} tokens, {share}% of the context window"
    )
    assert lines["context window"] == "128k (assumed: the profile sets no context_window)"


async def test_usage_with_a_provider_that_counts_and_prices(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    config = tmp_path / "dsh.toml"
    at_server = f'model = "deepseek-chat"\nbase_url = "{fake_openai.base_url}"'
    config.write_text(CONFIG.replace('model = "deepseek-chat"', at_server), encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DSH_CONFIG": str(config),
        "DSH_DB": str(tmp_path / "db.sqlite3"),
        "DSH_TEST_WORK_KEY": "sk-usage-test",
    }
    code, out, err = await run_dsh(env, "new", "--profile", "work")
    assert code == 0, err
    sid = out.strip()
    usage = {"prompt_tokens": 12_000, "completion_tokens": 3_000, "total_tokens": 15_000}
    fake_openai.sse([chunk_json("Fine."), chunk_json(finish="stop", usage=usage)])
    code, out, err = await run_dsh(env, "send", sid, "count me")
    assert (code, out) == (0, "Fine.\n"), err
    code, out, err = await run_dsh(env, "usage", sid, "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures == {
        "profile": "work",
        "input_tokens": 12_000,
        "output_tokens": 3_000,
        "cost": round((12_000 * 0.27 + 3_000 * 1.10) / 1e6, 6),
        "next_request_tokens": 15_000,
        "context_window": 64_000,
        "next_request_exact": True,
        "replies": 1,
    }
    code, out, err = await run_dsh(env, "usage", sid)
    assert code == 0, err
    assert "sk-usage-test" not in out + err
    assert out.splitlines() == [
        "profile         work (openai, deepseek-chat)",
        "replies         1",
        "input tokens    12,000",
        "output tokens   3,000",
        "cost            $0.0065",
        "next request    15,000 tokens, 23% of the context window",
        "context window  64k",
    ]


# --------------------------------------------------------------------------- hostile names


async def _record(where: str, session: str, data: dict[str, Any]) -> None:
    async with await open_store(where) as store:
        await store.append(session, SESSION_PROFILE, data)


def test_a_hostile_profile_name_written_by_hand_is_shown_escaped(
    run: Run, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = new(run)
    assert run("send", sid, "hello").code == 0
    data = {"profile": HOSTILE_NAME, "provider": "\x1b]0;pwned\x07", "model": "\u202eevil"}
    asyncio.run(_record(where, sid, data))
    for args in (
        ("sessions",),
        ("sessions", "--json"),
        ("usage", sid),
        ("usage", sid, "--json"),
        ("show", sid),
        ("show", sid, "--json"),
        ("export", sid, "--format", "md"),
        ("send", sid, "still there?"),
    ):
        result = run(*args)
        assert result.code == 0, (args, result.err)
        assert_terminal_safe(result.out, " ".join(args))
        assert_terminal_safe(result.err, " ".join(args))
    # The listing keeps the recorded name (escaped), and says it is not configured.
    (row,) = [line.split("\t") for line in run("sessions").out.splitlines() if sid in line]
    assert row[4] == "\\x1b[31m[bold]x (not configured)"
    assert sessions(run)[sid]["profile"] == HOSTILE_NAME  # lossless in JSON
    # The default answers; a note says why, once, escaped.
    usage = run("usage", sid)
    assert usage.err == (
        "dsh: note: profile '\\x1b[31m[bold]x' is not configured any more; using 'local'\n"
    )
    assert usage.out.splitlines()[0].endswith("local (offline, echo-2)")
    assert run("usage", sid, "--json").json()["profile"] == "local"
    shown = run("show", sid).out
    assert "▸ profile: \\x1b[31m[bold]x (\\x1b]0;pwned\\x07, \\u202eevil) · " in shown
    exported = run("export", sid, "--format", "md").out
    assert "_profile: \\x1b[31m[bold]x (\\x1b]0;pwned\\x07, \\u202eevil) · " in exported
    raw = [e for e in log_of(run, sid) if e["type"] == SESSION_PROFILE]
    assert raw[0]["data"] == data  # the JSON form keeps the event as it is
    # A fork carries the recorded name over as the log has it.
    fork = run("fork", sid)
    assert fork.code == 0, fork.err
    assert sessions(run)[fork.out.strip()]["profile"] == HOSTILE_NAME


def test_a_huge_recorded_profile_name_is_cut_in_the_note(run: Run, where: str) -> None:
    sid = new(run)
    assert run("send", sid, "hello").code == 0
    name = "\x07" + "n" * 7000  # a mark event holds up to 8 KiB: the note says 64 of it
    asyncio.run(_record(where, sid, {"profile": name, "provider": "p", "model": "m"}))
    usage = run("usage", sid)
    assert usage.code == 0, usage.err
    assert usage.err == (
        "dsh: note: profile '\\x07" + "n" * 62 + "…' is not configured any more; using 'local'\n"
    )


def test_edit_reads_the_text_from_standard_input(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = new(run)
    assert run("send", sid, "typed on the line").code == 0
    text = "from stdin, not UTF-8: \xff!".encode("latin-1")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))
    edited = run("edit", sid, "0", "-")
    assert edited.code == 0, edited.err
    assert "Request: from stdin, not UTF-8: \\udcff!" in edited.out
    users = [e for e in log_of(run, sid) if e["type"] == "user/message"]
    assert [u["data"]["content"][0]["text"] for u in users] == [
        "typed on the line",
        "from stdin, not UTF-8: \udcff!",
    ]
    # the edit took the place of the message and its reply (seqs 0 and 2, chunks aside)
    replies = [e["seq"] for e in log_of(run, sid) if e["type"] == "assistant/message"]
    assert users[1]["surface_op"] == {"op": "replace", "start": 0, "end": replies[0]}
    assert users[1]["source_event_seqs"] == [0, replies[0]]

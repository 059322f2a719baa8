"""End-to-end tests of the ``dsh`` command line on a temp SQLite database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stores.sharing import os_user
from tests.cli.conftest import Run


def new(dsh: Run, *args: str) -> str:
    result = dsh("new", *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_full_flow_new_send_show_prepare_compact_reference(dsh: Run) -> None:
    a = new(dsh, "--cwd", "/proj")
    b = new(dsh, "--cwd", "/proj")
    assert dsh("send", a, "first question about caching").code == 0
    sent = dsh("send", a, "second question about queues")
    assert sent.code == 0 and "Request: second question about queues" in sent.out
    mention = dsh("mention", a).out.strip()
    assert mention.startswith("@[first question about caching](dsh-session:")

    reply = dsh("send", b, f"what did we decide in {mention}?")
    assert reply.code == 0, reply.err
    assert "- first question about caching: 4 messages received" in reply.out

    shown = dsh("show", b)
    assert "Referenced sessions · first question about caching" in shown.out
    assert "4/4 messages kept" in shown.out
    assert "what did we decide in @first question about caching?" in shown.out
    expanded = dsh("show", b, "--expand")
    assert (
        "captured through seq" in expanded.out
        and "user: second question about queues" in expanded.out
    )

    log = dsh("show", b, "--json").json()
    assert [e["type"] for e in log[:2]] == ["user/message", "user/message"]
    assert log[0]["data"]["source"]["kind"] == "session-reference"
    assert log[0]["surface_op"] == "append" and log[0]["source_event_seqs"] is None

    preview = dsh("prepare", "--session", b, "--json", f"again {mention}").json()
    assert preview[0]["role"] == "system"
    assert preview[-1] == {"role": "user", "content": "again @first question about caching"}
    assert preview[-2]["content"].startswith("## Referenced sessions")
    assert len(dsh("show", b, "--json").json()) == len(log), "prepare must not append"

    compacted = dsh("compact", a)
    assert compacted.code == 0 and "compacted 4 messages" in compacted.out
    assert dsh("send", a, "third question after compaction").code == 0
    after = dsh("send", b, f"and now {mention}?")
    assert after.code == 0
    snapshot = dsh("show", b, "--json").json()
    snap = [
        e
        for e in snapshot
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "session-reference"
    ][-1]
    prompt = snap["data"]["content"][0]["text"]
    assert "compacted-summary" in prompt and "third question after compaction" in prompt
    conversation = json.loads(
        prompt.split("<referenced-sessions>\n")[1].split("\n</referenced-sessions>")[0]
    )[0]["conversation"]
    texts = [item["text"] for item in conversation]
    assert texts[0].startswith("<compacted-summary>"), "the checkpoint comes first"
    assert (
        "first question about caching" not in texts and "second question about queues" not in texts
    )
    assert texts[1] == "third question after compaction"
    assert snap["data"]["source"]["references"][0]["compacted"] is True


def test_sessions_json_and_table(dsh: Run) -> None:
    assert dsh("sessions").out.startswith("No sessions yet")
    a = new(dsh, "--cwd", "/x")
    dsh("rename", a, "My [bold]title[/]")
    rows = dsh("sessions", "--json").json()
    assert rows == [
        {
            "id": a,
            "title": "My [bold]title[/]",
            "cwd": "/x",
            "created_at": rows[0]["created_at"],
            "owner": os_user(),  # issue 17: on SQLite, the OS user
            "parent": None,  # issue 32: not a fork
            "profile": "offline",  # issue 32: none recorded, the default's name
        }
    ]
    table = dsh("sessions").out
    assert "My [bold]title[/]" in table and a in table


def test_sessions_named_by_prefix_and_title(dsh: Run) -> None:
    a = new(dsh)
    dsh("rename", a, "Plans")
    assert dsh("show", "Plans").code == 0
    assert dsh("show", a[:8]).code == 0
    missing = dsh("show", "nothing-like-this")
    assert missing.code == 1 and missing.err.startswith("dsh: error: no session matches")
    assert "Traceback" not in missing.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("send", "{a}", "hi @[x](dsh-session:!!)"), "malformed session mention"),
        (("send", "{a}", "me {self}"), "cannot reference its own session"),
        (("send", "{a}", "ghost @[g](dsh-session:Imdob3N0Ig)"), "does not exist (was it deleted?)"),
        (("send", "{a}", "   "), "the message is empty"),
        (("compact", "{a}"), "nothing to compact"),
        (("rename", "{a}", "  "), "title cannot be empty"),
    ],
)
def test_user_mistakes_get_one_line(dsh: Run, args: tuple[str, ...], message: str) -> None:
    a = new(dsh)
    self_mention = dsh("mention", a).out.strip()
    result = dsh(*(arg.format(a=a, self=self_mention) for arg in args))
    assert result.code == 1
    assert message in result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert dsh("show", a, "--json").json() == [], "nothing may be appended"


def test_too_many_references(dsh: Run) -> None:
    a = new(dsh)
    others = [new(dsh) for _ in range(4)]
    mentions = " ".join(dsh("mention", o).out.strip() for o in others)
    result = dsh("send", a, f"all of {mentions}")
    assert result.code == 1 and "SESSION_REFERENCE_TOO_MANY" in result.err


def test_export_json_imports_back_unchanged(dsh: Run, tmp_path: Path) -> None:
    a = new(dsh, "--cwd", "/c\x1bwd")
    dsh("send", a, "hello \ud800 lone surrogate and 😀")
    dsh("compact", a)
    exported = tmp_path / "a.jsonl"
    assert dsh("export", a, "--format", "json", "-o", str(exported)).code == 0
    other_db = tmp_path / "other.sqlite3"
    imported = dsh("import", str(exported), db=other_db)
    assert imported.code == 0 and imported.out.strip() == a
    again = tmp_path / "b.jsonl"
    dsh("export", a, "--format", "json", "-o", str(again), db=other_db)
    assert again.read_bytes() == exported.read_bytes()
    duplicate = dsh("import", str(exported), db=other_db)
    assert duplicate.code == 0 and "already present with the same events" in duplicate.err


def test_export_markdown(dsh: Run) -> None:
    a = new(dsh)
    dsh("send", a, "hello markdown")
    out = dsh("export", a, "--format", "md").out
    assert (
        out.startswith("# hello markdown\n") and "> hello markdown" in out and "## Assistant" in out
    )


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [
                '{"type":"session","id":"x","created_at":1,"cwd":null}',
                '{"seq":1,"type":"t","time":1,"data":{},"surface_op":null,"source_event_seqs":null}',
            ],
            "line 2: expected seq 0",
        ),
        (
            ['{"type":"session","id":"x","created_at":1,"cwd":null}', "{not json"],
            "line 2: invalid JSON",
        ),
        (
            [
                '{"type":"session","id":"x","created_at":1,"cwd":null}',
                '{"seq":0,"type":"user/message","time":1,"data":{},"surface_op":{"op":"replace","start":5,"end":5},"source_event_seqs":[]}',
            ],
            "line 2: replace refers to seq 5",
        ),
        (
            [
                '{"type":"session","id":"x","created_at":1,"cwd":null}',
                '{"seq":0,"type":"user/message","time":1,"data":{},"surface_op":null,"source_event_seqs":null}',
            ],
            "line 2: a user/message event must carry",
        ),
        (['{"seq":0}'], "line 1: the first line must be the session header"),
        ([], "the file is empty"),
    ],
)
def test_bad_imports_are_rejected_with_line_numbers(
    dsh: Run, tmp_path: Path, lines: list[str], message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = dsh("import", str(path))
    assert result.code == 1 and message in result.err and "nothing imported" in result.err
    assert dsh("sessions", "--json").json() == []


def test_delete(dsh: Run) -> None:
    a = new(dsh)
    assert dsh("delete", a).code == 0
    assert dsh("sessions", "--json").json() == []
    assert dsh("delete", a).code == 1


def test_candidates(dsh: Run) -> None:
    a = new(dsh, "--cwd", "/p")
    b = new(dsh, "--cwd", "/p")
    c = new(dsh)
    dsh("rename", b, "Beta")
    rows = dsh("candidates", a, "--json").json()
    assert [r["id"] for r in rows] == [b, c]
    assert rows[0]["mention"].startswith("@[Beta](dsh-session:")
    assert [r["id"] for r in dsh("candidates", a, "bet", "--json").json()] == [b]


def test_provider_down_keeps_the_message(
    dsh: Run, monkeypatch: pytest.MonkeyPatch, dsh_env: Path
) -> None:
    a = new(dsh)
    monkeypatch.setenv("DSH_PROVIDER", "openai")
    monkeypatch.setenv("DSH_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test-secret")
    result = dsh("send", a, "are you there?")
    assert result.code == 1 and "the model failed" in result.err
    assert "sk-test-secret" not in result.err
    log = dsh("show", a, "--json").json()
    assert log[0]["data"]["content"][0]["text"] == "are you there?"
    assert log[-1]["type"] == "turn/end" and log[-1]["data"]["status"] == "error"


def test_missing_key_stores_nothing(dsh: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: a missing key is said before anything is stored (it used to keep the
    message and record the failed turn)."""
    a = new(dsh)
    monkeypatch.setenv("DSH_PROVIDER", "openai")
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    result = dsh("send", a, "hello?")
    assert result.code == 1 and "DEEPSEEK_API_KEY" in result.err
    assert (
        result.err.count("\n") == 1
        and "nothing was sent" in result.err
        and "Traceback" not in result.err
    )
    assert dsh("show", a, "--json").json() == []


def test_invalid_config_is_one_line(dsh: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_MAX_REFERENCES", "9")
    result = dsh("sessions")
    assert (
        result.code == 1
        and result.err == "dsh: error: environment: DSH_MAX_REFERENCES must be at most 3\n"
    )


def test_corrupt_database_is_one_line(dsh: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    result = dsh("sessions", db=bad)
    assert (
        result.code == 1 and result.err.startswith("dsh: error:") and "Traceback" not in result.err
    )


def test_usage_errors_exit_2(dsh: Run) -> None:
    with pytest.raises(SystemExit) as info:
        dsh("frobnicate")
    assert info.value.code == 2


def test_demo_then_show_and_send_with_a_real_process(dsh_env: Path, tmp_path: Path) -> None:
    """The issue's "done when": `dsh demo`, `dsh show`, `dsh send` with a mention, no key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env["DSH_DB"] = str(dsh_env)
    dsh_bin = Path(sys.executable).with_name("dsh")
    command = [str(dsh_bin)] if dsh_bin.exists() else [sys.executable, "-m", "tui.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    assert "Demo data ready" in demo.stdout
    sessions = json.loads(run("sessions", "--json").stdout)
    assert len(sessions) == 7
    ids = {s["id"] for s in sessions}
    assert "démo-café-会话-🚀" in ids
    shown = run("show", "demo-research-with-references")
    assert (
        shown.returncode == 0
        and "Referenced sessions · Checkout flow redesign, Kubernetes upgrade plan" in shown.stdout
    )
    hostile = run("show", "demo-hostile-[bold]x[/]")
    assert (
        hostile.returncode == 0 and "\x1b[2J" not in hostile.stdout and "\\x1b[2J" in hostile.stdout
    )
    assert "</referenced-sessions>" in hostile.stdout
    mention = run("mention", "demo-webshop-checkout").stdout.strip()
    sent = run("send", "demo-notes", f"what did {mention} decide?")
    assert sent.returncode == 0, sent.stderr
    assert "- Checkout flow redesign: 6 messages received" in sent.stdout
    again = run("demo")
    assert again.returncode == 0
    assert len(json.loads(run("sessions", "--json").stdout)) == 7


def test_imported_foreign_kinds_are_shown(dsh: Run, tmp_path: Path) -> None:
    events = [
        {
            "type": "user/message",
            "data": {
                "id": "u",
                "role": "user",
                "content": [{"type": "text", "text": "direct question"}],
                "source": {"kind": "user"},
            },
            "surface_op": "append",
        },
        {
            "type": "steering/message",
            "data": {
                "turn": 1,
                "message": {
                    "id": "s",
                    "role": "user",
                    "content": [{"type": "text", "text": "steer this way"}],
                    "source": {"kind": "user"},
                },
            },
            "surface_op": "append",
        },
        {
            "type": "assistant/message",
            "data": {
                "turn": 1,
                "step": 0,
                "message": {
                    "id": "a",
                    "role": "assistant",
                    "content": [
                        {"type": "reasoning", "text": "secret thoughts"},
                        {"type": "tool-call", "id": "c1", "name": "grep", "arguments": "{}"},
                        {"type": "text", "text": "calling a tool"},
                    ],
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                },
            },
            "surface_op": "append",
        },
        {
            "type": "tool/result",
            "data": {
                "turn": 1,
                "step": 1,
                "message": {
                    "id": "t",
                    "role": "user",
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": "c1",
                            "content": [{"type": "text", "text": "tool output"}],
                            "isError": False,
                        }
                    ],
                    "source": {"kind": "tool", "callId": "c1"},
                },
            },
            "surface_op": "append",
        },
        {
            "type": "user/message",
            "data": {
                "id": "p",
                "role": "user",
                "content": [{"type": "text", "text": "plugin context"}],
                "source": {"kind": "plugin", "plugin": "files"},
            },
            "surface_op": "append",
        },
        {"type": "vendor/custom", "data": {"whatever": [1, 2, 3]}, "surface_op": None},
        {
            "type": "assistant/chunk",
            "data": {"turn": 1, "step": 2, "chunk": {"type": "future-delta"}},
            "surface_op": None,
        },
    ]
    lines = [
        json.dumps(
            {"type": "session", "id": "foreign", "created_at": 1_700_000_000_000, "cwd": None}
        )
    ]
    for seq, event in enumerate(events):
        lines.append(
            json.dumps(
                {"seq": seq, "time": 1_700_000_000_000 + seq, "source_event_seqs": None, **event}
            )
        )
    path = tmp_path / "foreign.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert dsh("import", str(path)).out.strip() == "foreign"
    shown = dsh("show", "foreign").out
    for expected in [
        "direct question",
        "You (steering)",
        "steer this way",
        "calling a tool",
        "Tool result c1",
        "Context from files",
    ]:
        assert expected in shown
    assert "secret thoughts" not in shown
    # the model sees user, steering and assistant text, never reasoning, tools or plugins' kinds lost
    a = new(dsh)
    preview = dsh("prepare", "--session", "foreign", "--json", "next").json()
    assert [m["content"] for m in preview[1:]] == [
        "direct question",
        "steer this way",
        "calling a tool",
        "plugin context",
        "next",
    ]
    mention = dsh("mention", "foreign").out.strip()
    prompt = dsh("prepare", "--session", a, "--json", f"see {mention}").json()[-2]["content"]
    assert (
        "secret thoughts" not in prompt
        and "tool output" not in prompt
        and "plugin context" not in prompt
    )
    assert "steer this way" in prompt and "calling a tool" in prompt

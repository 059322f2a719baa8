"""``dsh acp`` and ``session/fork`` (unstable in ACP schema v1.19, announced as
``sessionCapabilities.fork``): a new session whose surface is the parent's whole surface,
recording its parent and seq and the parent's profile; unknown or empty sessions are
invalid-params errors that store nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import AvailableCommandsUpdate, SessionConfigOptionSelect, SessionInfoUpdate

from stores import open_store
from tests.acp.harness import dsh_command, open_agent
from tests.acp.profiles import profile_events, replies, surface, write_config
from tests.acp.seed import read_log, seed_session

pytestmark = pytest.mark.timeout(120)


def _current(options: Any) -> str:
    assert isinstance(options, list) and len(options) == 1
    option = options[0]
    assert isinstance(option, SessionConfigOptionSelect) and option.id == "profile"
    return option.current_value


async def test_fork_copies_the_surface_records_the_parent_and_keeps_the_profile(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path, default="alpha")
    async with open_agent(tmp_path, db) as agent:
        caps = agent.init.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.fork is not None

        parent = (await agent.conn.new_session(cwd="/proj", mcp_servers=[])).session_id
        await agent.conn.set_config_option(config_id="profile", session_id=parent, value="beta")
        await agent.conn.prompt(session_id=parent, prompt=[text_block("first question")])
        await agent.conn.prompt(session_id=parent, prompt=[text_block("second question")])

        forked = await agent.conn.fork_session(session_id=parent, cwd="/proj", mcp_servers=[])
        child = forked.session_id
        assert child != parent
        assert _current(forked.config_options) == "beta"
        await agent.client.wait_for(lambda: bool(agent.client.of(child, AvailableCommandsUpdate)))
        assert [u.title for u in agent.client.of(child, SessionInfoUpdate)] == [
            "Fork of first question"
        ]

        parent_surface = await surface(db, parent)
        child_surface = await surface(db, child)
        assert [(e.type, e.data) for e in child_surface] == [
            (e.type, e.data) for e in parent_surface
        ]
        child_log = await read_log(db, child)
        assert child_log[0].type == "session/fork"
        assert child_log[0].data == {"parent": {"id": parent, "seq": parent_surface[-1].seq}}
        assert profile_events(child_log) == [
            {"profile": "beta", "provider": "offline", "model": "echo-beta"}
        ]

        # The fork goes its own way; the parent is unchanged.
        await agent.conn.prompt(session_id=child, prompt=[text_block("only in the fork")])
        assert [(e.type, e.data) for e in await surface(db, parent)] == [
            (e.type, e.data) for e in parent_surface
        ]
        assert "Traceback" not in agent.stderr()

    assert replies(await read_log(db, child))[-1] == ("beta", "echo-beta")
    async with await open_store(db) as store:
        assert (await store.read_header(child)).cwd == "/proj"

    # Another connection loads the fork like any session, on its profile.
    async with open_agent(tmp_path, db) as agent:
        loaded = await agent.conn.load_session(cwd="/proj", session_id=child, mcp_servers=[])
        assert _current(loaded.config_options) == "beta"
        assert [kind for kind, _ in agent.client.transcript(child)] == ["user", "agent"] * 3


async def test_a_fork_of_a_session_on_the_default_follows_the_default(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path, default="alpha")
    async with open_agent(tmp_path, db) as agent:
        parent = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        await agent.conn.prompt(session_id=parent, prompt=[text_block("hello")])
        forked = await agent.conn.fork_session(session_id=parent, cwd="/p")
        assert _current(forked.config_options) == "alpha"
    assert profile_events(await read_log(db, forked.session_id)) == []


async def test_forking_an_unknown_or_empty_session_is_an_error(tmp_path: Path, db: Path) -> None:
    empty = await seed_session(db, cwd="/p")
    async with open_agent(tmp_path, db) as agent:
        with pytest.raises(RequestError) as caught:
            await agent.conn.fork_session(session_id="no-such\x1b[2J", cwd="/p")
        assert caught.value.code == -32602
        assert str(caught.value) == "unknown session no-such\\x1b[2J"
        with pytest.raises(RequestError) as caught:
            await agent.conn.fork_session(session_id=empty, cwd="/p")
        assert str(caught.value) == "nothing to fork: the session has no messages"
        assert isinstance(caught.value.data, dict)
        assert caught.value.data["details"] == str(caught.value)
        listed = await agent.conn.list_sessions()
    assert [s.session_id for s in listed.sessions] == [empty]  # nothing created


def test_session_fork_is_routed_over_plain_stdio(tmp_path: Path) -> None:
    """The SDK answers an unstable method "method not found" unless the connection enables
    the unstable protocol: a raw ``session/fork`` line reaches the agent."""
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/fork",
            "params": {"sessionId": "no-such", "cwd": "/p"},
        },
    ]
    done = subprocess.run(
        [*dsh_command(), "--db", str(tmp_path / "db.sqlite3"), "acp"],
        input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path / "config")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, done.stdout.decode().splitlines())}
    assert answers[0]["result"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
    assert answers[1]["error"]["code"] == -32602
    assert answers[1]["error"]["message"] == "unknown session no-such"

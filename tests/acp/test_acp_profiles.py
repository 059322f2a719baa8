"""``dsh acp`` and profiles (issue 32): the session's profile is the ``profile`` session
config option (a select of category ``model``) in session/new and session/load; setting it
records a ``session/profile`` event and the next reply answers with it; an unknown value or
option is an invalid-params error recording nothing; a profile without its key refuses a
prompt before anything is stored; a profile name written by hand into a log is data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp.schema import AgentMessageChunk, ConfigOptionUpdate, SessionConfigOptionSelect

from core.log import SESSION_PROFILE
from stores import open_store
from tests.acp.harness import open_agent
from tests.acp.profiles import (
    ABSENT_KEY,
    profile_events,
    replies,
    write_config,
)
from tests.acp.seed import converse, read_log, seed_session

pytestmark = pytest.mark.timeout(120)

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def the_option(options: object) -> SessionConfigOptionSelect:
    """The one config option dsh offers, checked to be the profile select."""
    assert isinstance(options, list) and len(options) == 1
    option = options[0]
    assert isinstance(option, SessionConfigOptionSelect)
    assert (option.id, option.type, option.category) == ("profile", "select", "model")
    return option


def values(option: SessionConfigOptionSelect) -> list[str]:
    return [choice.value for choice in option.options]  # type: ignore[union-attr]


async def test_the_profile_is_a_config_option_and_switching_it_changes_the_next_reply(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path, default="alpha")
    async with open_agent(tmp_path, db) as agent:
        new = await agent.conn.new_session(cwd="/p", mcp_servers=[])
        sid = new.session_id
        option = the_option(new.config_options)
        assert option.current_value == "alpha"
        assert values(option) == ["offline", "alpha", "beta", "cloud"]
        described = {c.value: c.description for c in option.options}  # type: ignore[union-attr]
        assert described["beta"] == "offline · echo-beta"

        await agent.conn.prompt(session_id=sid, prompt=[text_block("first")])
        switched = await agent.conn.set_config_option(
            config_id="profile", session_id=sid, value="beta"
        )
        assert the_option(switched.config_options).current_value == "beta"
        await agent.conn.prompt(session_id=sid, prompt=[text_block("second")])

        # Choosing the profile the session already has records nothing more.
        again = await agent.conn.set_config_option(
            config_id="profile", session_id=sid, value="beta"
        )
        assert the_option(again.config_options).current_value == "beta"

    events = await read_log(db, sid)
    # A new session follows the default (nothing recorded); the switch is recorded once.
    assert profile_events(events) == [
        {"profile": "beta", "provider": "offline", "model": "echo-beta"}
    ]
    assert replies(events) == [("alpha", "echo-alpha"), ("beta", "echo-beta")]

    # Another connection loads the session on its recorded profile.
    async with open_agent(tmp_path, db) as agent:
        loaded = await agent.conn.load_session(cwd="/p", session_id=sid, mcp_servers=[])
        assert the_option(loaded.config_options).current_value == "beta"
        await agent.conn.prompt(session_id=sid, prompt=[text_block("third")])
    assert replies(await read_log(db, sid))[-1] == ("beta", "echo-beta")


async def test_an_unknown_value_or_option_is_an_error_and_records_nothing(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path)
    hostile = "\x1b]0;pwned\x07[red]bold[/red]\ud800" + "x" * 100_000
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(config_id="profile", session_id=sid, value="nope")
        assert caught.value.code == -32602
        assert str(caught.value) == (
            "unknown profile 'nope': choose one of offline, alpha, beta, cloud"
        )
        assert isinstance(caught.value.data, dict)
        assert caught.value.data["details"] == str(caught.value)
        assert caught.value.data["choices"] == ["offline", "alpha", "beta", "cloud"]

        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(config_id="profile", session_id=sid, value=hostile)
        message = str(caught.value)
        assert message.startswith("unknown profile '\\x1b]0;pwned\\x07[red]bold[/red]\ufffdxx")
        assert not UNSAFE.search(message) and len(message) < 300

        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(config_id="profile", session_id=sid, value=True)
        assert "takes a profile name" in str(caught.value)

        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(config_id="model", session_id=sid, value="beta")
        assert str(caught.value) == "unknown config option 'model': dsh has one, 'profile'"

        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(
                config_id="profile", session_id="no-such", value="beta"
            )
        assert str(caught.value) == "unknown session no-such"

        # Still on the default, and usable.
        await agent.conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert "Traceback" not in agent.stderr()
    events = await read_log(db, sid)
    assert profile_events(events) == []
    assert replies(events) == [("alpha", "echo-alpha")]


async def test_a_profile_without_its_key_refuses_the_prompt_before_storing(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path, default="cloud")
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError) as caught:
            await agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert caught.value.code == -32602
        assert str(caught.value) == (
            f"profile 'cloud': no API key: set {ABSENT_KEY} (or choose another profile)"
            " — nothing was sent"
        )
        assert isinstance(caught.value.data, dict)
        assert caught.value.data["profile"] == "cloud"
        assert caught.value.data["details"] == str(caught.value)
        assert agent.client.of(sid, AgentMessageChunk) == []
        assert await read_log(db, sid) == []  # nothing stored

        # The slash command needs no model: it still answers.
        await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions")])

        # Choosing a profile with a key (here: none needed) makes the session usable.
        await agent.conn.set_config_option(config_id="profile", session_id=sid, value="beta")
        await agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])

        # Switching to the keyless profile is allowed; its prompt is refused again.
        await agent.conn.set_config_option(config_id="profile", session_id=sid, value="cloud")
        before = await read_log(db, sid)
        with pytest.raises(RequestError, match="no API key"):
            await agent.conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert await read_log(db, sid) == before
    assert replies(await read_log(db, sid)) == [("beta", "echo-beta")]


async def test_the_top_level_settings_without_their_key_refuse_the_prompt(
    tmp_path: Path, db: Path
) -> None:
    """The single-model settings of earlier versions are the profile ``default``."""
    env = {"DSH_PROVIDER": "openai", "DSH_API_KEY_ENV": ABSENT_KEY}
    async with open_agent(tmp_path, db, env=env) as agent:
        new = await agent.conn.new_session(cwd="/p", mcp_servers=[])
        assert the_option(new.config_options).current_value == "default"
        with pytest.raises(RequestError) as caught:
            await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
        assert str(caught.value).startswith("profile 'default': no API key: set ")
        assert str(caught.value).endswith(" — nothing was sent")
    assert await read_log(db, new.session_id) == []


async def test_a_profile_whose_prompt_file_cannot_be_read_is_refused_and_not_recorded(
    tmp_path: Path, db: Path
) -> None:
    extra = f"""
[profiles.broken]
provider = "offline"
system_prompt_file = "{tmp_path / "missing.md"}"
"""
    write_config(tmp_path, extra=extra)
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError) as caught:
            await agent.conn.set_config_option(config_id="profile", session_id=sid, value="broken")
        assert str(caught.value).startswith("profile 'broken': system_prompt_file")
        assert "No such file" in str(caught.value)
        await agent.conn.prompt(session_id=sid, prompt=[text_block("still alpha")])
        assert "Traceback" not in agent.stderr()
    events = await read_log(db, sid)
    assert profile_events(events) == [] and replies(events) == [("alpha", "echo-alpha")]


async def test_a_switch_made_elsewhere_is_followed_and_the_client_told(
    tmp_path: Path, db: Path
) -> None:
    write_config(tmp_path)
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        await agent.conn.prompt(session_id=sid, prompt=[text_block("one")])
        async with await open_store(db) as store:  # `dsh send --profile beta` elsewhere
            await store.append(
                sid, SESSION_PROFILE, {"profile": "beta", "provider": "offline", "model": "x"}
            )
        await agent.conn.prompt(session_id=sid, prompt=[text_block("two")])
        updates = agent.client.of(sid, ConfigOptionUpdate)
        assert [the_option(u.config_options).current_value for u in updates] == ["beta"]
        await agent.conn.prompt(session_id=sid, prompt=[text_block("three")])
        assert len(agent.client.of(sid, ConfigOptionUpdate)) == 1  # told once
    assert replies(await read_log(db, sid)) == [
        ("alpha", "echo-alpha"),
        ("beta", "echo-beta"),
        ("beta", "echo-beta"),
    ]


@pytest.mark.parametrize(
    "recorded",
    [
        "\x1b]0;pwned\x07\x1b[2J<script>[bold red]x[/]\u202e\ud800\n",
        "alpha\x00",
        "a" * 8_000,  # long, yet within the 8 KiB a profile event may hold
        42,
        {"nested": ["alpha"]},
        None,
    ],
)
async def test_a_hostile_profile_name_in_the_log_is_shown_as_data(
    tmp_path: Path, db: Path, recorded: object
) -> None:
    """A ``session/profile`` event written by hand (any JSON, any string) breaks neither
    the load, the listing nor a prompt: the session answers with the default profile and
    the option's description says why, escaped and bounded."""
    write_config(tmp_path)
    sid = await seed_session(db, cwd="/p", title="hostile")
    await converse(db, sid, ["before"])
    async with await open_store(db) as store:
        await store.append(sid, SESSION_PROFILE, {"profile": recorded, "model": "\x1b[31m"})
    async with open_agent(tmp_path, db) as agent:
        loaded = await agent.conn.load_session(cwd="/p", session_id=sid, mcp_servers=[])
        option = the_option(loaded.config_options)
        assert option.current_value == "alpha"
        assert values(option) == ["offline", "alpha", "beta", "cloud"]
        description = option.description or ""
        assert not UNSAFE.search(description) and len(description) <= 200
        if isinstance(recorded, str):
            assert description.startswith("profile '")
            if len(recorded) < 100:
                assert description.endswith("is not configured any more; using 'alpha'")
        else:  # not a name at all: the session follows the default, nothing to say
            assert "not configured" not in description

        listed = await agent.conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == [sid]
        await agent.conn.prompt(session_id=sid, prompt=[text_block("after")])
        assert "Traceback" not in agent.stderr()
    assert replies(await read_log(db, sid))[-1] == ("alpha", "echo-alpha")

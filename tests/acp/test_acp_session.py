"""``dsh acp`` end to end: new, prompt with references, streaming, cancel, load/replay.

Each test spawns the real agent process and talks to it with the ``agent-client-protocol``
package's client side; the stored log is checked by opening the same SQLite file.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from acp import RequestError, resource_link_block, text_block
from acp.schema import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ImageContentBlock,
    ResourceContentBlock,
    SessionInfoUpdate,
    TextContentBlock,
    UserMessageChunk,
)

from core.log import message_text
from core.references import encode_session_reference_uri
from core.references.labels import mention_label
from stores import open_store
from tests.acp.harness import open_agent
from tests.acp.seed import converse, kinds, read_log, seed_session

pytestmark = pytest.mark.timeout(120)

# C0 controls but newline and tab, DEL, C1 controls: never in text sent to a client.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_details(err: RequestError) -> None:
    """The error's human message is in ``data.details`` too, with no control character."""
    assert isinstance(err.data, dict) and err.data["details"] == str(err)
    assert not UNSAFE.search(str(err))


async def test_new_then_prompt_with_a_resource_link_stores_snapshot_then_message(
    tmp_path: Path, db: Path
) -> None:
    source = await seed_session(db, cwd="/proj")
    await converse(db, source, ["how do we cache the index?"])

    async with open_agent(tmp_path, db) as agent:
        caps = agent.init.agent_capabilities
        assert caps is not None and caps.load_session is True
        assert caps.session_capabilities is not None and caps.session_capabilities.list is not None
        prompt_caps = caps.prompt_capabilities
        assert prompt_caps is not None and not prompt_caps.image and not prompt_caps.audio

        new = await agent.conn.new_session(cwd="/proj/sub", mcp_servers=[])
        sid = new.session_id
        uri = encode_session_reference_uri(source)
        response = await agent.conn.prompt(
            session_id=sid,
            prompt=[
                text_block("what did we decide in "),
                resource_link_block("cache notes", uri),
                text_block("?"),
            ],
        )
        assert response.stop_reason == "end_turn"
        await agent.client.wait_for(lambda: bool(agent.client.titles(sid)))

        reply = agent.client.agent_text(sid)
        assert "Request: what did we decide in @cache notes?" in reply
        assert "- cache notes: 2 messages received" in reply
        assert len(agent.client.of(sid, AgentMessageChunk)) > 3, "the reply streams in chunks"
        assert agent.client.titles(sid) == ["what did we decide in @cache notes?"]
        assert agent.client.commands(sid) == [["sessions"]]
        assert "Traceback" not in agent.stderr()

    events = await read_log(db, sid)
    assert kinds(events)[:2] == [("user/message", "session-reference"), ("user/message", "user")]
    snapshot, message = events[0].data, events[1].data
    assert [r["sessionId"] for r in snapshot["source"]["references"]] == [source]
    assert snapshot["source"]["references"][0]["label"] == "cache notes"
    assert message_text(message) == "what did we decide in @cache notes?"
    assert [e.type for e in events[2:]][-3:] == ["assistant/message", "turn/end", "session/title"]
    assistant = next(e for e in events if e.type == "assistant/message")
    assert message_text(assistant.data["message"]) == reply
    async with await open_store(db) as store:
        assert (await store.read_header(sid)).cwd == "/proj/sub"


async def test_markdown_mentions_and_bare_uris_in_text_blocks_are_references(
    tmp_path: Path, db: Path
) -> None:
    first = await seed_session(db, cwd="/p", title="alpha")
    second = await seed_session(db, cwd="/p", title="beta")
    await converse(db, first, ["alpha question"])
    await converse(db, second, ["beta question"])
    mention = f"@[Alpha \\] notes]({encode_session_reference_uri(first)})"
    bare = encode_session_reference_uri(second)
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        response = await agent.conn.prompt(
            session_id=sid, prompt=[text_block(f"compare {mention} with {bare}")]
        )
        assert response.stop_reason == "end_turn"
    events = await read_log(db, sid)
    refs = events[0].data["source"]["references"]
    assert [(r["sessionId"], r["label"]) for r in refs] == [
        (first, "Alpha ] notes"),
        (second, second),
    ]
    assert message_text(events[1].data) == f"compare @Alpha ] notes with @{second}"


@pytest.mark.parametrize(
    ("blocks", "code"),
    [
        ("malformed-link", "SESSION_REFERENCE_INVALID_REFERENCE"),
        ("malformed-mention", "SESSION_REFERENCE_INVALID_REFERENCE"),
        ("self", "SESSION_REFERENCE_SELF_REFERENCE"),
        ("unknown", "SESSION_REFERENCE_READ_FAILED"),
        ("too-many", "SESSION_REFERENCE_TOO_MANY"),
    ],
)
async def test_a_failed_preparation_is_an_error_response_and_stores_nothing(
    tmp_path: Path, db: Path, blocks: str, code: str
) -> None:
    others = [await seed_session(db, cwd="/p", title=f"s{i}") for i in range(4)]
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        links: dict[str, list[TextContentBlock | ResourceContentBlock]] = {
            "malformed-link": [resource_link_block("broken", "dsh-session:!!not-base64")],
            "malformed-mention": [text_block("see @[x](dsh-session:AAAA=) now")],
            "self": [resource_link_block("me", encode_session_reference_uri(sid))],
            "unknown": [resource_link_block("gone", encode_session_reference_uri("no-such"))],
            "too-many": [
                resource_link_block(f"s{i}", encode_session_reference_uri(o))
                for i, o in enumerate(others)
            ],
        }
        link = links[blocks]
        with pytest.raises(RequestError) as caught:
            await agent.conn.prompt(session_id=sid, prompt=[text_block("look at "), *link])
        assert isinstance(caught.value.data, dict) and caught.value.data["code"] == code
        assert code in str(caught.value) and "nothing was sent" in str(caught.value)
        # Toad shows only data.details: it carries the same human message.
        assert caught.value.data["details"] == str(caught.value)
        if code == "SESSION_REFERENCE_SELF_REFERENCE":
            assert "cannot reference its own session" in caught.value.data["details"]
        assert agent.client.of(sid, AgentMessageChunk) == []

        # The session is usable afterwards, and only that later prompt is stored.
        after = await agent.conn.prompt(session_id=sid, prompt=[text_block("plain question")])
        assert after.stop_reason == "end_turn"
    events = await read_log(db, sid)
    assert kinds(events)[0] == ("user/message", "user")
    assert message_text(events[0].data) == "plain question"


async def test_unsupported_blocks_and_empty_prompts_are_rejected(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError, match="text and resource links only") as caught:
            await agent.conn.prompt(
                session_id=sid,
                prompt=[ImageContentBlock(type="image", data="AAAA", mime_type="image/png")],
            )
        assert_details(caught.value)
        with pytest.raises(RequestError, match="empty") as caught:
            await agent.conn.prompt(session_id=sid, prompt=[text_block("   ")])
        assert_details(caught.value)
        with pytest.raises(RequestError, match="unknown session") as caught:
            await agent.conn.prompt(session_id="nope\x1b]0;x\x07", prompt=[text_block("hi")])
        assert_details(caught.value)
        with pytest.raises(RequestError, match="unknown session") as caught:
            await agent.conn.load_session(cwd="/p", session_id="nope", mcp_servers=[])
        assert_details(caught.value)
    assert await read_log(db, sid) == []


async def test_cancel_mid_reply_keeps_what_was_received(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db, env={"DSH_OFFLINE_DELAY": "0.05"}) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        turn = asyncio.create_task(
            agent.conn.prompt(session_id=sid, prompt=[text_block("tell me a long story")])
        )
        await agent.client.wait_for(lambda: len(agent.client.of(sid, AgentMessageChunk)) >= 3)
        await agent.conn.cancel(session_id=sid)
        response = await asyncio.wait_for(turn, 30)
        assert response.stop_reason == "cancelled"
        received = agent.client.agent_text(sid)

        # Not busy any more: the next prompt runs (and sees the interrupted reply).
        again = await agent.conn.prompt(session_id=sid, prompt=[text_block("go on")])
        assert again.stop_reason == "end_turn"

    events = await read_log(db, sid)
    assistants = [e for e in events if e.type == "assistant/message"]
    first = assistants[0].data
    assert first["finish"] == "interrupted" and first["interrupted"] is True
    stored = message_text(first["message"])
    assert stored and received.startswith(stored)
    assert "Offline model" in stored and "Earlier messages" not in stored
    assert [e.data["status"] for e in events if e.type == "turn/end"] == [
        "interrupted",
        "completed",
    ]


async def test_load_replays_messages_replies_and_one_reference_card(
    tmp_path: Path, db: Path
) -> None:
    source = await seed_session(db, cwd="/p", title="design notes")
    await converse(
        db, source, ["x" * 400 + " first long question", "second question", "third question"]
    )
    env = {"DSH_MAX_REFERENCE_BYTES": "900"}  # small budget: the card reports omissions
    async with open_agent(tmp_path, db, env=env) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        uri = encode_session_reference_uri(source)
        await agent.conn.prompt(session_id=sid, prompt=[text_block("hello there")])
        await agent.conn.prompt(
            session_id=sid,
            prompt=[text_block("summarise"), resource_link_block("design notes", uri)],
        )
        live = agent.client.agent_text(sid)

    async with open_agent(tmp_path, db) as agent:
        await agent.conn.load_session(cwd="/p", session_id=sid, mcp_servers=[])
        transcript = agent.client.transcript(sid)
        assert [kind for kind, _ in transcript] == ["user", "agent", "user", "user", "agent"]
        assert transcript[0] == ("user", "hello there")
        card = transcript[2][1]
        assert card.startswith("Referenced sessions · design notes — ")
        assert "messages kept" in card and "omitted" in card and "truncated" in card
        assert "<referenced-sessions>" not in card and "{" not in card and "untrusted" not in card
        assert transcript[3] == ("user", "summarise @design notes")
        assert transcript[1][1] + transcript[4][1] == live

        # Every replayed chunk names its message; the card and the request are two messages.
        user_ids = [u.message_id for u in agent.client.of(sid, UserMessageChunk)]
        assert all(user_ids) and len(set(user_ids)) == 3
        # After the replay: the title, then the commands.
        tail = [type(u) for _, u in agent.client.updates][-2:]
        assert tail == [SessionInfoUpdate, AvailableCommandsUpdate]
        assert agent.client.titles(sid) == ["hello there"]

        # The loaded session continues where it was.
        follow = await agent.conn.prompt(session_id=sid, prompt=[text_block("and then?")])
        assert follow.stop_reason == "end_turn"
        assert "Earlier messages in this conversation: 5." in agent.client.agent_text(sid)


async def test_replay_marks_an_interrupted_reply(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db, env={"DSH_OFFLINE_DELAY": "0.05"}) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        turn = asyncio.create_task(
            agent.conn.prompt(session_id=sid, prompt=[text_block("a long answer please")])
        )
        await agent.client.wait_for(lambda: len(agent.client.of(sid, AgentMessageChunk)) >= 2)
        await agent.conn.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"
        await agent.conn.load_session(cwd="/p", session_id=sid, mcp_servers=[])
        replayed = agent.client.transcript(sid)[-1]
        assert replayed[0] == "agent"
        assert replayed[1].endswith("[interrupted: the reply was stopped]")


async def test_a_model_failure_is_an_error_response_and_the_message_is_kept(
    tmp_path: Path, db: Path
) -> None:
    # A key, and nothing listening: the provider fails at once. (Without a key the prompt is
    # refused before anything is stored: tests/acp/test_acp_profiles.py.)
    env = {
        "DSH_PROVIDER": "openai",
        "DSH_BASE_URL": "http://127.0.0.1:9",
        "DEEPSEEK_API_KEY": "sk-test",
    }
    async with open_agent(tmp_path, db, env=env) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError, match="the model failed") as caught:
            await agent.conn.prompt(session_id=sid, prompt=[text_block("hello?")])
        assert "your message is saved" in str(caught.value)
        assert_details(caught.value)
    events = await read_log(db, sid)
    assert kinds(events)[0] == ("user/message", "user")
    assert events[-1].type == "turn/end" and events[-1].data["status"] == "error"


async def test_a_relative_cwd_is_invalid_params(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db) as agent:
        for cwd in ["relative/dir", "", "~/x"]:
            with pytest.raises(RequestError) as caught:
                await agent.conn.new_session(cwd=cwd, mcp_servers=[])
            assert caught.value.code == -32602 and "absolute" in str(caught.value)
            assert_details(caught.value)
    async with await __import__("stores").SqliteSessionStore.open(db) as store:
        assert await store.list_headers() == [], "no session was created"


async def test_a_prompt_in_a_busy_session_is_an_application_error(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db, env={"DSH_OFFLINE_DELAY": "0.05"}) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        turn = asyncio.create_task(
            agent.conn.prompt(session_id=sid, prompt=[text_block("a long one")])
        )
        await agent.client.wait_for(lambda: bool(agent.client.of(sid, AgentMessageChunk)))
        for attempt in (
            agent.conn.prompt(session_id=sid, prompt=[text_block("another")]),
            agent.conn.load_session(cwd="/p", session_id=sid, mcp_servers=[]),
        ):
            with pytest.raises(RequestError) as caught:
                await attempt
            # The request is well formed: not -32600, an application error with a message.
            assert -32099 <= caught.value.code <= -32000, caught.value.code
            assert "running" in str(caught.value)
            assert_details(caught.value)
        await agent.conn.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"


async def test_text_sent_to_the_client_has_control_characters_escaped(
    tmp_path: Path, db: Path
) -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J"
    source = await seed_session(db, cwd="/p", title=f"src {hostile} title")
    await converse(db, source, [f"first\tline\nsecond {hostile}\r\x9b end"])
    async with open_agent(tmp_path, db) as agent:
        # Replayed: the user's message and the reply that echoes it, then the title.
        await agent.conn.load_session(cwd="/p", session_id=source, mcp_servers=[])
        replayed = agent.client.transcript(source)
        assert replayed[0] == (
            "user",
            "first\tline\nsecond \\x1b]0;pwned\\x07\\x1b[2J\\r\\x9b end",
        )
        assert "second \\x1b]0;pwned" in replayed[1][1]
        assert agent.client.titles(source) == ["src \\x1b]0;pwned\\x07\\x1b[2J title"]

        # Live: the streamed reply echoes the request; /sessions lists the hostile title.
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        await agent.conn.prompt(session_id=sid, prompt=[text_block(f"look {hostile}!")])
        assert "Request: look \\x1b]0;pwned\\x07\\x1b[2J!" in agent.client.agent_text(sid)
        await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions")])
        # The listing shows the one safe mention label (controls removed, SPEC-safe).
        assert mention_label(f"src {hostile} title") in agent.client.agent_text(sid)

        texts: list[str] = []
        for _, update in agent.client.updates:
            content = getattr(update, "content", None)
            if isinstance(content, TextContentBlock):
                texts.append(content.text)
            if isinstance(update, SessionInfoUpdate) and update.title:
                texts.append(update.title)
        assert texts and not [t for t in texts if UNSAFE.search(t)]
        listed = (await agent.conn.list_sessions()).sessions
        assert not [s.title for s in listed if s.title and UNSAFE.search(s.title)]

"""ACP: a prompt whose reply lease another process takes mid-reply (``dsh unlock``, then a
send elsewhere) ends with an application error (-32001) carrying the words in
``data.details``; the user's message stays, no final message is stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError, text_block

from stores import SqliteSessionStore
from tests.acp.harness import open_agent
from tests.acp.seed import read_log
from tests.core.test_engine_lease_lost import take_over

pytestmark = pytest.mark.timeout(60)


async def test_a_prompt_whose_lease_is_taken_ends_with_an_error(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db, env={"DSH_OFFLINE_DELAY": "1"}) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        prompt = asyncio.create_task(
            agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])
        )
        await agent.client.wait_for(lambda: agent.client.agent_text(sid) != "")
        async with await SqliteSessionStore.open(db) as elsewhere:
            await take_over(elsewhere, sid, "another process")  # `dsh unlock`, then a send
            with pytest.raises(RequestError) as caught:
                await asyncio.wait_for(prompt, 20)  # within a renewal (5 s), not 17 s
            lease = await elsewhere.read_reply_lease(sid)
            assert lease is not None and lease.holder == "another process"
        assert caught.value.code == -32001
        message = str(caught.value)
        assert message.startswith("another process took this session's reply lease")
        assert message.endswith(
            "the reply stopped; your message is saved, the partial reply is not"
        )
        assert isinstance(caught.value.data, dict)
        assert caught.value.data["details"] == message
        assert caught.value.data["sessionId"] == sid
        assert "Earlier messages" not in agent.client.agent_text(sid)  # cut short
    types = [e.type for e in await read_log(db, sid)]
    assert types[0] == "user/message" and "assistant/chunk" in types
    assert "assistant/message" not in types and "turn/end" not in types

"""ACP: a prompt on a session whose reply lease another process holds is refused with an
application error (-32001) and stores nothing; once the lease is given back it goes through."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from stores import SqliteSessionStore
from tests.acp.harness import open_agent
from tests.acp.seed import read_log

pytestmark = pytest.mark.timeout(60)


async def test_a_prompt_on_a_session_busy_elsewhere_is_refused(tmp_path: Path, db: Path) -> None:
    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        async with await SqliteSessionStore.open(db) as elsewhere:
            assert await elsewhere.take_reply_lease(sid, "another process", ttl_ms=60_000)
            with pytest.raises(RequestError) as caught:
                await agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])
            assert caught.value.code == -32001
            assert (
                "the session is busy: another process is writing a reply or compacting it"
                in str(caught.value)
            )
            # Not a process known to run on this machine: it may be gone.
            assert f"`dsh unlock {sid}` frees it" in str(caught.value)
            assert await read_log(db, sid) == []
            await elsewhere.release_reply_lease(sid, "another process")
        response = await agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert response.stop_reason == "end_turn"
    types = [e.type for e in await read_log(db, sid)]
    assert types[0] == "user/message" and "assistant/message" in types

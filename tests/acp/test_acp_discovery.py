"""Discovery over ACP: ``session/list`` (titles, cwd filter, cursor pages) and ``/sessions``."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from core.config import DshConfig
from core.references import encode_session_reference_uri
from stores import open_store
from tests.acp.harness import open_agent
from tests.acp.seed import converse, read_log, seed_session
from tui.shared.runtime import open_runtime

pytestmark = pytest.mark.timeout(120)

BASE = 1_700_000_000_000


async def test_session_list_has_titles_and_cwd_filters_and_pages(tmp_path: Path, db: Path) -> None:
    # 55 sessions in /work (5 sharing one created_at, to page across a tie), 3 elsewhere.
    work = [
        await seed_session(
            db, cwd="/work", title=f"work {i}", created_at=BASE + (i if i >= 5 else 0)
        )
        for i in range(55)
    ]
    other = [await seed_session(db, cwd="/else", created_at=BASE + 100 + i) for i in range(2)]
    loose = await seed_session(db, title="no cwd", created_at=BASE - 1)

    async with open_agent(tmp_path, db) as agent:
        first = await agent.conn.list_sessions()
        assert len(first.sessions) == 50 and first.next_cursor
        second = await agent.conn.list_sessions(cursor=first.next_cursor)
        assert second.next_cursor is None
        everything = first.sessions + second.sessions
        # Most recently active first: the untitled sessions' only activity is their
        # creation, long before the titles were written.
        assert [s.session_id for s in everything][-2:] == [other[1], other[0]]
        stamps = [s.updated_at for s in everything]
        assert all(stamps) and stamps == sorted(stamps, reverse=True)  # type: ignore[type-var]
        assert {s.session_id for s in everything} == {*work, *other, loose}
        assert len(everything) == 58, "no session twice, none lost"
        by_id = {s.session_id: s for s in everything}
        assert by_id[work[7]].title == "work 7" and by_id[work[7]].cwd == "/work"
        assert by_id[other[0]].title is None
        assert by_id[loose].cwd == "/" and by_id[loose].field_meta == {
            "dsh": {"createdAt": BASE - 1, "hasCwd": False}
        }

        filtered = await agent.conn.list_sessions(cwd="/work/")
        assert len(filtered.sessions) == 50
        rest = await agent.conn.list_sessions(cwd="/work", cursor=filtered.next_cursor)
        assert {s.session_id for s in filtered.sessions + rest.sessions} == set(work)
        assert all(s.cwd == "/work" for s in filtered.sessions + rest.sessions)

        assert (await agent.conn.list_sessions(cwd="/nowhere")).sessions == []
        with pytest.raises(RequestError, match="invalid cursor"):
            await agent.conn.list_sessions(cursor="bogus!")

        # A session made over ACP is listed with its cwd, and its title once it has one.
        sid = (await agent.conn.new_session(cwd="/acp", mcp_servers=[])).session_id
        await agent.conn.prompt(session_id=sid, prompt=[text_block("name me please")])
        mine = (await agent.conn.list_sessions(cwd="/acp")).sessions
        assert [(s.session_id, s.cwd, s.title) for s in mine] == [(sid, "/acp", "name me please")]


async def test_sessions_command_lists_candidates_with_mentions_self_excluded(
    tmp_path: Path, db: Path
) -> None:
    same = await seed_session(db, cwd="/proj", title="Cache design", created_at=BASE + 1)
    none = await seed_session(db, title="cache (no cwd)", created_at=BASE + 2)
    far = await seed_session(db, cwd="/elsewhere", title="old cache elsewhere", created_at=BASE + 3)
    unrelated = await seed_session(db, cwd="/proj", title="billing", created_at=BASE + 4)

    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/proj", mcp_servers=[])).session_id
        await agent.client.wait_for(lambda: agent.client.commands(sid) == [["sessions"]])

        response = await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions cache")])
        assert response.stop_reason == "end_turn"
        answer = agent.client.agent_text(sid)

        # Same ranking as the TUI picker: the service's candidates, in order.
        async with open_runtime(DshConfig(database=db)) as runtime:
            target = await runtime.store.read_header(sid)
            expected = await runtime.service.list_candidates(target, "cache")
            everyone = await runtime.service.list_candidates(target)
        assert [c.session_id for c in expected] == [same, none, far]
        positions = [answer.index(c.mention) for c in expected]
        assert positions == sorted(positions)
        assert unrelated not in answer and encode_session_reference_uri(sid) not in answer
        assert "1. Cache design — /proj" in answer and "no cwd" in answer

        agent.client.updates.clear()
        await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions")])
        listing = agent.client.agent_text(sid)
        assert [c.session_id for c in everyone] == [unrelated, same, none, far]
        assert all(c.mention in listing for c in everyone)
        assert encode_session_reference_uri(sid) not in listing

        agent.client.updates.clear()
        await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions zzz")])
        assert "No other session matches" in agent.client.agent_text(sid)

    assert await read_log(db, sid) == [], "commands are answered, not stored"


async def test_sessions_command_lists_body_matches_after_the_candidates(
    tmp_path: Path, db: Path
) -> None:
    titled = await seed_session(db, cwd="/proj", title="Eviction notes", created_at=BASE + 1)
    said = await seed_session(db, cwd="/proj", created_at=BASE + 2)
    await converse(db, said, ["we chose *LRU* eviction for the [cache]"])
    async with await open_store(db) as store:
        await store.append(said, "session/title", {"title": "Gamma", "source": {"kind": "user"}})

    async with open_agent(tmp_path, db) as agent:
        sid = (await agent.conn.new_session(cwd="/proj", mcp_servers=[])).session_id
        await agent.client.wait_for(lambda: agent.client.commands(sid) == [["sessions"]])
        await agent.conn.prompt(session_id=sid, prompt=[text_block("/sessions eviction")])
        answer = agent.client.agent_text(sid)
    lines = answer.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("1. Eviction notes"))
    second = next(i for i, line in enumerate(lines) if line.startswith("2. Gamma"))
    assert first < second
    assert f"{encode_session_reference_uri(titled)}" in lines[first + 1]
    assert f"{encode_session_reference_uri(said)}" in lines[second + 1]
    # The matching message, one line, Markdown escaped, the match in bold.
    assert lines[second + 2] == ("   > #0: we chose \\*LRU\\* **eviction** for the \\[cache\\]")
    assert all(not line.startswith("   > ") for line in lines[: second + 1])

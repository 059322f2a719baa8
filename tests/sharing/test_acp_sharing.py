"""Issue 17 over ACP: the real ``dsh acp`` as bob on the team PostgreSQL. ``session/list``
and ``/sessions`` show only what bob may read; alice's private session fails like one that
does not exist (load, prompt, a resource link to it); her shared one loads and is
read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, resource_link_block, text_block

from core.references import encode_session_reference_uri
from tests.acp.harness import open_agent
from tests.pgcluster import ALICE
from tests.sharing.team import Team, team
from tests.sharing.test_cli_sharing import event_counts

__all__ = ["team"]

pytestmark = pytest.mark.timeout(120)


async def test_acp_as_bob(tmp_path: Path, team: Team) -> None:
    async with open_agent(tmp_path, team.bob_url) as agent:  # type: ignore[arg-type]
        conn = agent.conn
        listed = (await conn.list_sessions()).sessions
        assert {s.session_id for s in listed} == {team.shared, team.bobs}
        assert all("secret" not in (s.title or "") for s in listed)

        async def refused(call: object) -> str:
            with pytest.raises(RequestError) as info:
                await call  # type: ignore[misc]
            return str(info.value)

        for sid in (team.private, "never-was"):
            assert await refused(conn.load_session(cwd="/", session_id=sid, mcp_servers=[])) == (
                f"unknown session {sid}"
            )
        private_prompt = await refused(
            conn.prompt(session_id=team.private, prompt=[text_block("hi")])
        )
        missing_prompt = await refused(
            conn.prompt(session_id="never-was", prompt=[text_block("hi")])
        )
        assert private_prompt == missing_prompt.replace("never-was", team.private)

        before = event_counts(team)
        await conn.load_session(cwd="/", session_id=team.shared, mcp_servers=[])
        assert f"reply in {team.shared}" in agent.client.agent_text(team.shared)
        denied = await refused(conn.prompt(session_id=team.shared, prompt=[text_block("mine?")]))
        assert f"read-only: it is owned by {ALICE}" in denied
        assert event_counts(team) == before

        # /sessions from bob's own session: the shared one, never the private one.
        await conn.load_session(cwd="/", session_id=team.bobs, mcp_servers=[])
        await conn.prompt(session_id=team.bobs, prompt=[text_block("/sessions")])
        text = agent.client.agent_text(team.bobs)
        assert "Alice shared notes" in text and "secret" not in text
        # A resource link to the private session fails as one to a deleted session does.
        links = {}
        for sid in (team.private, "deleted-long-ago"):
            link = resource_link_block(name="that one", uri=encode_session_reference_uri(sid))
            links[sid] = await refused(
                conn.prompt(session_id=team.bobs, prompt=[text_block("see"), link])
            )
        assert links[team.private] == links["deleted-long-ago"].replace(
            "deleted-long-ago", team.private
        )
        assert event_counts(team) == before

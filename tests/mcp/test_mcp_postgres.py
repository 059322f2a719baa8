"""``dsh mcp`` as bob on the team PostgreSQL (issue 17's row security, unchanged): alice's
private session is "not found" exactly as a session that never existed, by every way of
asking (id, prefix, title, resource, search), while her shared one reads like his own."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from core.references import encode_session_reference_uri
from tests.mcp.harness import cli_error, dsh_cli, json_text, open_mcp, text_of
from tests.pgcluster import ALICE, BOB
from tests.sharing.team import Team, team

__all__ = ["team"]

pytestmark = pytest.mark.timeout(180)


async def test_mcp_as_bob_reads_what_row_security_lets_him(tmp_path: Path, team: Team) -> None:
    async with open_mcp(tmp_path, team.bob_url) as mcp:
        rows = json_text(await mcp.ok("list_sessions", {}))
        assert {r["id"] for r in rows} == {team.shared, team.bobs}
        owners = {r["id"]: r["owner"] for r in rows}
        assert owners == {team.shared: ALICE, team.bobs: BOB}
        assert json_text(await mcp.ok("list_sessions", {"query": "secret"})) == []

        async def not_found(name: str) -> str:
            return await mcp.error("read_session", {"session_id": name})

        private, missing = await not_found(team.private), await not_found("never-was")
        assert private == missing.replace("never-was", team.private)
        assert private == f"no session matches '{team.private}' (by id, title or id prefix)"
        assert private == cli_error(dsh_cli(tmp_path, team.bob_url, "show", team.private))
        assert "no session matches" in await not_found("alice-pr")  # a prefix of it
        assert "no session matches" in await not_found("Alice secret plans")  # its title
        with pytest.raises(MCPError) as info:
            await mcp.session.read_resource(encode_session_reference_uri(team.private))
        with pytest.raises(MCPError) as other:
            await mcp.session.read_resource(encode_session_reference_uri("never-was"))
        assert str(info.value) == str(other.value).replace("never-was", team.private)

        shared = await mcp.ok("read_session", {"session_id": team.shared})
        text = text_of(shared)
        assert f"reply in {team.shared}" in text and f"hello from {team.shared}" in text
        assert "Alice shared notes" in text
        own = await mcp.ok("read_session", {"session_id": "bob"})  # a prefix of his own
        assert f"reply in {team.bobs}" in text_of(own)

        hits = json_text(await mcp.ok("search_sessions", {"query": "hello from"}))
        assert {h["session_id"] for h in hits} == {team.shared, team.bobs}
        assert json_text(await mcp.ok("search_sessions", {"query": "alice-private"})) == []
    async with open_mcp(tmp_path, team.alice_url) as mcp:  # the owner reads all of hers
        rows = json_text(await mcp.ok("list_sessions", {}))
        assert {r["id"] for r in rows} == {team.private, team.shared}
        mine = await mcp.ok("read_session", {"session_id": team.private})
        assert f"reply in {team.private}" in text_of(mine)

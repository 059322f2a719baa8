"""Conversation control on the team store (issue 32): a member forks a session shared with
them into one of their own, but cannot retry, edit, switch the profile of, or fork what
they may not read; row security decides, unchanged."""

from __future__ import annotations

import pytest

from core.config import DshConfig
from core.control import fork_session
from core.engine import ReplyFinished
from core.errors import DshError, SessionNotFoundError
from stores import open_store
from tests.sharing.team import Team, team  # noqa: F401  (the fixture)
from tui.shared.runtime import open_runtime


async def test_a_member_forks_a_shared_session_into_their_own(team: Team) -> None:  # noqa: F811
    async with await open_store(team.bob_url) as bob, open_runtime(DshConfig(), store=bob) as rt:
        fork = await fork_session(rt.store, rt.query, team.shared)
        headers = {h.id for h in await bob.list_headers()}
        assert fork.id in headers
        surface = (await rt.query.read_surface(fork.id)).events
        assert [e.data for e in surface] == [
            e.data for e in (await rt.query.read_surface(team.shared)).events
        ]
        # the fork is bob's: he can go on in it
        chat = await rt.chat(fork.id)
        updates = [u async for u in chat.send("mine now")]
        assert any(isinstance(u, ReplyFinished) and u.status == "completed" for u in updates)
        # but alice's shared session stays hers: no retry, no edit, no profile switch
        before = await bob.read_events(team.shared)
        shared = await rt.chat(team.shared)
        with pytest.raises(DshError):
            [u async for u in shared.retry()]
        first = (await rt.query.read_surface(team.shared)).events[0].seq
        with pytest.raises(DshError):
            [u async for u in shared.edit(first, "rewritten")]
        with pytest.raises(DshError):
            await rt.switch_profile(shared, "offline")
        assert await bob.read_events(team.shared) == before
        # and her private session cannot be forked: it does not exist for him
        with pytest.raises(SessionNotFoundError):
            await fork_session(rt.store, rt.query, team.private)
    alice = await open_store(team.alice_url)
    try:
        assert fork.id not in {h.id for h in await alice.list_headers()}
    finally:
        await alice.close()

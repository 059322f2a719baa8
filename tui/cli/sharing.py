"""The sharing commands: ``share``, ``unshare`` and ``shares`` (the store enforces who may)."""

from __future__ import annotations

import argparse

from core.display import single_line, terminal_json
from tui.cli.common import resolve
from tui.shared.runtime import Runtime

__all__ = ["cmd_share", "cmd_shares", "cmd_unshare"]


async def cmd_share(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    user = single_line(args.user, 64)
    if await rt.store.share(header.id, args.user):
        print(f"shared {single_line(header.id)} with {user} (read-only)")
    else:
        print(f"{single_line(header.id)} was already shared with {user}")
    return 0


async def cmd_unshare(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    user = single_line(args.user, 64)
    if await rt.store.unshare(header.id, args.user):
        print(f"{single_line(header.id)} is no longer shared with {user}")
    else:
        print(f"{single_line(header.id)} was not shared with {user}")
    return 0


async def cmd_shares(rt: Runtime, args: argparse.Namespace) -> int:
    session_id = None if args.session is None else (await resolve(rt, args.session)).id
    shares = await rt.store.list_shares(session_id)
    if args.json:
        rows = [{"id": g.session_id, "owner": g.owner, "with": g.grantee} for g in shares]
        print(terminal_json(rows))
        return 0
    if not shares:
        print("Not shared with anyone." if session_id is not None else "No shares.")
        return 0
    titles = await rt.query.read_titles([g.session_id for g in shares])
    me = rt.store.current_user()
    for g in shares:
        title = titles.get(g.session_id)
        name = single_line(g.session_id) + (
            f"  {single_line(title.title, 50)}" if title is not None else ""
        )
        if g.owner == me:
            print(f"{name}\tshared with {single_line(g.grantee, 64)}")
        else:
            print(f"{name}\towned by {single_line(g.owner, 64)}, shared with you")
    return 0

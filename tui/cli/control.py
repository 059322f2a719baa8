"""``dsh retry``, ``dsh edit`` and ``dsh fork``: conversation control from the command line.

All three only append (``core.control``): a retried reply and what an edit replaced leave
the surface as a compaction's messages do, and stay in the log (``dsh show --json``,
``dsh export``); a fork is a new, ordinary session. Retry and edit stream the new reply
exactly as ``dsh send`` does (``tui.cli.replying``).
"""

from __future__ import annotations

import argparse
from typing import Any

from core.control import fork_session
from core.display import single_line
from core.log import SESSION_PROFILE
from tui.cli.common import (
    CliError,
    read_arg,
    resolve,
)
from tui.cli.replying import answering_chat, stream_reply
from tui.cli.subparsers import add_control_parsers as add_parsers
from tui.shared.runtime import (
    Runtime,
    profile_event_data,
    profile_event_name,
    read_latest_events,
)

__all__ = ["add_parsers", "cmd_edit", "cmd_fork", "cmd_retry"]


async def cmd_retry(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    answering = await answering_chat(rt, header, args.profile, verb="retried")
    chat = answering.chat
    return await stream_reply(rt, answering, "retry", lambda stop: chat.retry(interrupt=stop))


async def cmd_edit(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    text = read_arg(args.text)
    if not text.strip():
        raise CliError("the message is empty")
    answering = await answering_chat(rt, header, args.profile)
    chat = answering.chat
    return await stream_reply(
        rt, answering, "edit", lambda stop: chat.edit(args.seq, text, interrupt=stop)
    )


async def _parent_profile(rt: Runtime, session_id: str) -> dict[str, Any] | None:
    """What the fork records as its profile: the parent's recorded one (its current
    provider and model when still configured, else as the parent's log names it); ``None``
    when the parent follows the default, as the fork then does."""
    latest = (await read_latest_events(rt.store, SESSION_PROFILE, [session_id])).get(session_id)
    name = profile_event_name(latest)
    if latest is None or name is None:
        return None
    configured = rt.config.profiles.get(name)
    if configured is not None:
        return profile_event_data(configured)
    return {
        key: value
        for key in ("profile", "provider", "model")
        if isinstance(value := latest.data.get(key), str)
    }


async def cmd_fork(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    made = await fork_session(
        rt.store,
        rt.query,
        header.id,
        at_seq=args.at,
        title=args.title,
        profile=await _parent_profile(rt, header.id),
    )
    print(single_line(made.id))
    return 0

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
    SESSION_ARG_HELP,
    SESSION_NAME_HELP,
    CliError,
    add_profile_option,
    read_arg,
    resolve,
    seq_arg,
)
from tui.cli.replying import answering_chat, stream_reply
from tui.shared.runtime import (
    Runtime,
    profile_event_data,
    profile_event_name,
    read_latest_events,
)

__all__ = ["add_parsers", "cmd_edit", "cmd_fork", "cmd_retry"]


def add_parsers(sub: Any) -> None:
    """The parsers of ``retry``, ``edit`` and ``fork`` (``sub``: argparse's subparsers)."""
    p = sub.add_parser(
        "retry",
        help="answer the last message again; the earlier reply stays in the log",
        description="Ask the model again for the reply to SESSION's last message and stream "
        "it. The new reply takes the earlier one's place in the conversation (what the "
        "model sees next); the earlier one stays in the log, shown by `dsh show --json` and "
        "`dsh export` (marked replaced). A message without a reply is simply answered. "
        + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    add_profile_option(p, "answer with profile NAME, and keep it for the session")

    p = sub.add_parser(
        "edit",
        help="replace one of your messages by TEXT and stream the new reply",
        description="Send TEXT in place of your message SEQ (its number in the log: `dsh "
        "show` prints it as #SEQ) and stream the reply. The conversation goes on from the "
        "edited message: what came after it leaves the conversation as with a compaction, "
        "and stays in the log (`dsh show --json`, `dsh export`). " + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("seq", type=seq_arg, metavar="SEQ", help="one of your messages in SESSION")
    p.add_argument("text", help="the new message (mentions allowed); '-' reads standard input")
    add_profile_option(p, "answer with profile NAME, and keep it for the session")

    p = sub.add_parser(
        "fork",
        help="copy a session's conversation into a new session and print its id",
        description="Create a session whose conversation is SESSION's up to message SEQ (all "
        "of it without --at), and print its id. The fork records where it comes from "
        "(`dsh sessions` shows it) and answers with SESSION's profile; it is an ordinary "
        "session from then on, to send to or @-mention. SESSION is left as it is. "
        + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument(
        "--at",
        type=seq_arg,
        metavar="SEQ",
        help="the last message to take over (a message of the current conversation)",
    )
    p.add_argument("--title", metavar="TITLE", help="the fork's title (default: 'Fork of …')")


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

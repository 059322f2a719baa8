"""The commands that start a session or carry on its conversation: ``new``, ``send``,
``reply``, ``prepare``, ``compact`` and ``rename`` (retry, edit and fork: ``control``)."""

from __future__ import annotations

import argparse
import os

from core.display import escape_control, single_line, terminal_json
from core.engine import CompactionError
from core.references import SessionReferenceError
from tui.cli import profiles
from tui.cli.common import CliError, read_arg, reference_error_line, resolve
from tui.cli.replying import answering_chat, stream_reply
from tui.shared.errors import describe_error
from tui.shared.runtime import Runtime

__all__ = ["cmd_compact", "cmd_new", "cmd_prepare", "cmd_rename", "cmd_reply", "cmd_send"]


def _current_directory() -> str | None:
    """Where dsh runs (``None`` when that folder is gone): a new session's default cwd."""
    try:
        return os.getcwd()
    except OSError:
        return None


async def cmd_new(rt: Runtime, args: argparse.Namespace) -> int:
    cwd = None if args.no_cwd else args.cwd if args.cwd is not None else _current_directory()
    if args.profile is not None:
        header = await profiles.new_session_on(rt, args.profile, cwd)
    else:
        header = await rt.store.create_session(cwd=cwd)
    print(single_line(header.id))
    return 0


async def cmd_send(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    text = read_arg(args.text)
    if not text.strip():
        raise CliError("the message is empty")
    answering = await answering_chat(rt, header, args.profile)
    chat = answering.chat
    return await stream_reply(rt, answering, "send", lambda stop: chat.send(text, interrupt=stop))


async def cmd_reply(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    answering = await answering_chat(rt, header, None)
    chat = answering.chat
    return await stream_reply(
        rt, answering, "reply", lambda stop: chat.reply_to_last(interrupt=stop)
    )


async def cmd_prepare(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    chat = await rt.chat(header.id)
    try:
        messages = await chat.preview(read_arg(args.text))
    except SessionReferenceError as err:
        raise CliError(reference_error_line(err)) from err
    if args.json:
        print(terminal_json([{"role": m.role, "content": m.text} for m in messages]))
        return 0
    for i, message in enumerate(messages):
        if i:
            print()
        print(f"── {single_line(message.role)} ──")
        print(escape_control(message.text))
    return 0


async def cmd_compact(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    chat = (await answering_chat(rt, header, None, verb="compacted")).chat  # the key first
    try:
        result = await chat.compact()
    except CompactionError as err:
        raise CliError(describe_error(err)) from err
    print(f"compacted {len(result.shadowed)} messages into checkpoint #{result.checkpoint.seq}")
    return 0


async def cmd_rename(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    chat = await rt.chat(header.id)
    try:
        changed = await chat.rename(args.title)
    except ValueError as err:
        raise CliError(str(err)) from err
    print(f"renamed to {single_line(changed.title)}")
    return 0

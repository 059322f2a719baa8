"""The commands that may ask first, on a terminal, before they lose something: ``delete``,
``unlock`` (a stale reply lease) and ``demo --reset``; and the asking."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path

from core.display import escape_control, single_line
from tui.cli.common import CliError, resolve
from tui.shared.runtime import Runtime

__all__ = ["UNLOCK_QUESTION", "cmd_delete", "cmd_demo", "cmd_unlock"]


def _interactive() -> bool:
    """Whether a person can answer a question: standard input is a terminal."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed or replaced stdin
        return False


async def _read_answer() -> str:
    """One line typed on the terminal. Waited for in the event loop, not in a thread, so
    Ctrl+C at the question ends dsh at once (a thread blocked in ``readline`` would keep it
    alive until Enter)."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    ready: asyncio.Future[None] = loop.create_future()

    def on_ready() -> None:
        if not ready.done():
            ready.set_result(None)

    try:
        loop.add_reader(fd, on_ready)
    except (NotImplementedError, ValueError, OSError):  # no selector for it here
        return await asyncio.to_thread(sys.stdin.readline)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return os.read(fd, 4096).decode("utf-8", "replace")  # a terminal hands over whole lines


async def _confirm(question: str) -> bool:
    """Ask ``question`` (already escaped) on stderr; yes only for ``y``/``yes``."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = await _read_answer()
    return answer.strip().lower() in ("y", "yes")


async def cmd_delete(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    if not args.yes and _interactive():  # scripts (no terminal) delete as they always did
        title = await rt.query.read_title(header.id)
        snapshot = await rt.query.read_surface(header.id)
        count = len(snapshot.events)
        name = (
            f"'{single_line(title.title, 60)}' ({single_line(header.id)})"
            if title
            else (f"'{single_line(header.id)}'")
        )
        plural = "message" if count == 1 else "messages"
        if not await _confirm(f"Delete session {name} and its {count} {plural}?"):
            print("dsh: nothing deleted", file=sys.stderr)
            return 1
    await rt.store.delete_session(header.id)
    print(f"deleted {single_line(header.id)}")
    return 0


UNLOCK_QUESTION = "Break it? Another dsh may still be writing: two replies would interleave."


async def cmd_unlock(rt: Runtime, args: argparse.Namespace) -> int:
    from tui.shared.leases import HOLDER_CHARS, describe_lease

    header = await resolve(rt, args.session)
    name = single_line(header.id)
    lease = await rt.store.read_reply_lease(header.id)  # the owner's only: else read-only
    if lease is None:
        print(f"no reply lease on {name}")
        return 0
    print("\n".join(describe_lease(header.id, lease)))
    if not args.yes:
        if not _interactive():
            raise CliError("breaking a reply lease needs --yes (there is no terminal to ask on)")
        if not await _confirm(UNLOCK_QUESTION):
            print("dsh: nothing changed", file=sys.stderr)
            return 1
        now = await rt.store.read_reply_lease(header.id)  # it may have changed hands meanwhile
        if now is not None and now.holder != lease.holder:
            raise CliError(
                f"the lease changed hands while you answered (now held by "
                f"{single_line(now.holder, HOLDER_CHARS)}); nothing changed"
            )
    if await rt.store.break_reply_lease(header.id):
        print(f"unlocked {name}")
    else:
        print(f"no reply lease on {name} any more (given back meanwhile)")
    return 0


def _path_hint() -> str | None:
    """How to reach ``dsh`` when the hints say ``dsh`` but it is not on ``PATH`` (a venv
    that is not activated): ``None`` when ``dsh`` is found there."""
    if shutil.which("dsh") is not None:
        return None
    script = Path(sys.executable).parent / "dsh"
    if not script.exists():
        return None
    activate = script.parent / "activate"
    return (
        f"`dsh` is not on your PATH: run `. {activate}` in this shell (or call {script})."
        if activate.exists()
        else f"`dsh` is not on your PATH: call {script}, or add {script.parent} to PATH."
    )


async def cmd_demo(rt: Runtime, args: argparse.Namespace) -> int:
    from tui.cli.demo import DEMO_SESSION_IDS, create_demo, existing_demo_sessions

    if args.reset and not args.yes and (existing := await existing_demo_sessions(rt)):
        question = (
            f"Delete the {len(existing)} existing demo sessions of {len(DEMO_SESSION_IDS)}, "
            "with everything written in them, and rebuild them?"
        )
        if not _interactive():
            raise CliError(
                "--reset deletes the demo sessions and everything written in them; "
                "add --yes to confirm (there is no terminal to ask on)"
            )
        if not await _confirm(question):
            print("dsh: nothing changed", file=sys.stderr)
            return 1
    summary = await create_demo(rt, reset=args.reset)
    print(escape_control(summary))
    hint = _path_hint()
    if hint is not None:
        print(escape_control(hint))
    return 0

"""The ``dsh`` command line: one entry point for the TUI and every scripted action.

User mistakes end with one ``dsh: error: …`` line on stderr and exit code 1 (2 for usage
errors), never a traceback. Machine-readable output (``--json``, ``new``) is plain JSON.

Every line written to stdout or stderr goes through ``core.display`` (``single_line`` /
``escape_control``; ``terminal_json`` for JSON, which writes control, bidi and format
characters as ``\\uXXXX``): titles, ids, cwds, paths and even argparse's echo of an
argument may hold escape sequences, and none may reach the terminal raw.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn

from core.config import (
    ConfigError,
    DshConfig,
    database_location,
    is_database_url,
    load_config,
)
from core.display import escape_control, single_line, terminal_json
from core.engine import CompactionError
from core.errors import DshError, SessionNotFoundError, StoreError
from core.references import SessionReferenceError
from core.references.labels import safe_mention
from core.resolve import SessionNameError
from core.surrogates import merge_surrogate_pairs
from stores.replay import ReplayDatabase, ReplayStore
from tui.cli import control, profiles, usage
from tui.cli.common import (
    SESSION_ARG_HELP,
    SESSION_NAME_HELP,
    CliError,
    add_profile_option,
    read_arg,
    reference_error_line,
    resolve,
)
from tui.cli.listing import cmd_sessions
from tui.cli.replying import answering_chat, stream_reply
from tui.shared.errors import describe_error
from tui.shared.progress import terminal_progress
from tui.shared.runtime import Runtime, offline_delay_from_env, open_runtime
from tui.shared.searching import find_messages

IMPORT_SOURCES = ("claude-code", "codex", "chatgpt", "reference", "dsh")
"""What ``dsh import --from`` names: a tool (``core.importers.foreign_import.FORMAT_MODULES``)
or one of dsh's own kinds of log."""

__all__ = ["main"]

VERSION = "0.1.0"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        # The message may echo an argument (an invalid choice, an unknown option).
        self.exit(2, f"dsh: error: {single_line(message)}\n")


def _screen_size(text: str) -> tuple[int, int]:
    """``COLUMNSxROWS`` for ``replay --size``, within what a terminal could be."""
    columns, sep, rows = text.lower().partition("x")
    if sep and columns.isdigit() and rows.isdigit():
        size = (int(columns), int(rows))
        if 20 <= size[0] <= 1000 and 5 <= size[1] <= 500:
            return size
    raise argparse.ArgumentTypeError(
        f"expected COLUMNSxROWS such as 120x40 (20–1000 by 5–500), not {text!r}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dsh",
        description="A terminal chat whose messages can reference other chat sessions.",
    )
    parser.add_argument(
        "--db",
        metavar="LOCATION",
        help="the database: a SQLite file or a postgresql:// URL (overrides DSH_DB and the config)",
    )
    parser.add_argument(
        "--config", metavar="PATH", help="the config file (default: user config dir)"
    )
    parser.add_argument("--version", action="version", version=f"dsh {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "sessions",
        help="list sessions, most recently active first",
        description="List the sessions, most recently active first, with each one's "
        "profile (the one its log records, else the default's) and, for a fork, the "
        "session and message it was forked from.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print a JSON array: [{"id", "title", "cwd", "created_at", "owner", '
        '"parent": {"id", "seq"} | null, "profile"}]',
    )
    profiles.add_parser(sub)

    p = sub.add_parser("new", help="create a session and print its id")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--cwd",
        help="working directory recorded on the session (default: the current directory, "
        "as the app's Ctrl+N)",
    )
    where.add_argument("--no-cwd", action="store_true", help="record no working directory")
    p.add_argument(
        "--profile",
        metavar="NAME",
        help="the profile the session answers with (recorded in its log; default: the "
        "default profile, followed as it changes); `dsh profiles` lists them",
    )

    p = sub.add_parser(
        "send",
        help="send a message (mentions allowed) and stream the reply",
        description="Send TEXT to SESSION and stream the reply. " + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("text", help="the message; '-' reads standard input")
    add_profile_option(p, "switch the session to profile NAME, then send")

    p = sub.add_parser(
        "reply",
        help="answer the session's last message again (after a reply that failed)",
        description="Stream the model's answer to SESSION's last message, when that message "
        "has no reply yet (a reply that could not be stored, a model error before any word). "
        "Nothing is appended but the reply.",
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    control.add_parsers(sub)

    p = sub.add_parser("show", help="print a session's transcript")
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("--json", action="store_true", help="print the raw event log as JSON")
    p.add_argument("--expand", action="store_true", help="expand reference cards")
    p.add_argument(
        "--tail",
        type=_tail_count,
        metavar="N",
        help="only the last N items of the conversation (reads only those from the log)",
    )

    p = sub.add_parser("prepare", help="print what the model would receive, without sending")
    p.add_argument("--session", required=True, help=SESSION_ARG_HELP)
    p.add_argument("text", help="the draft; '-' reads standard input")
    p.add_argument("--json", action="store_true", help="print the messages as JSON")

    usage.add_parser(sub)

    p = sub.add_parser("compact", help="replace a session's conversation by a summary")
    p.add_argument("session", help=SESSION_ARG_HELP)

    p = sub.add_parser("rename", help="set a session's title")
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("title")

    p = sub.add_parser("export", help="export a session")
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument(
        "--format",
        choices=("md", "json", "reference"),
        default="md",
        help="md (readable), json (dsh's log) or reference (deepseek-harness raw JSONL)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    p = sub.add_parser(
        "import",
        help="import sessions: dsh exports, deepseek-harness logs, Claude Code, Codex, ChatGPT",
        description="Import a session log (as written by export --format json, or a "
        "deepseek-harness log, raw or Zstandard), the sessions of Claude Code, Codex or a "
        "ChatGPT data export, or every one of them under a directory; what each file is, is "
        "found from its contents unless --from names it. A dsh or reference log already "
        "present with the same events is skipped; one with the same id and other events is "
        "reported and never overwritten. A session of another tool imported before gets only "
        "its new events; one changed at the source since is reported, not merged.",
    )
    p.add_argument(
        "file",
        nargs="?",
        help="a file or a directory; '-' reads standard input (a dsh or reference log); "
        "none with --from claude-code or codex: the tool's own folder",
    )
    p.add_argument(
        "--from",
        dest="source",
        choices=IMPORT_SOURCES,
        help="import only this format (a file that is not one is an error)",
    )

    p = sub.add_parser(
        "replay",
        help="open one session log file read-only, or render it as SVG or text (QA)",
        description="Show a session log file (a dsh export or a deepseek-harness log) exactly "
        "as dsh shows a stored session, without importing it: no database is opened or "
        "written. Without --svg or --text the app opens on it, read-only.",
    )
    p.add_argument("file", help="the log file")
    p.add_argument("--svg", metavar="OUT", help="write the app's screen as SVG to OUT")
    p.add_argument(
        "--size", default="120x40", type=_screen_size, help="the screen for --svg (120x40)"
    )
    p.add_argument("--expand-cards", action="store_true", help="expand reference cards")
    p.add_argument("--at", type=int, metavar="SEQ", help="the session as it was at event SEQ")
    p.add_argument("--text", action="store_true", help="print the transcript like dsh show")

    p = sub.add_parser(
        "delete",
        help="delete a session",
        description="Delete a session. On a terminal dsh asks first; --yes does not ask.",
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("-y", "--yes", action="store_true", help="delete without asking")

    p = sub.add_parser(
        "unlock",
        help="break a stale reply lease of your session (a dsh killed mid-reply elsewhere)",
        description="Break SESSION's reply lease, which a dsh holds while it writes a reply "
        "or compacts, so that no other can. One killed on another machine or container "
        "keeps its session busy until the lease runs out (30 s). dsh says who holds it and "
        "asks first on a terminal; --yes does not ask (and is needed without a terminal).",
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("-y", "--yes", action="store_true", help="break it without asking")

    p = sub.add_parser(
        "share",
        help="let another user read one of your sessions",
        description="Let USER (a database role on PostgreSQL, a user name on SQLite) read "
        "SESSION, which you own: they see it, can show, export and @-mention it, never "
        "write it. Take it back with `dsh unshare`.",
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("--with", dest="user", required=True, metavar="USER")

    p = sub.add_parser("unshare", help="take back what `dsh share` gave")
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("--with", dest="user", required=True, metavar="USER")

    p = sub.add_parser(
        "shares",
        help="list the grants on your sessions and the sessions shared with you",
    )
    p.add_argument("session", nargs="?")
    p.add_argument("--json", action="store_true", help="print a JSON array")

    p = sub.add_parser("mention", help="print the @ mention that references a session")
    p.add_argument("session", help=SESSION_ARG_HELP)

    p = sub.add_parser(
        "candidates",
        help="sessions a message in SESSION could reference",
        description="Sessions a message in SESSION could reference: those whose id, cwd or "
        "title contain QUERY (the picker's order), then those whose messages contain it "
        "(best match first, with the message's snippet).",
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("query", nargs="?", default="")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "search",
        help="find messages by their words, across every session",
        description="Find the user and assistant messages that contain every word of QUERY "
        "(case-insensitive substrings, any script), best match first.",
    )
    p.add_argument("query")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.add_argument(
        "--limit", type=int, default=20, metavar="N", help="at most N messages (default 20)"
    )

    p = sub.add_parser(
        "demo",
        help="create the missing demo sessions (existing ones are left untouched)",
        description="Create the demo sessions that are missing; existing ones are left "
        "untouched. --reset deletes and rebuilds them (asks first on a terminal).",
    )
    p.add_argument(
        "--reset", action="store_true", help="delete and rebuild the demo sessions (data loss)"
    )
    p.add_argument("-y", "--yes", action="store_true", help="with --reset: do not ask")

    p = sub.add_parser(
        "acp",
        help="serve the Agent Client Protocol on stdin/stdout (for editors such as Zed)",
        description="Run dsh as an ACP agent: JSON-RPC on stdin/stdout until end of input. "
        "Logs go to stderr, or to --log FILE.",
    )
    p.add_argument("--log", metavar="FILE", help="append the agent's log to FILE")

    p = sub.add_parser(
        "mcp",
        help="serve your sessions to AI agents over MCP on stdin/stdout (read-only)",
        description="Run dsh as a Model Context Protocol server: JSON-RPC on stdin/stdout "
        "until end of input. Tools: search_sessions, list_sessions, read_session (read-only, "
        "as the user dsh connects as). Logs go to stderr, or to --log FILE.",
    )
    p.add_argument("--log", metavar="FILE", help="append the server's log to FILE")

    p = sub.add_parser(
        "migrate",
        help="copy every session to another database (SQLite file or postgresql:// URL)",
        description="Copy every session from --from (default: the configured database) to "
        "--to, losslessly: same ids, seqs, times and data. Sessions already there are "
        "skipped, or completed when the source has more, so it can be run again after an "
        "interruption or more work. A session that differs in the target is reported and "
        "left alone (exit status 1).",
    )
    p.add_argument("--to", required=True, metavar="LOCATION", help="the database to copy into")
    p.add_argument(
        "--from",
        dest="source",
        metavar="LOCATION",
        help="the database to copy from (default: --db, DSH_DB or the config)",
    )
    sub.add_parser("tui", help="open the terminal UI (the default)")
    return parser


# --------------------------------------------------------------------------- helpers


def _current_directory() -> str | None:
    """Where dsh runs (``None`` when that folder is gone): a new session's default cwd."""
    try:
        return os.getcwd()
    except OSError:
        return None


# --------------------------------------------------------------------------- commands


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


def _tail_count(text: str) -> int:
    """``--tail N``: a positive count (argparse turns the error into one line)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a number of items (1 or more), got {text!r}")
    return count


async def cmd_show(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    from tui.cli.streamed import print_events_json, print_surface

    if args.json:  # read and printed a page at a time (issue 31: a 1 GB session)
        await print_events_json(rt.store, header.id)
        return 0
    if args.tail is None:
        await print_surface(rt.store, rt.query, header.id, expand=args.expand)
        return 0
    from tui.cli.output import print_transcript  # Rich loads only to draw
    from tui.shared.items import with_unknown_events

    # the newest N surface items: only their events are read
    window = await rt.query.read_surface_page(header.id, args.tail)
    shown = with_unknown_events(window.events, window.unknown)
    title = await rt.query.read_title(header.id)
    print_transcript(header, title.title if title else None, shown, expand=args.expand)
    return 0


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


async def cmd_export(rt: Runtime, args: argparse.Namespace) -> int:
    from tui.cli.streamed import CannotExport, export_session

    header = await resolve(rt, args.session)
    try:  # read and written a page at a time (issue 31: a 1 GB session)
        written = await export_session(rt.store, rt.query, header.id, args.format, args.output)
    except CannotExport as err:
        raise CliError(str(err)) from err
    if written is not None:
        # stdout is free here (the export went to the file): say where it went
        print(f"exported to {single_line(str(written))}")
    return 0


async def cmd_import(rt: Runtime, args: argparse.Namespace) -> int:
    from core.logfile import LogImportError
    from tui.cli.importing import (
        ImportUsageError,
        import_log,
        import_path,
        import_planned,
        spool_stdin,
    )

    try:
        code = await import_planned(rt.store, args.file, args.source)
    except ImportUsageError as err:
        raise CliError(str(err)) from err
    if code is not None:
        return code
    if args.file == "-":
        try:
            spooled = await asyncio.to_thread(spool_stdin)
        except (OSError, LogImportError) as err:
            reason = getattr(err, "strerror", None) or err
            raise CliError(f"cannot read {args.file}: {reason}") from err
        with spooled:
            outcome = await import_log(rt.store, spooled)
    else:
        outcome = await import_path(rt.store, args.file)
    sid = single_line(outcome.session_id or "")
    if outcome.status == "skipped":
        raise CliError(f"cannot import {args.file}: {outcome.reason}; nothing imported")
    if outcome.status == "rejected":
        raise CliError(f"cannot import {args.file}: {outcome.reason}; nothing imported")
    if outcome.status == "conflict":
        raise CliError(
            f"cannot import {args.file}: a session with id {sid} already exists "
            "with different events; it is never overwritten"
        )
    if outcome.status == "present":
        print(f"{sid} is already present with the same events: skipped", file=sys.stderr)
    print(sid)
    return 0


def _check_import(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``dsh import`` without a path reads a tool's own folder: only Claude Code's and
    Codex's have one."""
    if args.file is None and args.source not in ("claude-code", "codex"):
        parser.error("import: give a FILE or DIR (only --from claude-code or codex may omit it)")
    if args.file == "-" and args.source not in (None, "dsh", "reference"):
        parser.error(
            f"import: standard input can hold a dsh or reference log, not --from {args.source}"
        )


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


async def cmd_mention(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    title = await rt.query.read_title(header.id)
    # A one-line, bounded label without control/format characters or "<"/">": the mention
    # lands in the user's own message (``dsh send X "… $(dsh mention Y)"``).
    print(safe_mention(header.id, title.title if title else None))
    return 0


async def cmd_candidates(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    try:
        rows = await rt.service.discover(header, args.query)
    except SessionReferenceError as err:
        raise CliError(reference_error_line(err)) from err
    if args.json:
        print(
            terminal_json(
                [
                    {
                        "id": row.candidate.session_id,
                        "label": row.candidate.label,
                        "cwd": row.candidate.cwd,
                        "created_at": row.candidate.created_at,
                        "mention": safe_mention(row.candidate.session_id, row.candidate.label),
                        # A body match: the message that matched (null: id, cwd or title).
                        "match": None
                        if row.hit is None
                        else {"seq": row.hit.seq, "snippet": row.hit.snippet},
                    }
                    for row in rows
                ]
            )
        )
        return 0
    for row in rows:
        c = row.candidate
        where = single_line(c.cwd) if c.cwd else "no cwd"
        line = f"{single_line(c.label, 50)}\t{where}\t{safe_mention(c.session_id, c.label)}"
        if row.hit is not None:
            line += f"\t#{row.hit.seq} {single_line(row.hit.snippet)}"
        print(line)
    return 0


async def cmd_search(rt: Runtime, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be a positive number, not {args.limit}")
    found = await find_messages(rt, args.query, args.limit)
    if found.note:
        print(f"dsh: note: {found.note}", file=sys.stderr)
    hits, title_of = found.hits, found.titles
    if args.json:
        print(terminal_json(found.json_rows()))
        return 0
    if not hits:
        print(
            f"No message contains: {single_line(args.query, 60)}"
            if args.query.strip()
            else "Nothing to search for: give a word or two."
        )
        return 0
    from tui.cli.output import print_search_hits  # Rich loads only to draw

    print_search_hits(
        [
            (title_of.get(h.session_id) or h.session_id, h.session_id, h.seq, h.snippet, h.spans)
            for h in hits
        ]
    )
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


COMMANDS: dict[str, Callable[[Runtime, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "sessions": cmd_sessions,
    "new": cmd_new,
    "send": cmd_send,
    "reply": cmd_reply,
    "retry": control.cmd_retry,
    "edit": control.cmd_edit,
    "fork": control.cmd_fork,
    "usage": usage.cmd_usage,
    "show": cmd_show,
    "prepare": cmd_prepare,
    "compact": cmd_compact,
    "rename": cmd_rename,
    "export": cmd_export,
    "import": cmd_import,
    "delete": cmd_delete,
    "unlock": cmd_unlock,
    "mention": cmd_mention,
    "share": cmd_share,
    "unshare": cmd_unshare,
    "shares": cmd_shares,
    "candidates": cmd_candidates,
    "search": cmd_search,
    "demo": cmd_demo,
}


async def _run(config: DshConfig, args: argparse.Namespace) -> int:
    # DSH_OFFLINE_DELAY slows the offline model here as in the TUI and `dsh acp` (demos, tests).
    async with open_runtime(
        config, offline_delay=offline_delay_from_env(os.environ), progress=terminal_progress()
    ) as rt:
        reason = getattr(rt.store, "read_only_reason", None)
        if reason:  # a full disk: reading works, writing will say why it cannot
            print(f"dsh: note: {single_line(reason)}", file=sys.stderr)
        return await COMMANDS[args.command](rt, args)


Replay = ReplayStore | ReplayDatabase


def _replay(config: DshConfig, args: argparse.Namespace) -> int:
    from tui.shared.replay import open_replay

    # The app shows the newest page first and checks the rest in the background; --svg
    # and --text check the whole file first (a bad one: exit 1 with its line).
    lazy = not args.text and args.svg is None
    store = asyncio.run(open_replay(args.file, at=args.at, lazy=lazy))
    try:
        return _replay_shown(config, store, args)
    finally:  # a large log's temporary database goes with it (also on Ctrl+C)
        asyncio.run(store.close())


def _replay_shown(config: DshConfig, store: Replay, args: argparse.Namespace) -> int:
    from tui.shared.replay import replay_runtime

    runtime = replay_runtime(config, store)
    if args.text:
        return asyncio.run(_replay_text(runtime, args))
    if args.svg is not None:
        svg = asyncio.run(_replay_svg(runtime, store, args))
        try:
            from tui.shared.files import write_atomically

            written = write_atomically(Path(args.svg), svg)
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or err
            raise CliError(f"cannot write {args.svg}: {reason}") from err
        print(f"wrote {single_line(str(written))}")
        return 0
    from tui.app.app import run_app

    return run_app(config, runtime)


async def _replay_svg(runtime: Runtime, store: Replay, args: argparse.Namespace) -> str:
    from tui.app.svg import render_svg  # Textual, without a terminal
    from tui.shared.replay import replay_now

    now = await replay_now(store)
    return await render_svg(
        runtime, size=args.size, expand_cards=args.expand_cards, now=lambda: now
    )


async def _replay_text(runtime: Runtime, args: argparse.Namespace) -> int:
    from tui.cli.streamed import print_surface

    (header,) = await runtime.store.list_headers()
    await print_surface(runtime.store, runtime.query, header.id, expand=args.expand_cards)
    return 0


_MIGRATE_WORDS = {
    "copied": "copied",
    "extended": "completed",
    "present": "already there",
    "conflict": "CONFLICT (differs in the target; left alone)",
    "foreign": "not yours (left for its owner to copy)",
    "invalid": "REFUSED (the target does not take it; skipped)",
    "busy": "BUSY (another process holds it in the target; run migrate again)",
}


async def migrate(config: DshConfig, args: argparse.Namespace) -> int:
    """``dsh migrate``: progress on stderr, one session a line; the summary on stdout."""
    from stores import display_location, open_store
    from stores.migrate import SessionOutcome, migrate_sessions

    source_at = (
        config.database
        if args.source is None
        else database_location(args.source, "--from", relative_ok=True)
    )
    target_at = database_location(args.to, "--to", relative_ok=True)
    source_name, target_name = display_location(source_at), display_location(target_at)
    if str(source_at) == str(target_at):
        raise CliError(f"--from and --to are the same database ({source_name})")
    if not is_database_url(str(source_at)) and not await asyncio.to_thread(Path(source_at).is_file):
        raise CliError(f"there is no database at {source_name} to copy from")

    def progress(position: int, total: int, outcome: SessionOutcome) -> None:
        events = f" ({outcome.events} events)" if outcome.events else ""
        if outcome.owner is not None and outcome.owner != target.current_user():
            events += f" (owned by {single_line(outcome.owner, 32)})"
        if outcome.shares:
            events += f" (shared with {outcome.shares} more)"
        if outcome.reason:
            events += f": {single_line(outcome.reason, 200)}"
        print(
            f"[{position}/{total}] {_MIGRATE_WORDS[outcome.outcome]}: "
            f"{single_line(outcome.session_id, 60)}{events}",
            file=sys.stderr,
            flush=True,
        )

    source = await open_store(source_at, postgres=config.postgres)
    try:
        target = await open_store(target_at, postgres=config.postgres)
        try:
            report = await migrate_sessions(source, target, progress=progress)
        finally:
            await target.close()
    finally:
        await source.close()
    for problem in report.share_problems:
        print(f"dsh: warning: a share was not copied: {single_line(problem)}", file=sys.stderr)
    foreign = f", {len(report.foreign)} not yours" if report.foreign else ""
    foreign += f", {len(report.invalid)} refused" if report.invalid else ""
    foreign += f", {len(report.busy)} busy" if report.busy else ""
    grants = f"; {report.shares} shares made" if report.shares else ""
    print(
        f"{report.total} sessions in {single_line(source_name)}: {report.copied} copied, "
        f"{report.extended} completed, {report.present} already there, "
        f"{len(report.conflicts)} conflicts{foreign}; {report.events} events written to "
        f"{single_line(target_name)}{grants}"
    )
    return 1 if report.conflicts or report.invalid or report.busy else 0


def _configure(args: argparse.Namespace) -> DshConfig:
    config = load_config(config_path=Path(args.config).expanduser() if args.config else None)
    if args.db:
        config = config.with_database(args.db)
    return config


def _fail(message: str, code: int = 1) -> int:
    # Escaping is idempotent: parts escaped earlier stay as they are.
    print(f"dsh: error: {single_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    # Every argument (names, ids, a message's text) is user input: a surrogate pair in it
    # is its character (SPEC §4.1).
    given = sys.argv[1:] if argv is None else argv
    parser = _parser()
    args = parser.parse_args([merge_surrogate_pairs(arg) for arg in given])
    command = args.command or "tui"
    if command == "import":
        _check_import(parser, args)
    try:
        config = _configure(args)
        if command == "tui":
            from tui.app.app import run_app  # Textual loads only when the app is wanted

            return run_app(config)
        if command == "replay":  # one file, read-only: no database is opened
            return _replay(config, args)

        if command == "profiles":  # the config only: no database is opened
            return profiles.print_profiles(config, args.json)
        if command == "migrate":  # two stores, none of them the runtime's
            return asyncio.run(migrate(config, args))
        if command == "acp":  # speaks JSON-RPC on stdout: never the Rich output path
            from tui.acp import run_acp

            return run_acp(config, log_file=args.log)
        if command == "mcp":  # speaks JSON-RPC on stdout, as acp
            from tui.mcp import run_mcp

            return run_mcp(config, version=VERSION, log_file=args.log)
        return asyncio.run(_run(config, args))
    except ConfigError as err:
        return _fail(describe_error(err))
    except CliError as err:
        return _fail(str(err))
    except SessionNameError as err:
        code = _fail(describe_error(err))
        for header, title in err.matches:  # one per line, escaped, as `dsh sessions` shows them
            label = single_line(title, 60) if title is not None else "(no title)"
            print(f"  {single_line(header.id)}  {label}", file=sys.stderr)
        return code
    except SessionNotFoundError as err:
        return _fail(describe_error(err))
    except StoreError as err:
        return _fail(describe_error(err))
    except SessionReferenceError as err:
        return _fail(reference_error_line(err))
    except DshError as err:
        return _fail(describe_error(err))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

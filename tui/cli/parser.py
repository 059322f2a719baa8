"""The ``dsh`` argument parser: every command, its options and their help (the larger
commands' are declared in ``subparsers``). Argparse's errors are one ``dsh: error: …`` line
with exit code 2, any echoed argument escaped. It imports no command's module: ``dsh
--help`` loads argparse and these declarations only."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from tui.cli.subparsers import (
    SESSION_ARG_HELP,
    SESSION_NAME_HELP,
    add_control_parsers,
    add_profile_option,
    add_profiles_parser,
    add_usage_parser,
)

__all__ = ["IMPORT_SOURCES", "VERSION", "build_parser"]

IMPORT_SOURCES = ("claude-code", "codex", "chatgpt", "reference", "dsh")
"""What ``dsh import --from`` names: a tool (``core.importers.foreign_import.FORMAT_MODULES``)
or one of dsh's own kinds of log."""

VERSION = "0.1.0"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from core.display import single_line

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


def _tail_count(text: str) -> int:
    """``--tail N``: a positive count (argparse turns the error into one line)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a number of items (1 or more), got {text!r}")
    return count


def build_parser() -> argparse.ArgumentParser:
    """The ``dsh`` argument parser: every command and its options."""
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
    add_profiles_parser(sub)

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
    add_control_parsers(sub)

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

    add_usage_parser(sub)

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
